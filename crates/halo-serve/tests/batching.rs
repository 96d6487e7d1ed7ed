//! A batching model (`max_batch_size` > 0) answers concurrent requests with one call: the
//! requests waiting when a computing thread frees are joined along the batch dimension, and
//! each gets the rows a call of its own would have given. The test-scale MLP of the benchmark
//! set (`tensor<?x16xf32>` to `tensor<?x10xf32>`) is the model.

use halo_hal::StatusCode;
use halo_serve::metrics::Metrics;
use halo_serve::model::{InputTensor, OutputTensor};
use halo_serve::model_configuration::ModelConfiguration;
use halo_serve::statistics::ModelStatisticsEntry;
use halo_serve::{Model, ModelConfig};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The benchmark set's test-scale MLP, built for this host's CPU.
fn mlp_module() -> PathBuf {
    let models = fixtures().join("benchmark-models");
    match cfg!(target_arch = "aarch64") {
        true => models.join("arm_64/mlp.vmfb"),
        false => models.join("mlp.vmfb"),
    }
}

fn config(module: PathBuf, function: &str, max_batch_size: u64) -> ModelConfig {
    ModelConfig {
        name: "batched".into(),
        version: "1".into(),
        modules: vec![module],
        function: Some(function.into()),
        devices: vec!["local-task".into()],
        max_concurrency: 1,
        max_queue: 64,
        timeout: None,
        input_names: vec![],
        output_names: vec![],
        input_types: vec![],
        output_types: vec![],
        output_labels: Default::default(),
        // A batching model warms up with one row; the others here have dynamic shapes.
        warmup: max_batch_size > 0,
        max_batch_size,
        max_queue_delay: Duration::ZERO,
    }
}

fn mlp(max_batch_size: u64) -> Arc<Model> {
    mlp_with(config(mlp_module(), "mlp", max_batch_size))
}

fn mlp_with(config: ModelConfig) -> Arc<Model> {
    Arc::new(Model::load(&halo_runtime::Instance::new(), config).expect("the MLP loads"))
}

/// `rows` rows of 16 values, different for each `seed`.
fn request(rows: u64, seed: u64) -> Vec<InputTensor> {
    let values: Vec<f32> = (0..rows * 16)
        .map(|i| ((i * 7 + seed * 13) % 23) as f32 / 11.0 - 1.0)
        .collect();
    vec![InputTensor {
        name: "input".into(),
        datatype: "FP32".into(),
        shape: vec![rows, 16],
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }]
}

