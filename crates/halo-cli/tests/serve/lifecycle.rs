//! Threads, stalls, faults and signals: computing threads' scheduling policies, kernels that never return or fault, models not ready while their threads are held, and termination.

use super::*;

#[cfg(target_os = "linux")]
#[test]
fn io_threads_are_batch_work_and_computing_threads_keep_the_default_policy() {
    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;
    let served = Served::start("cnn.vmfb", "cnn", &[]);
    let input = halo_runtime::npy::read(&models().join("cnn.basic.0.npy")).expect("the fixture input");
    let body = json!({
        "inputs": [{"name": "input0", "shape": input.shape.clone(), "datatype": "FP32", "data": f32_data(&input)}]
    });
    // A request starts the model's computing thread.
    assert_eq!(served.post("/v2/models/cnn/infer", &body.to_string()).0, 200);
    let policies = thread_policies(served.child.id());
    let of = |name: &str| -> Vec<u32> { policies.iter().filter(|(n, _)| n == name).map(|(_, p)| *p).collect() };
    let io = of("halo-serve");
    assert!(!io.is_empty() && io.iter().all(|&p| p == SCHED_BATCH), "{policies:?}");
    let computing = of("halo-compute");
    assert!(
        !computing.is_empty() && computing.iter().all(|&p| p == SCHED_OTHER),
        "{policies:?}"
    );
}

#[test]
fn a_second_termination_signal_stops_a_server_whose_call_never_ends() {
    let mut served = Served::start("control_flow.vmfb", "halve_until", &[]);
    // Halving until the sum drops below 5 never ends when an element is infinite.
    let request = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
        {"name": "input1", "shape": [], "datatype": "FP32", "parameters": {"binary_data_size": 4}},
    ]});
    let mut body = request.to_string().into_bytes();
    let json_length = body.len();
    for value in [f32::INFINITY, 20.0, 30.0, 40.0, 5.0] {
        body.extend_from_slice(&value.to_le_bytes());
    }
    let url = format!("{}/v2/models/control_flow/infer", served.base);
    // Never answered: it ends when the server does.
    let endless = std::thread::spawn(move || {
        ureq::post(&url)
            .header("Inference-Header-Content-Length", &json_length.to_string())
            .content_type("application/octet-stream")
            .send(&body[..])
            .map(|response| response.status().as_u16())
    });
    let running = || {
        let mut response = served
            .agent
            .get(&format!("{}/metrics", served.base))
            .call()
            .expect("metrics");
        let text = response.body_mut().read_to_string().expect("text");
        sample(&text, "halo_inference_requests_in_flight{model=\"control_flow\"}") == Some(1.0)
    };
    let start = Instant::now();
    while !running() {
        assert!(start.elapsed() < Duration::from_secs(30), "the call never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    served.terminate();
    // The graceful shutdown waits for the call in flight, which never ends.
    assert!(served.exit_within(Duration::from_millis(500)).is_none());
    assert!(served
        .log
        .lock()
        .unwrap()
        .contains("a second Ctrl-C or SIGTERM stops at once"));
    served.terminate();
    let status = served
        .exit_within(Duration::from_secs(30))
        .expect("a second signal stops the server");
    assert_eq!(status.code(), Some(1));
    assert!(
        endless.join().expect("the client thread").is_err(),
        "the endless call was answered"
    );
    let log = served.log.lock().unwrap().clone();
    assert!(
        log.contains("stopped without answering the requests in flight"),
        "{log}"
    );
}

/// A request whose kernel never returns (on `local-task`'s workers) is answered at its deadline,
/// and `SIGTERM` still ends the server: dropping the model's device does not wait for ever on
/// the workers still inside the kernel.
#[test]
fn a_kernel_that_never_returns_is_answered_at_its_deadline_and_the_server_still_stops() {
    let mut served = Served::start("kernel_loop.vmfb", "kernel_loop", &["--device=local-task"]);
    // Each of 1024 values stepped 2^62 times: the kernel outlives the test.
    let body = json!({"parameters": {"timeout": 300_000}, "inputs": [
        {"name": "input0", "shape": [1024], "datatype": "INT64", "data": vec![7i64; 1024]},
        {"name": "input1", "shape": [], "datatype": "INT64", "data": [1i64 << 62]},
    ]})
    .to_string();
    let (status, answer) = served.post("/v2/models/kernel_loop/infer", &body);
    assert_eq!(status, 504, "{answer}");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("DEADLINE_EXCEEDED"), "{answer}");
    served.terminate();
    let status = served.exit_within(Duration::from_secs(20));
    let log = served.log.lock().unwrap().clone();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the server ends within 20 s of SIGTERM: {log}"
    );
}

