//! Model repositories: models loaded and unloaded, configurations checked, ONNX compiled at load, and a server that is live but not ready while it loads.

use super::*;

/// A model repository in a fresh temporary folder: `(folder name, config.toml)` per model.
/// An ONNX model in a repository folder with an empty `config.toml` is compiled at load (with
/// `halo compile`'s defaults) into the compile cache, serves its only function as `run-module`
/// runs the program compiled, and loads from the cache without compiling when the server starts
/// again.
#[test]
fn an_onnx_model_in_a_repository_is_compiled_at_load_once() {
    let test = "an_onnx_model_in_a_repository_is_compiled_at_load_once";
    let venv = models().join("../../.iree-venv/bin/iree-compile");
    let toolchain = halo_compile::Toolchain::locate(venv.is_file().then_some(venv.as_path()));
    let compiler = match toolchain {
        Ok(toolchain) if toolchain.onnx_importer().is_ok() => toolchain.compiler().to_path_buf(),
        _ => {
            println!("skipped: {test}: no iree-compile with iree-import-onnx");
            return;
        }
    };
    // An empty configuration: the function is the model's only one.
    let root = repository("onnx", &[("mlp", String::new())]);
    std::fs::copy(models().join("onnx_mlp.onnx"), root.join("mlp/model.onnx")).expect("the ONNX model");
    let cache = root.join("cache");
    let envs = [
        ("HALO_IREE_COMPILE", compiler.as_path()),
        ("HALO_COMPILE_CACHE", cache.as_path()),
    ];
    let args = [format!("--model-repository={}", root.display())];
    let compiled = || -> Vec<PathBuf> {
        std::fs::read_dir(&cache)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "vmfb"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let served = Served::start_with_envs(&args, &envs);
    let program = match compiled().as_slice() {
        [program] => program.clone(),
        other => panic!("one compiled program in the cache, not {other:?}"),
    };
    let written = std::fs::metadata(&program).unwrap().modified().unwrap();
    let input = halo_runtime::npy::read(&models().join("onnx_mlp.basic.0.npy")).expect("the fixture input");
    let (status, metadata) = served.get("/v2/models/mlp");
    assert_eq!(status, 200, "{metadata}");
    let body = json!({"inputs": [{"name": metadata["inputs"][0]["name"], "shape": input.shape, "datatype": "FP32",
                                  "data": f32_data(&input)}]});
    let (status, response) = served.post("/v2/models/mlp/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    let expected = run_module_results(program.to_str().unwrap(), "onnx_mlp", &["@onnx_mlp.basic.0.npy"], 2);
    for (output, expected) in response["outputs"].as_array().unwrap().iter().zip(&expected) {
        assert_eq!(json_f32(&output["data"]), f32_data(expected));
    }
    drop(served);
    let served = Served::start_with_envs(&args, &envs);
    assert_eq!(served.get("/v2/models/mlp/ready").0, 200);
    assert_eq!(compiled(), std::slice::from_ref(&program));
    assert_eq!(
        std::fs::metadata(&program).unwrap().modified().unwrap(),
        written,
        "compiled again"
    );
    drop(served);
    std::fs::remove_dir_all(root).ok();
}

/// While its models load (here a compile that never ends), the server answers health checks on
/// its HTTP port: live, but neither ready nor serving, so a platform's liveness probe does not
/// restart it before it serves; `SIGTERM` then stops the compile and the server.
#[test]
fn a_server_loading_its_models_is_live_but_not_ready_and_stops_on_sigterm() {
    let root = repository("loading", &[("m", String::new())]);
    std::fs::copy(models().join("tiny_add.mlir"), root.join("m/model.mlir")).expect("the model");
    // A stand-in iree-compile 3.13 that compiles until halo has gone.
    let (mut child, mut stderr, address, grpc) = loading_server_with_grpc(
        &root,
        "case \"$1\" in --version) echo \"IREE compiler version 3.13.0 @ 0123\"; exit 0;; esac\n\
         while kill -0 $PPID 2>/dev/null; do sleep 0.1; done",
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let get = |path: &str| answer(agent.get(&format!("http://{address}{path}")).call());
    assert_eq!(get("/v2/health/live"), (200, json!({"live": true})));
    for path in ["/v2/health/ready", "/v2/models/m", "/v2"] {
        let (status, body) = get(path);
        assert_eq!(status, 503, "{path}: {body}");
        assert!(body["error"].as_str().unwrap().contains("loading"), "{path}: {body}");
    }
    // The gRPC port answers as well: live, not ready, and nothing else yet.
    let answers = grpc_answers(&grpc);
    assert_eq!(
        answers.health,
        [
            ("live", Ok(ServingStatus::Serving)),
            ("", Ok(ServingStatus::NotServing)),
            ("ready", Ok(ServingStatus::NotServing)),
            ("inference.GRPCInferenceService", Ok(ServingStatus::NotServing)),
        ]
    );
    assert_eq!((answers.live, answers.ready), (true, false));
    let (code, message) = answers.metadata;
    assert_eq!(code, tonic::Code::Unavailable, "{message}");
    assert!(message.contains("loading"), "{message}");
    assert!(child.0.try_wait().unwrap().is_none(), "still loading");
    // SIGTERM stops the compile and the server, leaving no scratch folder in the cache.
    let sent = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{rest}");
    assert!(
        rest.contains("CANCELLED") && rest.contains("stopped by a signal"),
        "{rest}"
    );
    let left: Vec<_> = std::fs::read_dir(root.join("cache")).unwrap().collect();
    assert!(left.is_empty(), "left in the cache: {left:?}");
    drop(child);
    std::fs::remove_dir_all(root).ok();
}

/// While the models load, the stand-ins close connections whose HTTP request head or HTTP/2
/// preface has not arrived within `--body-pause-ms`, as the server's own ports do.
#[test]
fn the_loading_responder_closes_connections_that_send_part_of_a_request() {
    use std::io::{Read, Write};
    let root = repository("loading-heads", &[("m", String::new())]);
    std::fs::copy(models().join("tiny_add.mlir"), root.join("m/model.mlir")).expect("the model");
    // A stand-in iree-compile 3.13 that compiles until halo has gone.
    let (child, _stderr, http, grpc) = loading_server_with(
        &root,
        "case \"$1\" in --version) echo \"IREE compiler version 3.13.0 @ 0123\"; exit 0;; esac\n\
         while kill -0 $PPID 2>/dev/null; do sleep 0.1; done",
        &["--body-pause-ms=300"],
    );
    for (address, sent) in [(&http, &b"GET /v2/health/li"[..]), (&grpc, b"PRI * HTTP/2.0\r\n")] {
        let mut stream = std::net::TcpStream::connect(address).expect("a connection");
        stream.write_all(sent).expect("the bytes");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let closed = stream.read_to_end(&mut Vec::new());
        assert!(
            closed.is_ok(),
            "{address} kept a connection that sent {sent:?}: {closed:?}"
        );
    }
    drop(child);
    std::fs::remove_dir_all(root).ok();
}

/// A client that leaves a request to the loading responder unfinished does not hold the server's
/// start: once the models are loaded (a compile made a second late), it serves within the
/// handover bound.
#[test]
fn an_unfinished_request_while_loading_does_not_hold_the_start() {
    use std::io::Write;
    let test = "an_unfinished_request_while_loading_does_not_hold_the_start";
    let venv = models().join("../../.iree-venv/bin/iree-compile");
    let Ok(toolchain) = halo_compile::Toolchain::locate(venv.is_file().then_some(venv.as_path())) else {
        println!("skipped: {test}: no iree-compile");
        return;
    };
    let root = repository("handover", &[("m", String::new())]);
    std::fs::copy(models().join("tiny_add.mlir"), root.join("m/model.mlir")).expect("the model");
    // The real compiler, a second late.
    let late = format!(
        "[ \"$1\" = --version ] || sleep 1\nexec '{}' \"$@\"",
        toolchain.compiler().display()
    );
    let (mut server, mut stderr, address) = loading_server(&root, &late);
    let mut unfinished = std::net::TcpStream::connect(&address).expect("a connection while loading");
    unfinished
        .write_all(b"GET /v2/health/live HTTP/1.1\r\nHost: halo\r\n")
        .unwrap();
    // The rest of the log, line by line, so the wait for the server has a limit.
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 || lines.send(line).is_err() {
            break;
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let line = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = received.recv_timeout(left).expect("the server serving within 20 s");
        if line.contains("http://") {
            break line;
        }
    };
    let base = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let (status, _) = answer(agent.get(&format!("{base}/models/m/ready")).call());
    assert_eq!(status, 200);
    drop(unfinished);
    server.stop();
    std::fs::remove_dir_all(root).ok();
}

#[test]
fn a_model_repository_serves_its_models_and_loads_and_unloads_them() {
    let root = repository(
        "serves",
        &[
            ("adder", adder_config()),
            (
                "vision",
                format!(
                    "function = \"cnn\"\nmodules = [{:?}]\n",
                    model("cnn.vmfb").display().to_string()
                ),
            ),
        ],
    );
    let served = Served::start_with(&[format!("--model-repository={}", root.display())]);
    let (status, metadata) = served.get("/v2/models/adder");
    assert_eq!(status, 200, "{metadata}");
    assert_eq!(metadata["versions"], json!(["2"]));
    assert_eq!(metadata["inputs"][1]["name"], "b");
    assert_eq!(metadata["outputs"][0]["name"], "sum");
    let add = json!({"inputs": [
        {"name": "a", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "b", "shape": [4], "datatype": "FP32", "data": [10, 20, 30, 40]},
    ]});
    let (status, response) = served.post("/v2/models/adder/versions/2/infer", &add.to_string());
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["outputs"][0]["name"], "sum");
    assert_eq!(json_f32(&response["outputs"][0]["data"]), vec![11.0, 22.0, 33.0, 44.0]);
    assert_eq!(served.get("/v2/models/vision/ready").0, 200);

    let index = |served: &Served| served.post("/v2/repository/index", "").1;
    assert_eq!(
        index(&served),
        json!([{"name": "adder", "version": "2", "state": "READY"}, {"name": "vision", "version": "1", "state": "READY"}])
    );
    assert_eq!(served.post("/v2/repository/models/adder/unload", "").0, 200);
    assert_eq!(index(&served)[0], json!({"name": "adder", "state": "UNAVAILABLE"}));
    assert_eq!(
        served
            .post("/v2/repository/index", r#"{"ready": true}"#)
            .1
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let (status, response) = served.post("/v2/models/adder/infer", &add.to_string());
    assert_eq!(status, 400);
    assert!(
        response["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown model 'adder'"),
        "{response}"
    );
    assert_eq!(served.post("/v2/repository/models/adder/unload", "").0, 400);

    // A model added to the folder while serving loads on request, and so does the unloaded one.
    add_model(&root, "later", &adder_config());
    assert_eq!(served.post("/v2/repository/models/later/load", "").0, 200);
    assert_eq!(served.post("/v2/repository/models/adder/load", "").0, 200);
    for model in ["later", "adder"] {
        let (status, response) = served.post(&format!("/v2/models/{model}/infer"), &add.to_string());
        assert_eq!(status, 200, "{model}: {response}");
    }
    for (name, message) in [("nope", "has no model 'nope'"), ("..", "is not a model name")] {
        let (status, response) = served.post(&format!("/v2/repository/models/{name}/load"), "");
        assert_eq!(status, 400, "{name}");
        let error = response["error"].as_str().unwrap_or_default();
        assert!(error.contains(message), "{name}: '{error}' should say '{message}'");
    }
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_bad_model_configuration_stops_the_server_naming_the_file_and_the_problem() {
    let cases = [
        ("functon = \"tiny_add\"\n", "unknown field `functon`"),
        ("function = \"tiny_add\"\n", "has 0 .vmfb files"),
        (
            &*format!(
                "{}input_names = [\"only-one\"]\n",
                adder_config().replace("input_names = [\"a\", \"b\"]\n", "")
            ),
            "names 1 inputs but the function has 2",
        ),
    ];
    for (index, (config, message)) in cases.iter().enumerate() {
        let root = repository(&format!("bad-{index}"), &[("broken", config.to_string())]);
        let output = common::halo_command()
            .args(["serve", "--http-port=0", "--grpc-port=0"])
            .arg(format!("--model-repository={}", root.display()))
            .output()
            .expect("halo runs");
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{config}: {stderr}");
        assert!(stderr.contains("broken"), "{stderr}");
        let _ = std::fs::remove_dir_all(root);
    }
}

/// While serving, a model loaded through the repository API whose initializer never ends holds
/// its request; `SIGTERM` abandons the load, so the graceful shutdown, which waits for that
/// request, still ends.
#[test]
fn sigterm_abandons_a_repository_load_that_never_ends() {
    let root = repository("endless-reload", &[("adder", adder_config())]);
    let served = Served::start_with(&[format!("--model-repository={}", root.display())]);
    add_endless_initializer(&root, "endless");
    let url = format!("{}/v2/repository/models/endless/load", served.base);
    let agent = served.agent.clone();
    let load = std::thread::spawn(move || answer(agent.post(&url).send("")));
    // Once the server says it is loading the model, its initializer runs, and never ends by
    // itself.
    let started = Instant::now();
    while !served
        .log
        .lock()
        .unwrap()
        .lines()
        .any(|l| l.contains("loading") && l.contains("endless"))
    {
        assert!(started.elapsed() < Duration::from_secs(20), "the load did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!load.is_finished(), "the load cannot have ended");
    stop_during_load(served, load);
    std::fs::remove_dir_all(root).ok();
}

/// While serving, a model loaded through the repository API whose compile never ends holds its
/// request; `SIGTERM` kills the compiler, so the graceful shutdown still ends, leaving no
/// scratch folder behind.
#[test]
fn sigterm_stops_a_compile_at_repository_load() {
    use std::os::unix::fs::PermissionsExt;
    let root = repository("endless-compile", &[("adder", adder_config())]);
    let (compiler, cache, started) = (root.join("iree-compile"), root.join("cache"), root.join("compiling"));
    // A stand-in iree-compile 3.13 that says it started, then compiles until halo has gone.
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in --version) echo \"IREE compiler version 3.13.0 @ 0123\"; exit 0;; esac\n\
         touch '{}'\nwhile kill -0 $PPID 2>/dev/null; do sleep 0.1; done\n",
        started.display()
    );
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(&compiler, script).expect("the compiler script");
    std::fs::set_permissions(&compiler, std::fs::Permissions::from_mode(0o755)).unwrap();
    let envs = [
        ("HALO_IREE_COMPILE", compiler.as_path()),
        ("HALO_COMPILE_CACHE", cache.as_path()),
    ];
    let served = Served::start_with_envs(&[format!("--model-repository={}", root.display())], &envs);
    add_model(&root, "compiled", "");
    std::fs::copy(models().join("tiny_add.mlir"), root.join("compiled/model.mlir")).expect("the model");
    let url = format!("{}/v2/repository/models/compiled/load", served.base);
    let agent = served.agent.clone();
    let load = std::thread::spawn(move || answer(agent.post(&url).send("")));
    let begun = Instant::now();
    while !started.exists() {
        assert!(begun.elapsed() < Duration::from_secs(20), "the compile did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let error = stop_during_load(served, load);
    assert!(error.contains("stopped by its caller while compiling model"), "{error}");
    let scratch: Vec<_> = std::fs::read_dir(&cache)
        .map(|entries| entries.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(scratch.is_empty(), "left in the cache: {scratch:?}");
    std::fs::remove_dir_all(root).ok();
}