fn floats(output: &OutputTensor) -> Vec<f32> {
    output
        .bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Holds the model's one computing thread until the returned sender is used or dropped.
fn occupy_the_computing_thread(model: &Model) -> (mpsc::Sender<()>, impl Drop) {
    let (release, released) = mpsc::channel::<()>();
    let (started, running) = mpsc::channel::<()>();
    let ticket = model
        .compute_threads()
        .submit(move || {
            let _ = started.send(());
            let _ = released.recv();
        })
        .expect("a computing thread");
    running
        .recv_timeout(Duration::from_secs(30))
        .expect("the thread runs the holder");
    (release, ticket)
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn requests_waiting_for_a_thread_share_one_call_and_each_gets_its_own_answer() {
    let model = mlp(8);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let metrics = Arc::new(Metrics::new());
    let rows = [1u64, 2, 1, 3, 1];
    let alone: Vec<Vec<f32>> = (rows.iter().enumerate())
        .map(|(seed, &n)| floats(&model.infer(request(n, seed as u64)).expect("a call of its own")[0]))
        .collect();
    let (release, holder) = occupy_the_computing_thread(&model);
    let answers: Vec<_> = (rows.iter().enumerate())
        .map(|(seed, &n)| {
            let (model, metrics) = (model.clone(), metrics.clone());
            runtime.spawn(async move { model.run(request(n, seed as u64), &metrics, None).await })
        })
        .collect();
    wait_until("every request waits", || model.waiting_for_batch() == rows.len());
    release.send(()).expect("the holder listens");
    for ((answer, expected), &n) in answers.into_iter().zip(&alone).zip(&rows) {
        let outputs = runtime.block_on(answer).expect("joined").expect("answered");
        assert_eq!(outputs[0].shape, [n, 10], "the request's own rows");
        let got = floats(&outputs[0]);
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{got:?} != {expected:?}");
        }
    }
    drop(holder);
    let statistics = model.statistics();
    assert_eq!(statistics.execution_count, 1, "one call for the five requests");
    assert_eq!(statistics.inference_count, 8, "requests count their rows");
    assert_eq!(
        (statistics.batch_stats.len(), statistics.batch_stats[0].batch_size),
        (1, 8)
    );
    let reported = serde_json::to_value(ModelStatisticsEntry::of(&model)).unwrap();
    assert_eq!(reported["batch_stats"][0]["batch_size"], 8, "{reported}");
    assert_eq!(reported["batch_stats"][0]["compute_infer"]["count"], 1, "{reported}");
    let encoded = metrics.encode(&Default::default());
    assert!(
        encoded.contains("halo_inference_batch_rows_sum{model=\"batched\"} 8.0"),
        "{encoded}"
    );
}

#[test]
fn a_call_takes_at_most_max_batch_size_rows_and_the_rest_wait_for_the_next() {
    let model = mlp(4);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let metrics = Arc::new(Metrics::new());
    let (release, holder) = occupy_the_computing_thread(&model);
    let answers: Vec<_> = (0..6)
        .map(|seed| {
            let (model, metrics) = (model.clone(), metrics.clone());
            runtime.spawn(async move { model.run(request(1, seed), &metrics, None).await })
        })
        .collect();
    wait_until("every request waits", || model.waiting_for_batch() == 6);
    release.send(()).expect("the holder listens");
    for answer in answers {
        runtime.block_on(answer).expect("joined").expect("answered");
    }
    drop(holder);
    let sizes: Vec<(u64, u64)> = (model.statistics().batch_stats.iter())
        .map(|b| (b.batch_size, b.compute_infer.count))
        .collect();
    assert_eq!(sizes, [(2, 1), (4, 1)], "four rows, then the two left");

    let error = runtime
        .block_on(model.run(request(5, 0), &metrics, None))
        .expect_err("five rows are more than the model takes");
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    assert!(error.to_string().contains("at most 4 (max_batch_size)"), "{error}");
    let error = runtime
        .block_on(model.run(request(0, 0), &metrics, None))
        .expect_err("a request without rows");
    assert!(
        error.to_string().contains("has 0 rows along the batch dimension"),
        "{error}"
    );
}

#[test]
fn a_request_out_of_time_while_waiting_is_answered_and_left_out_of_the_call() {
    let model = mlp(8);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let metrics = Arc::new(Metrics::new());
    let (release, holder) = occupy_the_computing_thread(&model);
    let patient = {
        let (model, metrics) = (model.clone(), metrics.clone());
        runtime.spawn(async move { model.run(request(2, 1), &metrics, None).await })
    };
    let deadline = Some(Instant::now() + Duration::from_millis(50));
    let error = runtime
        .block_on(model.run(request(3, 2), &metrics, deadline))
        .expect_err("its deadline passes while the thread is held");
    assert_eq!(error.code(), StatusCode::DeadlineExceeded);
    assert!(error.to_string().contains("while waiting for a turn"), "{error}");
    assert_eq!(model.waiting_for_batch(), 1, "the late request left the queue");
    release.send(()).expect("the holder listens");
    runtime.block_on(patient).expect("joined").expect("answered");
    drop(holder);
    let sizes: Vec<u64> = model.statistics().batch_stats.iter().map(|b| b.batch_size).collect();
    assert_eq!(sizes, [2], "the call had the patient request's rows only");
}

#[test]
fn with_a_queue_delay_a_free_thread_waits_for_company_until_the_call_is_full() {
    let model = mlp_with(ModelConfig {
        max_queue_delay: Duration::from_secs(8),
        ..config(mlp_module(), "mlp", 3)
    });
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let metrics = Arc::new(Metrics::new());
    let started = Instant::now();
    let first = {
        let (model, metrics) = (model.clone(), metrics.clone());
        runtime.spawn(async move { model.run(request(1, 1), &metrics, None).await })
    };
    wait_until("the first request waits", || model.waiting_for_batch() == 1);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(model.waiting_for_batch(), 1, "the free thread waits for company");
    let second = runtime
        .block_on(model.run(request(2, 2), &metrics, None))
        .expect("answered");
    assert_eq!(second[0].shape, [2, 10]);
    runtime.block_on(first).expect("joined").expect("answered");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the full call did not wait out the delay"
    );
    let sizes: Vec<u64> = model.statistics().batch_stats.iter().map(|b| b.batch_size).collect();
    assert_eq!(sizes, [3]);
    let reported = serde_json::to_value(ModelConfiguration::of(&model)).unwrap();
    assert_eq!(
        reported["dynamic_batching"]["max_queue_delay_microseconds"], 8_000_000,
        "{reported}"
    );

    let error = Model::load(
        &halo_runtime::Instance::new(),
        ModelConfig {
            max_queue_delay: Duration::from_millis(1),
            ..config(mlp_module(), "mlp", 0)
        },
    )
    .err()
    .expect("a delay without batching is refused");
    assert!(
        error
            .to_string()
            .contains("max_queue_delay_us 1000 needs max_batch_size"),
        "{error}"
    );
}

