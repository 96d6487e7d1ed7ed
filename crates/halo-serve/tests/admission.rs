//! A model admits `max_concurrency + max_queue` requests at once and refuses more as
//! unavailable, naming the model, until one leaves; a request past its deadline is answered
//! `DeadlineExceeded`, and its call stops.

use halo_serve::{Model, ModelConfig};
use std::path::Path;
use std::time::{Duration, Instant};

fn tiny_add(max_concurrency: usize, max_queue: usize) -> Model {
    load(max_concurrency, max_queue, None)
}

fn tiny_add_with_timeout(timeout: Duration) -> Model {
    load(1, 0, Some(timeout))
}

fn load(max_concurrency: usize, max_queue: usize, timeout: Option<Duration>) -> Model {
    try_load(max_concurrency, max_queue, timeout).expect("the fixture loads")
}

fn try_load(max_concurrency: usize, max_queue: usize, timeout: Option<Duration>) -> halo_hal::Result<Model> {
    load_function("tiny_add", "tiny_add", max_concurrency, max_queue, timeout)
}

/// The model fixtures compiled for this host's CPU: `fixtures/models`, or its `arm_64/` on AArch64.
fn host_models() -> std::path::PathBuf {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
    if cfg!(target_arch = "aarch64") {
        models.join("arm_64")
    } else {
        models
    }
}

/// `function` of `module`.vmfb (this host's build) on local-sync, named "adder".
fn load_function(
    module: &str,
    function: &str,
    max_concurrency: usize,
    max_queue: usize,
    timeout: Option<Duration>,
) -> halo_hal::Result<Model> {
    let fixtures = host_models();
    let config = ModelConfig {
        name: "adder".into(),
        version: "3".into(),
        modules: vec![fixtures.join(format!("{module}.vmfb"))],
        function: Some(function.into()),
        devices: vec!["local-sync".into()],
        max_concurrency,
        max_queue,
        timeout,
        input_names: vec![],
        output_names: vec![],
        input_types: vec![],
        output_types: vec![],
        output_labels: Default::default(),
        warmup: false,
        max_batch_size: 0,
        max_queue_delay: Duration::ZERO,
    };
    Model::load(&halo_runtime::Instance::new(), config)
}