/// On `local-sync` a kernel runs on the computing thread of its call: one answered at its
/// deadline holds that thread until it returns. With every thread held past the model's timeout
/// the model is stalled, and answers again once a thread is free.
#[test]
fn a_model_whose_computing_threads_are_all_held_past_its_timeout_is_not_ready_until_one_is_free() {
    let served = Served::start(
        "kernel_loop.vmfb",
        "kernel_loop",
        &["--device=local-sync", "--max-concurrency=1", "--request-timeout-ms=300"],
    );
    // About 4 s on one thread here.
    let ready = stall_kernel_loop(&served, 1 << 22);
    let (refused, answer) = served.post("/v2/models/kernel_loop/infer", &kernel_loop_request(3));
    let reason = ready.1["error"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(
            "model 'kernel_loop' is stalled: each of its 1 computing threads has been inside the same call"
        ),
        "{ready:?}"
    );
    assert_eq!(refused, 503, "{answer}");
    assert!(
        within_30_s(|| served.get("/v2/models/kernel_loop/ready").0 == 200),
        "the model never became ready again"
    );
    let (status, answer) = served.post("/v2/models/kernel_loop/infer", &kernel_loop_request(0));
    assert_eq!((status, &answer["outputs"][0]["data"]), (200, &json!(vec![7i64; 1024])));
}

/// A request answered at its deadline leaves its kernel on every worker of the model's device.
/// Past the model's timeout the model is stalled: not ready over HTTP and gRPC, and a request is
/// refused at once with `503` saying why instead of waiting for its deadline. Once the kernel
/// ends, the model is ready and answers again.
#[test]
fn a_model_whose_workers_are_all_held_past_its_timeout_is_not_ready_until_they_are_free() {
    let served = Served::start(
        "kernel_loop.vmfb",
        "kernel_loop",
        &["--device=local-task://?workers=2", "--request-timeout-ms=300"],
    );
    // About 4 s on two workers here (0.5 ns a step): seconds past the 300 ms timeout.
    let ready = stall_kernel_loop(&served, 1 << 23);
    let reason = ready.1["error"].as_str().unwrap_or_default().to_string();
    let metrics = served
        .agent
        .get(&format!("{}/metrics", served.base))
        .call()
        .expect("metrics")
        .body_mut()
        .read_to_string()
        .expect("text");
    let held = sample(
        &metrics,
        "halo_device_held_seconds{model=\"kernel_loop\",device=\"local-task://?workers=2\"}",
    );
    let (status, health) = served.get("/v2/health/ready");
    let grpc = grpc_answers(&served.grpc);
    // The health service learns it within a second.
    let grpc_not_serving = within_30_s(|| {
        grpc_answers(&served.grpc)
            .health
            .contains(&("ready", Ok(ServingStatus::NotServing)))
    });
    let (refused, answer) = served.post("/v2/models/kernel_loop/infer", &kernel_loop_request(3));
    assert!(
        reason.starts_with("model 'kernel_loop' is stalled: its device 'local-task://?workers=2' has been held")
            && reason.contains("longer than its requests wait (0.3 s)"),
        "{ready:?}"
    );
    assert_eq!(ready.1["ready"], json!(false));
    assert!(held.is_some_and(|held| held > 0.3), "held {held:?} in {metrics}");
    assert_eq!((status, &health["ready"]), (503, &json!(false)), "{health}");
    assert!(!grpc.ready, "gRPC ServerReady");
    assert!(grpc_not_serving, "the gRPC health check stayed SERVING");
    assert_eq!(refused, 503, "{answer}");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("UNAVAILABLE") && error.contains("is stalled"),
        "{answer}"
    );
    assert_eq!(served.get("/v2/health/live").0, 200, "a stalled server is still live");
    // Once the kernel ends, the model answers again.
    assert!(
        within_30_s(|| served.get("/v2/health/ready").0 == 200),
        "the server never became ready again"
    );
    assert_eq!(served.get("/v2/models/kernel_loop/ready").0, 200);
    let (status, answer) = served.post("/v2/models/kernel_loop/infer", &kernel_loop_request(0));
    assert_eq!((status, &answer["outputs"][0]["data"]), (200, &json!(vec![7i64; 1024])));
    let serving = || {
        grpc_answers(&served.grpc)
            .health
            .contains(&("ready", Ok(ServingStatus::Serving)))
    };
    assert!(within_30_s(serving), "the gRPC health check stayed NOT_SERVING");
}