/// The MLP with functions for batches of 1, 2 and 4 beside its own (`halo compile
/// --batch-sizes=1,2,4`), built for this host's CPU.
fn mlp_batch_sizes_module() -> PathBuf {
    let models = fixtures().join("benchmark-models");
    match cfg!(target_arch = "aarch64") {
        true => models.join("arm_64/mlp_batch_sizes.vmfb"),
        false => models.join("mlp_batch_sizes.vmfb"),
    }
}

#[test]
fn fixed_size_functions_take_batches_padded_up_to_their_size_and_give_back_only_the_real_rows() {
    // No function named: the module's one function, its fixed-size forms aside.
    let model = mlp_with(ModelConfig {
        function: None,
        ..config(mlp_batch_sizes_module(), "mlp", 4)
    });
    assert_eq!(model.batch_sizes(), [1, 2, 4]);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let metrics = Arc::new(Metrics::new());
    // The same MLP compiled without the fixed sizes: its one dynamic function.
    let plain = mlp(0);
    let alone: Vec<Vec<f32>> = [(1, 1), (2, 2)]
        .iter()
        .map(|&(rows, seed)| floats(&plain.infer(request(rows, seed)).expect("a call of its own")[0]))
        .collect();
    let (release, holder) = occupy_the_computing_thread(&model);
    let answers: Vec<_> = [(1, 1), (2, 2)]
        .iter()
        .map(|&(rows, seed)| {
            let (model, metrics) = (model.clone(), metrics.clone());
            runtime.spawn(async move { model.run(request(rows, seed), &metrics, None).await })
        })
        .collect();
    wait_until("both requests wait", || model.waiting_for_batch() == 2);
    release.send(()).expect("the holder listens");
    for ((answer, expected), rows) in answers.into_iter().zip(&alone).zip([1u64, 2]) {
        let outputs = runtime.block_on(answer).expect("joined").expect("answered");
        assert_eq!(outputs[0].shape, [rows, 10], "the padding row is not returned");
        let got = floats(&outputs[0]);
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{got:?} != {expected:?}");
        }
    }
    drop(holder);
    let sizes: Vec<u64> = model.statistics().batch_stats.iter().map(|b| b.batch_size).collect();
    assert_eq!(sizes, [3], "one call of three rows (run as four)");
    let reported = serde_json::to_value(ModelConfiguration::of(&model)).unwrap();
    assert_eq!(
        reported["dynamic_batching"]["preferred_batch_size"],
        serde_json::json!([1, 2, 4]),
        "{reported}"
    );

    let error = Model::load(
        &halo_runtime::Instance::new(),
        config(mlp_batch_sizes_module(), "mlp", 8),
    )
    .err()
    .expect("more rows than any function takes");
    assert!(
        error.to_string().contains(
            "max_batch_size 8 is more than the largest fixed batch size the module has functions for ([1, 2, 4])"
        ),
        "{error}"
    );
}