/// An FP32 input of the request.
fn f32_tensor(name: &str, shape: Vec<u64>, values: &[f32]) -> halo_serve::model::InputTensor {
    halo_serve::model::InputTensor {
        name: name.into(),
        datatype: "FP32".into(),
        shape,
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

#[test]
fn limits_outside_their_ranges_are_refused_before_anything_is_sized_by_them() {
    for (max_concurrency, max_queue, expected) in [
        (0, 0, "max_concurrency 0 is not from 1 to 4096"),
        (1 << 62, 0, "max_concurrency 4611686018427387904 is not from 1 to 4096"),
        (4, usize::MAX, "max_queue 18446744073709551615 is over 1048576"),
    ] {
        let error = try_load(max_concurrency, max_queue, None).err().expect("refused");
        assert_eq!(error.code(), halo_hal::StatusCode::InvalidArgument, "{error}");
        let message = error.to_string();
        assert!(
            message.contains(expected) && message.contains("model 'adder'"),
            "{message}"
        );
    }
    try_load(4096, 1 << 20, None).expect("the largest limits are taken");
}

#[test]
fn requests_beyond_the_running_and_queued_limits_are_unavailable() {
    let model = tiny_add(1, 1);
    let first = model.admit().expect("one runs");
    let second = model.admit().expect("one waits");
    let refused = model.admit().err().expect("a third is refused");
    assert_eq!(refused.code(), halo_hal::StatusCode::Unavailable);
    assert!(refused.to_string().contains("model 'adder' is busy"), "{refused}");
    drop(first);
    let third = model.admit().expect("a place came free");
    drop((second, third));
}

#[test]
fn the_declaration_names_inputs_and_outputs_with_datatypes_and_shapes() {
    let model = tiny_add(1, 0);
    let names: Vec<_> = model
        .inputs()
        .iter()
        .map(|s| (s.name.as_str(), s.datatype, s.shape.clone()))
        .collect();
    assert_eq!(names, [("input0", "FP32", vec![4]), ("input1", "FP32", vec![4])]);
    assert_eq!(model.outputs()[0].name, "output0");
}

#[test]
fn a_request_past_its_deadline_is_answered_deadline_exceeded_and_the_next_runs() {
    let model = std::sync::Arc::new(tiny_add(1, 1));
    let metrics = halo_serve::metrics::Metrics::new();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let inputs = || {
        ["input0", "input1"]
            .map(|name| f32_tensor(name, vec![4], &[1.0, 2.0, 3.0, 4.0]))
            .to_vec()
    };
    runtime.block_on(async {
        // The only computing thread is taken, so the request waits until its deadline.
        let (release, released) = std::sync::mpsc::channel::<()>();
        let occupied = model
            .compute_threads()
            .submit(move || released.recv())
            .expect("a thread starts");
        let deadline = model.deadline(Some(Duration::from_millis(20)));
        let error = model.run(inputs(), &metrics, deadline).await.expect_err("it times out");
        assert_eq!(error.code(), halo_hal::StatusCode::DeadlineExceeded);
        assert!(
            error
                .to_string()
                .contains("model 'adder' ran out of time while waiting for a turn"),
            "{error}"
        );
        // The withdrawn call holds its place until a thread drops it from the queue, so
        // clients timing out and retrying cannot pile inputs up behind a busy thread.
        let second = model.admit().expect("one place is left");
        let refused = model.admit().err().expect("the withdrawn call still counts");
        assert_eq!(refused.code(), halo_hal::StatusCode::Unavailable);
        drop(second);
        drop(release);
        drop(occupied);
        let outputs = model
            .run(inputs(), &metrics, model.deadline(None))
            .await
            .expect("it runs");
        let sums: Vec<f32> = outputs[0]
            .bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(sums, [2.0, 4.0, 6.0, 8.0]);
    });
}

#[test]
fn the_sooner_of_the_model_and_request_timeouts_sets_the_deadline() {
    let mut model = tiny_add(1, 0);
    assert!(model.deadline(None).is_none());
    let soon = Instant::now() + Duration::from_secs(5);
    assert!(model.deadline(Some(Duration::from_millis(1))).is_some_and(|d| d < soon));
    // A limit too far away to represent means no limit rather than a panic.
    assert!(model.deadline(Some(Duration::MAX)).is_none());
    model = tiny_add_with_timeout(Duration::from_millis(1));
    assert!(model
        .deadline(Some(Duration::from_secs(3600)))
        .is_some_and(|d| d < soon));
    assert!(model.deadline(None).is_some_and(|d| d < soon));
}

#[test]
fn a_call_looping_for_ever_gives_its_thread_back_at_its_deadline_or_when_its_client_goes() {
    // One thread, and a place in the queue for the next call while a cancelled one stops.
    let model = std::sync::Arc::new(load_function("control_flow", "halve_until", 1, 1, None).expect("it loads"));
    let metrics = halo_serve::metrics::Metrics::new();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    // Halving until the sum drops below 5 never ends when an element is infinite.
    let inputs = |first: f32| {
        vec![
            f32_tensor("input0", vec![4], &[first, 20.0, 30.0, 40.0]),
            f32_tensor("input1", vec![], &[5.0]),
        ]
    };
    // The model's one thread must be free again for this call to run before its deadline.
    let halves_five_times = || async {
        let deadline = model.deadline(Some(Duration::from_secs(30)));
        let outputs = model.run(inputs(10.0), &metrics, deadline).await.expect("it runs");
        assert_eq!(outputs[1].bytes, 5i32.to_le_bytes());
    };
    runtime.block_on(async {
        let deadline = model.deadline(Some(Duration::from_millis(100)));
        let error = model
            .run(inputs(f32::INFINITY), &metrics, deadline)
            .await
            .expect_err("it times out");
        assert_eq!(error.code(), halo_hal::StatusCode::DeadlineExceeded);
        assert!(error.to_string().contains("ran out of time while computing"), "{error}");
        halves_five_times().await;
        // A client that goes drops its request's future.
        let gone = tokio::spawn({
            let model = model.clone();
            let metrics = halo_serve::metrics::Metrics::new();
            async move { model.run(inputs(f32::INFINITY), &metrics, None).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        gone.abort();
        assert!(gone.await.expect_err("it was aborted").is_cancelled());
        halves_five_times().await;
    });
}