/// A model whose compiled kernel faults (a damaged module: a byte of `elementwise_math`'s
/// kernel library changed so that it decodes as an illegal instruction) fails each of its
/// requests with `DATA_LOSS` naming the kernel, and the server, its other models and its health
/// go on as before.
#[test]
fn a_kernel_that_faults_fails_its_requests_and_the_server_serves_on() {
    if !cfg!(target_arch = "x86_64") {
        println!(
            "SKIPPED a_kernel_that_faults_fails_its_requests_and_the_server_serves_on: its damaged \
             byte is x86-64 machine code (mutation.rs damages the AArch64 build's kernels)"
        );
        return;
    }
    let root = repository("faults", &[("adder", adder_config())]);
    let mut module = std::fs::read(model("elementwise_math.vmfb")).expect("the fixture");
    assert_eq!(module[21162], 133, "the byte the damage is known for");
    module[21162] = 67;
    add_model(&root, "damaged", "function = \"binary\"\n");
    std::fs::write(root.join("damaged/model.vmfb"), module).expect("the damaged module");
    let served = Served::start_with(&[format!("--model-repository={}", root.display())]);
    let eight = |data: [f32; 8], name: &str| json!({"name": name, "shape": [8], "datatype": "FP32", "data": data});
    let damaged = json!({"inputs": [eight([1.0; 8], "input0"), eight([2.0; 8], "input1")]}).to_string();
    let add = json!({"inputs": [
        {"name": "a", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "b", "shape": [4], "datatype": "FP32", "data": [10, 20, 30, 40]},
    ]})
    .to_string();
    for _ in 0..3 {
        let (status, answer) = served.post("/v2/models/damaged/infer", &damaged);
        let error = answer["error"].as_str().unwrap_or_default();
        assert_eq!(status, 500, "{answer}");
        assert!(
            error.starts_with("DATA_LOSS") && error.contains("'binary_dispatch_1_elementwise_8_f32'"),
            "{error}"
        );
        let (status, answer) = served.post("/v2/models/adder/infer", &add);
        assert_eq!(
            (status, json_f32(&answer["outputs"][0]["data"])),
            (200, vec![11.0, 22.0, 33.0, 44.0])
        );
    }
    assert_eq!(served.get("/v2/health/ready"), (200, json!({"ready": true})));
    std::fs::remove_dir_all(root).ok();
}

/// A model whose initializer never ends holds the load; `SIGTERM` stops it as it stops a compile
/// at load, and the server ends with `CANCELLED`.
#[test]
fn sigterm_stops_a_model_initializer_that_never_ends() {
    let root = repository("endless-init", &[]);
    add_endless_initializer(&root, "m");
    // No model here is compiled: the compiler is never run.
    let (mut child, stderr, address) = loading_server(&root, "exit 1");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let (status, _) = answer(agent.get(&format!("http://{address}/v2/health/ready")).call());
    assert_eq!(status, 503, "still loading");
    let sent = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    // The rest of the log, read on a thread so that the wait for the server's end has a limit.
    let (rest, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stderr = stderr;
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        let _ = rest.send(text);
    });
    let rest = received
        .recv_timeout(Duration::from_secs(20))
        .expect("the server ending within 20 s of SIGTERM");
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{rest}");
    assert!(
        rest.contains("CANCELLED") && rest.contains("initializing module 'func_util'"),
        "{rest}"
    );
    drop(child);
    std::fs::remove_dir_all(root).ok();
}