/// What `run` returns, and the functions the runtime called on this thread meanwhile (its `call`
/// spans' `function` fields).
fn functions_called<T>(run: impl FnOnce() -> T) -> (T, Vec<String>) {
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};

    struct Calls(Arc<std::sync::Mutex<Vec<String>>>);
    struct Function<'a>(&'a mut Option<String>);

    impl Visit for Function<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "function" {
                *self.0 = Some(value.to_string());
            }
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    impl tracing::Subscriber for Calls {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            if span.metadata().name() == "call" {
                let mut function = None;
                span.record(&mut Function(&mut function));
                self.0.lock().unwrap().extend(function);
            }
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &tracing::Event<'_>) {}
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let result = tracing::subscriber::with_default(Calls(calls.clone()), run);
    let called = calls.lock().unwrap().clone();
    (result, called)
}

#[test]
fn a_model_that_does_not_batch_calls_the_fixed_size_function_holding_each_request_too() {
    let model = mlp_with(ModelConfig {
        function: None,
        ..config(mlp_batch_sizes_module(), "mlp", 0)
    });
    assert_eq!(model.batch_sizes(), [1, 2, 4]);
    let plain = mlp(0);
    // Five rows are more than the largest size holds: the dynamic function takes them.
    for (rows, called) in [(1, "mlp_b1"), (3, "mlp_b4"), (4, "mlp_b4"), (5, "mlp")] {
        let (outputs, functions) = functions_called(|| model.infer(request(rows, rows)).expect("answered"));
        assert_eq!(functions, [called], "{rows} rows");
        assert_eq!(outputs[0].shape, [rows, 10], "the padding rows are not returned");
        let expected = floats(&plain.infer(request(rows, rows)).expect("answered")[0]);
        let got = floats(&outputs[0]);
        for (g, e) in got.iter().zip(&expected) {
            assert!(
                (g - e).abs() <= 1e-5 * e.abs().max(1.0),
                "{rows} rows: {got:?} != {expected:?}"
            );
        }
    }
}

#[test]
fn the_configuration_says_the_model_batches_and_one_that_does_not_says_so_too() {
    let batching = serde_json::to_value(ModelConfiguration::of(&mlp(8))).unwrap();
    assert_eq!(batching["max_batch_size"], 8, "{batching}");
    assert_eq!(
        batching["dynamic_batching"]["max_queue_delay_microseconds"], 0,
        "{batching}"
    );
    assert_eq!(batching["input"][0]["dims"], serde_json::json!([-1, 16]), "{batching}");
    let single = serde_json::to_value(ModelConfiguration::of(&mlp(0))).unwrap();
    assert_eq!(single["max_batch_size"], 0, "{single}");
    assert!(single.get("dynamic_batching").is_none(), "{single}");
}

#[test]
fn a_model_whose_tensors_lack_a_dynamic_batch_dimension_cannot_batch() {
    let models = match cfg!(target_arch = "aarch64") {
        true => fixtures().join("models/arm_64"),
        false => fixtures().join("models"),
    };
    let config = config(models.join("tiny_add.vmfb"), "tiny_add", 4);
    let error = Model::load(&halo_runtime::Instance::new(), config)
        .err()
        .expect("refused");
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    let message = error.to_string();
    assert!(
        message.contains("max_batch_size 4 needs every input and output to lead with a dynamic batch dimension")
            && message.contains("input 'input0' has shape [4]"),
        "{message}"
    );
}
