//! `halo serve` answers the Open Inference Protocol's HTTP/REST calls: health, metadata and JSON
//! inference equal to `run-module`'s results, and every malformed request with `400` and a
//! message, after which the server still answers.

use halo_hal::HostTensor;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// This architecture's build of the model fixture `name` (`X.vmfb`).
fn model(name: &str) -> PathBuf {
    common::host_module(&models().join(name))
}

/// `args` with each `--module=` naming this architecture's build.
fn host_args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    args.iter()
        .map(|arg| common::host_module_arg(&models(), arg.as_ref()))
        .collect()
}

/// A `halo serve` process on a free port, stopped when dropped.
struct Served {
    child: Child,
    base: String,
    /// Where its gRPC port listens (`127.0.0.1:PORT`).
    grpc: String,
    agent: ureq::Agent,
    /// What it has written to stderr after the line saying where it listens.
    log: Arc<Mutex<String>>,
}

impl Served {
    fn start(module: &str, function: &str, extra: &[&str]) -> Served {
        let mut args = vec![format!("--module={module}"), format!("--function={function}")];
        args.extend(extra.iter().map(|a| a.to_string()));
        Served::start_with(&args)
    }

    fn start_with(args: &[String]) -> Served {
        Served::start_with_envs(args, &[])
    }

    fn start_with_envs(args: &[String], envs: &[(&str, &Path)]) -> Served {
        let mut child = common::halo_command()
            .current_dir(models())
            .args(["serve", "--http-port=0", "--grpc-port=0"])
            .args(host_args(args))
            .envs(envs.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .expect("halo serve starts");
        // Log lines may come first; the server says where it listens in its own line.
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        while !line.contains("http://") {
            line.clear();
            if stderr.read_line(&mut line).expect("a line") == 0 {
                panic!("halo serve stopped before it listened");
            }
        }
        // The log goes on; a thread keeps it so that the server never blocks on a full pipe.
        let log = Arc::new(Mutex::new(String::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).is_ok_and(|read| read > 0) {
                kept.lock().expect("the log").push_str(&std::mem::take(&mut line));
            }
        });
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("the server says where it listens: {line}"));
        let base = url.split("/v2").next().unwrap_or(url).to_string();
        let grpc = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("grpc://"))
            .unwrap_or_else(|| panic!("the server says where gRPC listens: {line}"))
            .to_string();
        // Error answers are read like any other: their bodies carry the messages under test.
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        Served {
            child,
            base,
            grpc,
            agent,
            log,
        }
    }

    fn get(&self, path: &str) -> (u16, Value) {
        answer(self.agent.get(&format!("{}{path}", self.base)).call())
    }

    fn post(&self, path: &str, body: &str) -> (u16, Value) {
        answer(
            self.agent
                .post(&format!("{}{path}", self.base))
                .content_type("application/json")
                .send(body),
        )
    }
}

/// An answer under the binary tensor data extension: its status, JSON part and binary tail.
struct BinaryAnswer {
    status: u16,
    json: Value,
    binary: Vec<u8>,
}

impl Served {
    /// Posts `json` followed by `binary`, with the extension's header giving the JSON's length.
    fn post_binary(&self, path: &str, json: &Value, binary: &[u8]) -> BinaryAnswer {
        let mut body = json.to_string().into_bytes();
        let length = body.len();
        body.extend_from_slice(binary);
        self.post_raw(path, &length.to_string(), &body)
    }

    fn post_raw(&self, path: &str, json_length: &str, body: &[u8]) -> BinaryAnswer {
        let mut response = self
            .agent
            .post(&format!("{}{path}", self.base))
            .header("Inference-Header-Content-Length", json_length)
            .content_type("application/octet-stream")
            .send(body)
            .expect("the server answers");
        let length = response
            .headers()
            .get("inference-header-content-length")
            .map(|v| v.to_str().expect("ascii").parse::<usize>().expect("a byte count"));
        let status = response.status().as_u16();
        let mut body = response.body_mut().read_to_vec().expect("a body");
        let binary = body.split_off(length.unwrap_or(body.len()));
        BinaryAnswer {
            status,
            json: serde_json::from_slice(&body).unwrap_or(Value::Null),
            binary,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn answer(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Value) {
    match result {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Err(error) => panic!("request failed: {error}"),
    }
}

/// `run-module`'s results for `flags` as host tensors, through `--output=@file.npy`.
fn run_module_results(module: &str, function: &str, inputs: &[&str], results: usize) -> Vec<HostTensor> {
    let dir = std::env::temp_dir();
    let files: Vec<PathBuf> = (0..results)
        .map(|i| dir.join(format!("halo-serve-test-{}-{function}-{i}.npy", std::process::id())))
        .collect();
    let status = common::halo_command()
        .current_dir(models())
        .args(host_args(&[
            "run-module",
            &format!("--module={module}"),
            &format!("--function={function}"),
        ]))
        .args(inputs.iter().map(|i| format!("--input={i}")))
        .args(files.iter().map(|f| format!("--output=@{}", f.display())))
        .status()
        .expect("run-module runs");
    assert!(status.success());
    files
        .iter()
        .map(|f| {
            let tensor = halo_runtime::npy::read(f).expect("run-module wrote the result");
            std::fs::remove_file(f).ok();
            tensor
        })
        .collect()
}

fn f32_data(tensor: &HostTensor) -> Vec<f32> {
    tensor
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn json_f32(data: &Value) -> Vec<f32> {
    data.as_array()
        .expect("data is an array")
        .iter()
        .map(|v| v.as_f64().expect("a number") as f32)
        .collect()
}

#[test]
fn health_and_metadata_follow_the_protocol() {
    let served = Served::start("cnn.vmfb", "cnn", &[]);
    assert_eq!(served.get("/v2/health/live").0, 200);
    assert_eq!(served.get("/v2/health/ready").0, 200);
    assert_eq!(served.get("/v2/models/cnn/ready").0, 200);
    assert_eq!(served.get("/v2").1["name"], "halo");
    let (status, metadata) = served.get("/v2/models/cnn");
    assert_eq!(status, 200);
    assert_eq!(metadata["name"], "cnn");
    assert_eq!(metadata["versions"], json!(["1"]));
    assert_eq!(metadata["inputs"][0]["datatype"], "FP32");
    let shape = &metadata["inputs"][0]["shape"];
    assert_eq!(shape.as_array().map(Vec::len), Some(4), "{metadata}");
    assert_eq!(metadata["outputs"][0]["name"], "output0");
    assert_eq!(served.get("/v2/models/cnn/versions/1").0, 200);
}

#[test]
fn json_inference_equals_run_module() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &[]);
    let body = json!({
        "id": "request-7",
        "parameters": {"timeout": 60_000_000},
        "inputs": [
            {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1.0, 2.5, -3.0, 0.125]},
            {"name": "input1", "shape": [4], "datatype": "FP32", "data": [[0.5, 0.25], [1e-3, 7.0]]},
        ]
    });
    let (status, response) = served.post("/v2/models/tiny_add/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["id"], "request-7");
    assert_eq!(response["model_name"], "tiny_add");
    let expected = run_module_results(
        "tiny_add.vmfb",
        "tiny_add",
        &["4xf32=1 2.5 -3 0.125", "4xf32=0.5 0.25 0.001 7"],
        1,
    );
    assert_eq!(response["outputs"][0]["shape"], json!([4]));
    assert_eq!(json_f32(&response["outputs"][0]["data"]), f32_data(&expected[0]));
}

#[test]
fn a_cnn_answers_as_run_module_does() {
    let served = Served::start("cnn.vmfb", "cnn", &[]);
    let input = halo_runtime::npy::read(&models().join("cnn.basic.0.npy")).expect("the fixture input");
    let shape = input.shape.clone();
    let body = json!({
        "inputs": [{"name": "input0", "shape": shape, "datatype": "FP32", "data": f32_data(&input)}]
    });
    let (status, response) = served.post("/v2/models/cnn/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    let expected = run_module_results("cnn.vmfb", "cnn", &["@cnn.basic.0.npy"], 2);
    let outputs = response["outputs"].as_array().expect("outputs");
    assert_eq!(outputs.len(), expected.len());
    for (output, expected) in outputs.iter().zip(&expected) {
        assert_eq!(output["shape"], json!(expected.shape));
        assert_eq!(json_f32(&output["data"]), f32_data(expected));
    }
}

#[test]
fn binary_tensor_data_goes_both_ways_and_equals_run_module() {
    let served = Served::start("cnn.vmfb", "cnn", &[]);
    let input = halo_runtime::npy::read(&models().join("cnn.basic.0.npy")).expect("the fixture input");
    let expected = run_module_results("cnn.vmfb", "cnn", &["@cnn.basic.0.npy"], 2);
    let request = json!({
        "inputs": [{"name": "input0", "shape": input.shape, "datatype": "FP32",
                    "parameters": {"binary_data_size": input.bytes.len()}}],
        "outputs": [{"name": "output1", "parameters": {"binary_data": true}}, {"name": "output0"}],
    });
    let answer = served.post_binary("/v2/models/cnn/infer", &request, &input.bytes);
    assert_eq!(answer.status, 200, "{}", answer.json);
    let outputs = answer.json["outputs"].as_array().expect("outputs");
    // Only the outputs asked for, in the order asked, each in the form asked.
    assert_eq!(outputs.len(), 2);
    assert_eq!(outputs[0]["name"], "output1");
    assert_eq!(
        outputs[0]["parameters"]["binary_data_size"],
        json!(expected[1].bytes.len())
    );
    assert!(outputs[0].get("data").is_none(), "{}", outputs[0]);
    assert_eq!(answer.binary, expected[1].bytes);
    assert_eq!(json_f32(&outputs[1]["data"]), f32_data(&expected[0]));

    // The request-wide default sends every output as raw bytes, in the model's order.
    let request = json!({
        "parameters": {"binary_data_output": true},
        "inputs": [{"name": "input0", "shape": input.shape, "datatype": "FP32",
                    "parameters": {"binary_data_size": input.bytes.len()}}],
    });
    let answer = served.post_binary("/v2/models/cnn/infer", &request, &input.bytes);
    assert_eq!(answer.status, 200, "{}", answer.json);
    assert_eq!(
        answer.binary,
        [expected[0].bytes.clone(), expected[1].bytes.clone()].concat()
    );
}

#[test]
fn a_model_compiled_from_onnx_is_described_with_its_graphs_names() {
    let module = "../benchmark-models/squeezenet.vmfb";
    let served = Served::start(module, "squeezenet", &[]);
    let (status, metadata) = served.get("/v2/models/squeezenet");
    assert_eq!(status, 200, "{metadata}");
    assert_eq!(
        metadata["inputs"],
        json!([{"name": "input", "datatype": "FP32", "shape": [1, 3, 64, 64]}])
    );
    assert_eq!(
        metadata["outputs"],
        json!([{"name": "flatten_117", "datatype": "FP32", "shape": [1, 10]}])
    );
    let input = models().join("../benchmark-models/squeezenet.input.npy");
    let input = halo_runtime::npy::read(&input).expect("the fixture input");
    let request = json!({
        "inputs": [{"name": "input", "shape": input.shape, "datatype": "FP32",
                    "parameters": {"binary_data_size": input.bytes.len()}}],
        "parameters": {"binary_data_output": true},
    });
    let answer = served.post_binary("/v2/models/squeezenet/infer", &request, &input.bytes);
    assert_eq!(answer.status, 200, "{}", answer.json);
    let expected = run_module_results(module, "squeezenet", &["@../benchmark-models/squeezenet.input.npy"], 1);
    assert_eq!(answer.binary, expected[0].bytes);
}

#[test]
fn bad_binary_requests_get_400_naming_the_problem() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &[]);
    let floats = |values: &[f32]| values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let binary_input = |name: &str, size: usize| json!({"name": name, "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": size}});
    let request = |inputs: Vec<Value>| json!({ "inputs": inputs });
    let good = request(vec![binary_input("input0", 16), binary_input("input1", 16)]);
    let two = floats(&[1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5]);
    let cases: Vec<(Value, Vec<u8>, &str)> = vec![
        (good.clone(), floats(&[1.0; 6]), "only 8 bytes of binary data remain"),
        (
            good.clone(),
            [two.clone(), vec![0]].concat(),
            "1 bytes of binary data follow",
        ),
        (
            request(vec![binary_input("input0", 8), binary_input("input1", 24)]),
            two.clone(),
            "needs 16 bytes of FP32 but has 8",
        ),
        (
            request(vec![
                json!({"name": "input0", "shape": [4], "datatype": "FP32"}),
                binary_input("input1", 16),
            ]),
            floats(&[1.0; 4]),
            "neither data nor binary_data_size",
        ),
        (
            json!({"inputs": [binary_input("input0", 16), binary_input("input1", 16)], "outputs": [{"name": "nope"}]}),
            two.clone(),
            "asks for output 'nope'",
        ),
    ];
    for (json, binary, message) in cases {
        let answer = served.post_binary("/v2/models/tiny_add/infer", &json, &binary);
        assert_eq!(answer.status, 400, "{json}: {}", answer.json);
        let error = answer.json["error"].as_str().unwrap_or_default();
        assert!(error.contains(message), "{json}: '{error}' should name '{message}'");
        let ok = served.post_binary("/v2/models/tiny_add/infer", &good, &two);
        assert_eq!(ok.status, 200, "after {json}");
        assert_eq!(json_f32(&ok.json["outputs"][0]["data"]), vec![1.5, 2.5, 3.5, 4.5]);
    }
    for (length, message) in [
        ("999", "Inference-Header-Content-Length is 999"),
        ("ten", "is not a byte count"),
    ] {
        let answer = served.post_raw("/v2/models/tiny_add/infer", length, b"{}");
        assert_eq!(answer.status, 400);
        let error = answer.json["error"].as_str().unwrap_or_default();
        assert!(error.contains(message), "'{error}' should name '{message}'");
    }
}

#[test]
fn scalar_and_integer_inputs_answer_as_run_module_does() {
    let splat = Served::start("shape_ops.vmfb", "splat", &[]);
    let body = json!({"inputs": [{"name": "input0", "shape": [], "datatype": "FP32", "data": [3.25]}]});
    let (status, response) = splat.post("/v2/models/shape_ops/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    let expected = run_module_results("shape_ops.vmfb", "splat", &["3.25"], 1);
    assert_eq!(response["outputs"][0]["shape"], json!(expected[0].shape));
    assert_eq!(json_f32(&response["outputs"][0]["data"]), f32_data(&expected[0]));
    let body = json!({"inputs": [{"name": "input0", "shape": [1], "datatype": "FP32", "data": [3.25]}]});
    let (status, one) = splat.post("/v2/models/shape_ops/infer", &body.to_string());
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["outputs"], response["outputs"]);
    let body = json!({"inputs": [{"name": "input0", "shape": [2], "datatype": "FP32", "data": [3.25, 1]}]});
    assert_eq!(splat.post("/v2/models/shape_ops/infer", &body.to_string()).0, 400);

    let reverse = Served::start("shape_ops.vmfb", "reverse", &[]);
    let body = json!({"inputs": [{"name": "input0", "shape": [6], "datatype": "INT32", "data": [1, 2, 3, 4, 5, -6]}]});
    let (status, response) = reverse.post("/v2/models/shape_ops/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    let expected = run_module_results("shape_ops.vmfb", "reverse", &["6xi32=1 2 3 4 5 -6"], 1);
    let want: Vec<i64> = expected[0]
        .bytes
        .chunks_exact(4)
        .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    assert_eq!(response["outputs"][0]["datatype"], "INT32");
    assert_eq!(response["outputs"][0]["data"], json!(want));
}

#[test]
fn every_bad_request_gets_400_naming_the_problem_and_the_server_keeps_serving() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &[]);
    let input = |name: &str, shape: Value, datatype: &str, data: Value| json!({"name": name, "shape": shape, "datatype": datatype, "data": data});
    let good = input("input1", json!([4]), "FP32", json!([1, 2, 3, 4]));
    let cases: Vec<(&str, String, &str)> = vec![
        ("/v2/models/nope/infer", "{}".into(), "unknown model 'nope'"),
        ("/v2/models/tiny_add/versions/9/infer", "{}".into(), "no version '9'"),
        (
            "/v2/models/tiny_add/infer",
            "{not json".into(),
            "not a valid inference request",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": 3}).to_string(),
            "not a valid inference request",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"parameters": {"timeout": "soon"}, "inputs": [good.clone()]}).to_string(),
            "not a valid inference request",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("input0", json!([3]), "FP32", json!([1, 2, 3])), good.clone()]}).to_string(),
            "shape [3]",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("input0", json!([4]), "INT32", json!([1, 2, 3, 4])), good.clone()]}).to_string(),
            "is INT32; the model takes FP32",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [good.clone()]}).to_string(),
            "lacks input 'input0'",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("x", json!([4]), "FP32", json!([1, 2, 3, 4])), good.clone()]}).to_string(),
            "no input 'x'",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("input0", json!([4]), "FP32", json!([1, 2])), good.clone()]}).to_string(),
            "needs 4 elements but has 2",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("input0", json!([4]), "FP32", json!(["a", 2, 3, 4])), good.clone()]}).to_string(),
            "\"a\" is not a FP32 value",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("input0", json!([1u64 << 32, 1u64 << 32]), "FP32", json!([])), good.clone()]})
                .to_string(),
            "more elements than a tensor can hold",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("input0", json!([4]), "FP32", json!([[1, 2], [3, 4], [5]])), good.clone()]})
                .to_string(),
            "needs 4 elements but has more",
        ),
        (
            "/v2/models/tiny_add/infer",
            json!({"inputs": [input("input0", json!([4]), "FP32", json!([1, 2, {"x": 3}, 4])), good.clone()]})
                .to_string(),
            "{\"x\":3} is not a FP32 value",
        ),
        (
            "/v2/models/tiny_add/infer",
            format!(
                r#"{{"inputs": [{{"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2,, 4]}}, {good}]}}"#
            ),
            "input 'input0': its data is not valid JSON",
        ),
        (
            "/v2/models/tiny_add/infer",
            format!(
                r#"{{"inputs": [{good}, {{"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}}], "id": 7}}"#
            ),
            "not a valid inference request: invalid type: integer `7`",
        ),
    ];
    for (path, body, message) in cases {
        let (status, response) = served.post(path, &body);
        assert_eq!(status, 400, "{path} {body}: {response}");
        let error = response["error"].as_str().unwrap_or_default();
        assert!(error.contains(message), "{body}: '{error}' should name '{message}'");
        let ok = json!({"inputs": [input("input0", json!([4]), "FP32", json!([1, 2, 3, 4])), good.clone()]});
        assert_eq!(
            served.post("/v2/models/tiny_add/infer", &ok.to_string()).0,
            200,
            "after {body}"
        );
    }
    assert_eq!(served.get("/v2/models/nope").0, 400);
}

/// The value of the sample `series` (name and labels exactly as encoded) in metrics `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_count_requests_by_outcome_and_time_them() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &[]);
    let good = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
    ]});
    for _ in 0..3 {
        assert_eq!(served.post("/v2/models/tiny_add/infer", &good.to_string()).0, 200);
    }
    assert_eq!(served.post("/v2/models/tiny_add/infer", "{}").0, 400);
    assert_eq!(served.post("/v2/models/made-up/infer", "{}").0, 400);
    let mut response = served
        .agent
        .get(&format!("{}/metrics", served.base))
        .call()
        .expect("metrics answer");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or_default().to_string());
    assert!(content_type
        .unwrap_or_default()
        .starts_with("application/openmetrics-text"));
    let text = response.body_mut().read_to_string().expect("text");
    let requests = |model: &str, outcome: &str| {
        sample(
            &text,
            &format!("halo_inference_requests_total{{model=\"{model}\",protocol=\"http\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(requests("tiny_add", "success"), Some(3.0), "{text}");
    assert_eq!(requests("tiny_add", "invalid_argument"), Some(1.0), "{text}");
    // A client's made-up model names share one series rather than each making one.
    assert_eq!(requests("_unknown", "invalid_argument"), Some(1.0), "{text}");
    assert!(!text.contains("made-up"), "{text}");
    let count = |series: &str| sample(&text, series);
    assert_eq!(
        count("halo_inference_compute_seconds_count{model=\"tiny_add\"}"),
        Some(3.0)
    );
    assert_eq!(
        count("halo_inference_queue_seconds_count{model=\"tiny_add\"}"),
        Some(3.0)
    );
    assert_eq!(
        count("halo_inference_request_seconds_count{model=\"tiny_add\",protocol=\"http\"}"),
        Some(4.0)
    );
    assert!(count("halo_inference_compute_seconds_sum{model=\"tiny_add\"}").is_some_and(|s| s > 0.0));
    assert_eq!(
        count("halo_inference_requests_in_flight{model=\"tiny_add\"}"),
        Some(0.0)
    );
    assert!(count("halo_device_memory_in_use_bytes{model=\"tiny_add\",device=\"local-task\"}").is_some());
    assert_eq!(
        count("halo_device_held_seconds{model=\"tiny_add\",device=\"local-task\"}"),
        Some(0.0),
        "an idle device is not held"
    );
    assert!(text.trim_end().ends_with("# EOF"));
}

#[test]
fn a_body_over_the_limit_is_refused() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--max-request-bytes=64"]);
    let body = json!({"inputs": [{"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]});
    assert_eq!(served.post("/v2/models/tiny_add/infer", &body.to_string()).0, 413);
}

/// A body compressed as a client compresses it for `Content-Encoding: coding` (gzip, or zlib's
/// format for deflate).
fn compressed(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let level = flate2::Compression::default();
    let written = if coding.eq_ignore_ascii_case("deflate") {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), level);
        encoder.write_all(body).and_then(|()| encoder.finish())
    } else {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
        encoder.write_all(body).and_then(|()| encoder.finish())
    };
    written.expect("compressed in memory")
}

/// `body` decompressed from `coding` (gzip or deflate).
fn decompressed(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = match coding {
        "gzip" => flate2::read::GzDecoder::new(body).read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(body).read_to_end(&mut out),
        other => panic!("no decoder for {other}"),
    };
    read.expect("a compressed answer");
    out
}

impl Served {
    /// Posts `body` with the `Content-Encoding` and `Accept-Encoding` given: the answer's status,
    /// its `Content-Encoding` and its body as sent.
    fn post_coded(
        &self,
        path: &str,
        coding: Option<&str>,
        accept: Option<&str>,
        body: &[u8],
    ) -> (u16, Option<String>, Vec<u8>) {
        let mut request = self
            .agent
            .post(&format!("{}{path}", self.base))
            .content_type("application/json");
        if let Some(coding) = coding {
            request = request.header("Content-Encoding", coding);
        }
        if let Some(accept) = accept {
            request = request.header("Accept-Encoding", accept);
        }
        let mut response = request.send(body).expect("the server answers");
        let coding = response
            .headers()
            .get("content-encoding")
            .map(|v| v.to_str().expect("ascii").to_string());
        (
            response.status().as_u16(),
            coding,
            response.body_mut().read_to_vec().expect("a body"),
        )
    }
}

#[test]
fn compressed_requests_and_answers_equal_plain_ones() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &[]);
    let path = "/v2/models/tiny_add/infer";
    let body = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [0.5, 0.5, 0.5, 0.5]},
    ]})
    .to_string();
    let (status, plain) = served.post(path, &body);
    assert_eq!(status, 200, "{plain}");
    // Codings are case-insensitive; x-gzip is gzip's old name.
    for coding in ["gzip", "deflate", "GZip", "x-gzip", "identity"] {
        let sent = if coding == "identity" {
            body.clone().into_bytes()
        } else {
            compressed(coding, body.as_bytes())
        };
        let (status, answer_coding, answer) = served.post_coded(path, Some(coding), None, &sent);
        assert_eq!((status, answer_coding), (200, None), "{coding}");
        assert_eq!(
            serde_json::from_slice::<Value>(&answer).expect("JSON"),
            plain,
            "{coding}"
        );
    }
    for accept in ["gzip", "deflate"] {
        let (status, answer_coding, answer) = served.post_coded(path, None, Some(accept), body.as_bytes());
        assert_eq!((status, answer_coding.as_deref()), (200, Some(accept)));
        let answer: Value = serde_json::from_slice(&decompressed(accept, &answer)).expect("JSON");
        assert_eq!(answer, plain, "{accept}");
    }
}

#[test]
fn a_request_body_that_does_not_decompress_gets_an_answer_naming_why() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--max-request-bytes=4096"]);
    let path = "/v2/models/tiny_add/infer";
    let body = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
    ]})
    .to_string();
    let gzipped = compressed("gzip", body.as_bytes());
    // A megabyte of zeros compresses to about a kilobyte: under the limit as sent, far over it read.
    let bomb = compressed("gzip", &vec![0u8; 1 << 20]);
    assert!(bomb.len() < 4096);
    let cases: [(&str, Vec<u8>, u16, &str); 5] = [
        (
            "br",
            gzipped.clone(),
            400,
            "Content-Encoding \"br\" is not one this server reads",
        ),
        (
            "gzip, deflate",
            gzipped.clone(),
            400,
            "Content-Encoding \"gzip, deflate\"",
        ),
        (
            "gzip",
            body.clone().into_bytes(),
            400,
            "the gzip-compressed request body could not be read",
        ),
        (
            "deflate",
            gzipped[..gzipped.len() / 2].to_vec(),
            400,
            "the deflate-compressed request body could not be read",
        ),
        (
            "gzip",
            bomb,
            413,
            "decompresses to more than the server's limit of 4096 bytes",
        ),
    ];
    for (coding, sent, status, message) in cases {
        let (got, _, answer) = served.post_coded(path, Some(coding), None, &sent);
        let answer: Value = serde_json::from_slice(&answer).expect("a JSON error");
        let error = answer["error"].as_str().unwrap_or_default();
        assert_eq!(got, status, "{coding}: {error}");
        assert!(error.contains(message), "{coding}: '{error}' should say '{message}'");
        let (ok, _, answer) = served.post_coded(path, Some("gzip"), None, &gzipped);
        assert_eq!(ok, 200, "after {coding}: {}", String::from_utf8_lossy(&answer));
    }
}

/// An infer request's head on a fresh connection, announcing `length` body bytes, and the first
/// `sent` of them.
fn partial_request(served: &Served, length: usize, sent: usize) -> std::net::TcpStream {
    use std::io::Write;
    let address = served.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("a connection");
    let head = format!(
        "POST /v2/models/tiny_add/infer HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("the head");
    stream.write_all(&vec![b' '; sent]).expect("part of the body");
    stream
}

/// The most memory the process `pid` has held, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("a size")
}

#[test]
fn a_request_the_model_has_no_room_for_is_refused_without_its_body_being_held() {
    use std::io::{Read, Write};
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--max-concurrency=1", "--max-queue=0"]);
    // A request whose body is still arriving holds the model's one place.
    let uploading = partial_request(&served, 1000, 10);
    let in_flight = || {
        let text = served
            .agent
            .get(&format!("{}/metrics", served.base))
            .call()
            .expect("metrics");
        let text = text.into_body().read_to_string().expect("text");
        sample(&text, "halo_inference_requests_in_flight{model=\"tiny_add\"}")
    };
    let started = std::time::Instant::now();
    while in_flight() != Some(1.0) {
        assert!(started.elapsed().as_secs() < 30, "the first request never arrived");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The next sends 48 MiB, which the server reads and drops as they arrive, then answers 503.
    let before = peak_rss_kib(served.child.id());
    const BODY: usize = 48 << 20;
    let mut refused = partial_request(&served, BODY, 0);
    let mut reader = refused.try_clone().expect("a second handle");
    let sender = std::thread::spawn(move || {
        let chunk = vec![b' '; 1 << 20];
        (0..BODY / chunk.len()).all(|_| refused.write_all(&chunk).is_ok())
    });
    reader
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("a timeout");
    let mut answer = vec![0; 4096];
    let read = reader.read(&mut answer).expect("an answer");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("model 'tiny_add' is busy"), "{answer}");
    assert!(sender.join().expect("the sender"), "the whole body was taken");
    let grew = peak_rss_kib(served.child.id()).saturating_sub(before);
    assert!(
        grew < 16 << 10,
        "the server's peak memory grew {grew} KiB for a refused body"
    );
    // The upload given up, its place is free again.
    drop(uploading);
    let body = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
    ]});
    let started = std::time::Instant::now();
    loop {
        let (status, response) = served.post("/v2/models/tiny_add/infer", &body.to_string());
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{response}");
        assert!(started.elapsed().as_secs() < 30, "the place never came free");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_model_that_cannot_load_stops_the_server_with_its_name() {
    let output = common::halo_command()
        .current_dir(models())
        .args(host_args(&[
            "serve",
            "--http-port=0",
            "--grpc-port=0",
            "--module=tiny_add.vmfb",
            "--function=missing",
        ]))
        .output()
        .expect("halo runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("model 'tiny_add'") && stderr.contains("missing"),
        "{stderr}"
    );
}

/// `halo serve` with `args` after the ports, expected to stop at start; its stderr.
fn refused_at_start(args: &[&str]) -> String {
    let output = common::halo_command()
        .current_dir(models())
        .args(["serve", "--http-port=0", "--grpc-port=0"])
        .args(host_args(args))
        .output()
        .expect("halo runs");
    assert!(!output.status.success(), "{args:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Without `--function` (or `function` in config.toml) a module's one public function is served;
/// a module with several is refused at start, naming them.
#[test]
fn a_modules_only_function_is_served_without_being_named() {
    let served = Served::start_with(&["--module=../benchmark-models/squeezenet.vmfb".to_string()]);
    let (status, metadata) = served.get("/v2/models/squeezenet");
    assert_eq!(status, 200, "{metadata}");
    assert_eq!(metadata["inputs"][0]["name"], "input", "{metadata}");
    drop(served);
    let stderr = refused_at_start(&["--module=control_flow.vmfb"]);
    assert!(
        stderr.contains("no function is named and the last module exports 5 (if_positive, sum4, halve_until, collatz, for_accumulate)")
            && stderr.contains("--function"),
        "{stderr}"
    );
}

#[test]
fn a_function_without_a_declaration_is_served_with_the_types_given() {
    // Plain iree-compile of an ONNX import records no declaration.
    let module = ["--module=onnx_mlp.vmfb", "--function=onnx_mlp"];
    let stderr = refused_at_start(&module);
    assert!(
        stderr.contains("takes 1 inputs but has no declaration of them") && stderr.contains("--input-type"),
        "{stderr}"
    );
    for (extra, message) in [
        (
            vec!["--input-type=f32"],
            "'input0' of function 'onnx_mlp' is described as a scalar",
        ),
        (
            vec!["--input-type=tensor<2x8xf32>", "--input-type=f32"],
            "takes 1 inputs but is described with 2",
        ),
        (
            vec!["--input-type=tensor<2x8xf32>", "--output-type=tensor<2x4xf32>"],
            "returns 2 results but is described with 1 outputs",
        ),
        (vec!["--input-type=tensor<2x8xq7>"], "q7"),
    ] {
        let stderr = refused_at_start(&[&module[..], &extra[..]].concat());
        assert!(
            stderr.contains(message) && !stderr.contains("panicked"),
            "{extra:?}: {stderr}"
        );
    }

    let types = [
        "--input-type=tensor<2x8xf32>",
        "--output-type=tensor<2x4xf32>",
        "--output-type=tensor<2x4xf32>",
    ];
    let served = Served::start("onnx_mlp.vmfb", "onnx_mlp", &types);
    let (status, metadata) = served.get("/v2/models/onnx_mlp");
    assert_eq!(status, 200, "{metadata}");
    assert_eq!(
        metadata["inputs"],
        json!([{"name": "input0", "datatype": "FP32", "shape": [2, 8]}])
    );
    assert_eq!(
        metadata["outputs"][1],
        json!({"name": "output1", "datatype": "FP32", "shape": [2, 4]})
    );
    let input = halo_runtime::npy::read(&models().join("onnx_mlp.basic.0.npy")).expect("the fixture input");
    let body =
        json!({"inputs": [{"name": "input0", "shape": input.shape, "datatype": "FP32", "data": f32_data(&input)}]});
    let (status, response) = served.post("/v2/models/onnx_mlp/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    let expected = run_module_results("onnx_mlp.vmfb", "onnx_mlp", &["@onnx_mlp.basic.0.npy"], 2);
    for (output, expected) in response["outputs"].as_array().expect("outputs").iter().zip(&expected) {
        assert_eq!(json_f32(&output["data"]), f32_data(expected));
    }
}

#[test]
fn a_repository_configuration_gives_the_types_of_an_undeclared_function() {
    let config = format!(
        "function = \"onnx_mlp\"\nmodules = [{:?}]\ninput_names = [\"features\"]\ninput_types = [\"tensor<2x8xf32>\"]\n",
        model("onnx_mlp.vmfb").display().to_string()
    );
    let root = repository("typed", &[("mlp", config)]);
    let served = Served::start_with(&[format!("--model-repository={}", root.display())]);
    let (status, metadata) = served.get("/v2/models/mlp");
    assert_eq!(status, 200, "{metadata}");
    assert_eq!(
        metadata["inputs"],
        json!([{"name": "features", "datatype": "FP32", "shape": [2, 8]}])
    );
    let body = json!({"inputs": [{"name": "features", "shape": [2, 8], "datatype": "FP32", "data": vec![1.0; 16]}]});
    let (status, response) = served.post("/v2/models/mlp/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    let expected = run_module_results("onnx_mlp.vmfb", "onnx_mlp", &["2x8xf32=1"], 2);
    assert_eq!(json_f32(&response["outputs"][0]["data"]), f32_data(&expected[0]));
    std::fs::remove_dir_all(root).ok();
}

#[test]
fn classification_answers_carry_the_labels_a_repository_gives() {
    let config = format!("{}output_labels = {{ sum = \"classes.txt\" }}\n", adder_config());
    let root = repository("labels", &[("adder", config)]);
    // CRLF and LF lines, an empty label, and no label for the last class.
    std::fs::write(root.join("adder/classes.txt"), "zero\r\none\n\n").expect("labels");
    let served = Served::start_with(&[format!("--model-repository={}", root.display())]);
    let body = json!({
        "inputs": [
            {"name": "a", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            {"name": "b", "shape": [4], "datatype": "FP32", "data": [0, 5, -10, 0]},
        ],
        "outputs": [{"name": "sum", "parameters": {"classification": 4}}],
    });
    let (status, response) = served.post("/v2/models/adder/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    assert_eq!(
        response["outputs"][0],
        json!({"name": "sum", "datatype": "BYTES", "shape": [4],
            "data": ["7.000000:1:one", "4.000000:3", "1.000000:0:zero", "-7.000000:2:"]})
    );
    let (status, config) = served.get("/v2/models/adder/config");
    assert_eq!(status, 200, "{config}");
    assert_eq!(config["output"][0]["label_filename"], "classes.txt", "{config}");
    assert!(config["input"][0].get("label_filename").is_none(), "{config}");
    std::fs::remove_dir_all(root).ok();
}

#[test]
fn labels_for_an_output_the_model_lacks_or_a_missing_file_stop_the_server_naming_them() {
    let module = ["--module=tiny_add.vmfb", "--function=tiny_add"];
    let stderr = refused_at_start(&[module[0], module[1], "--output-labels=scores=classes.txt"]);
    assert!(
        stderr.contains("output 'scores', which the model does not have") && stderr.contains("output0"),
        "{stderr}"
    );
    let stderr = refused_at_start(&[module[0], module[1], "--output-labels=output0=no-such-labels.txt"]);
    assert!(
        stderr.contains("the labels of output 'output0'") && stderr.contains("no-such-labels.txt"),
        "{stderr}"
    );
    let stderr = refused_at_start(&[module[0], module[1], "--output-labels=classes.txt"]);
    assert!(stderr.contains("is not OUTPUT=FILE"), "{stderr}");
}

#[test]
fn a_warm_up_calls_the_model_with_zeros_before_it_serves() {
    // A zero divisor fails this function's own check: the warm-up call ran, and the server
    // stopped naming the model and the call's error.
    let stderr = refused_at_start(&["--module=errors.vmfb", "--function=checked_div", "--warmup"]);
    assert!(
        stderr.contains("divisor must not be zero") && stderr.contains("warming up model 'errors'"),
        "{stderr}"
    );
    let stderr = refused_at_start(&["--module=dynamic_shapes.vmfb", "--function=scale_1d", "--warmup"]);
    assert!(
        stderr.contains("input 'input0' has the dynamic shape [-1]; a warm-up needs static shapes"),
        "{stderr}"
    );
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--warmup"]);
    let body = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
    ]});
    let (status, response) = served.post("/v2/models/tiny_add/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    assert_eq!(json_f32(&response["outputs"][0]["data"]), [2.0, 3.0, 4.0, 5.0]);
    // The warm-up is not a request.
    let (_, statistics) = served.get("/v2/models/tiny_add/stats");
    assert_eq!(
        statistics["model_stats"][0]["inference_stats"]["success"]["count"], 1,
        "{statistics}"
    );
}

#[test]
fn a_repository_setting_for_warm_up_overrides_the_flag() {
    let config = |warmup: bool| {
        format!(
            "function = \"checked_div\"\nmodules = [{:?}]\nwarmup = {warmup}\n",
            model("errors.vmfb").display().to_string()
        )
    };
    let root = repository("warmup-off", &[("divider", config(false))]);
    let served = Served::start_with(&[format!("--model-repository={}", root.display()), "--warmup".into()]);
    assert_eq!(served.get("/v2/models/divider/ready").0, 200);
    drop(served);
    std::fs::remove_dir_all(root).ok();
    let root = repository("warmup-on", &[("divider", config(true))]);
    let stderr = refused_at_start(&[&format!("--model-repository={}", root.display())]);
    assert!(stderr.contains("warming up model 'divider'"), "{stderr}");
    std::fs::remove_dir_all(root).ok();
}

/// The benchmark set's test-scale MLP (`tensor<?x16xf32>` to `tensor<?x10xf32>`), this
/// architecture's build.
fn batchable_mlp() -> PathBuf {
    common::host_module(&models().join("../benchmark-models/mlp.vmfb"))
}

/// An inference request for the MLP of `rows` rows, different for each `seed`.
fn mlp_request(rows: usize, seed: usize) -> Value {
    let data: Vec<f32> = (0..rows * 16)
        .map(|i| ((i * 5 + seed * 3) % 17) as f32 / 8.0 - 1.0)
        .collect();
    json!({"inputs": [{"name": "input", "shape": [rows, 16], "datatype": "FP32", "data": data}]})
}

#[test]
fn a_batching_server_answers_concurrent_clients_as_a_call_each_would() {
    let served = Served::start_with(&[
        format!("--module={}", batchable_mlp().display()),
        "--function=mlp".into(),
        "--max-concurrency=1".into(),
        "--max-batch-size=4".into(),
    ]);
    let (_, config) = served.get("/v2/models/mlp/config");
    assert_eq!(config["max_batch_size"], 4, "{config}");
    assert!(config["dynamic_batching"].is_object(), "{config}");
    let requests: Vec<(usize, usize)> = (0..24).map(|seed| (1 + seed % 3, seed)).collect();
    let alone: Vec<Value> = (requests.iter())
        .map(|&(rows, seed)| {
            let (status, answer) = served.post("/v2/models/mlp/infer", &mlp_request(rows, seed).to_string());
            assert_eq!(status, 200, "{answer}");
            answer["outputs"][0].clone()
        })
        .collect();
    let served = Arc::new(served);
    let clients: Vec<_> = (0..6)
        .map(|client| {
            let (served, requests) = (served.clone(), requests.clone());
            std::thread::spawn(move || {
                (requests.iter().skip(client).step_by(6))
                    .map(|&(rows, seed)| {
                        let (status, answer) =
                            served.post("/v2/models/mlp/infer", &mlp_request(rows, seed).to_string());
                        assert_eq!(status, 200, "{answer}");
                        (seed, answer["outputs"][0].clone())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for (seed, output) in clients.into_iter().flat_map(|c| c.join().expect("a client")) {
        assert_eq!(output["shape"], alone[seed]["shape"], "request {seed}");
        let (got, want) = (json_f32(&output["data"]), json_f32(&alone[seed]["data"]));
        let close = got
            .iter()
            .zip(&want)
            .all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0));
        assert!(close && got.len() == want.len(), "request {seed}: {got:?} != {want:?}");
    }
    let (_, statistics) = served.get("/v2/models/mlp/stats");
    let model = &statistics["model_stats"][0];
    let rows: u64 = requests.iter().map(|&(rows, _)| rows as u64).sum::<u64>() * 2;
    assert_eq!(model["inference_count"], rows, "{statistics}");
    let batches = model["batch_stats"].as_array().expect("batch statistics");
    let batched_rows: u64 = (batches.iter())
        .map(|b| b["batch_size"].as_u64().unwrap() * b["compute_infer"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(batched_rows, rows, "every row was computed once: {statistics}");
    assert!(
        batches
            .iter()
            .all(|b| (1..=4).contains(&b["batch_size"].as_u64().unwrap())),
        "{statistics}"
    );

    let (status, answer) = served.post("/v2/models/mlp/infer", &mlp_request(5, 0).to_string());
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("at most 4 (max_batch_size)"),
        "{answer}"
    );
}

#[test]
fn the_trace_shows_which_requests_each_call_answered() {
    let trace = std::env::temp_dir().join(format!("halo-serve-trace-{}.json", std::process::id()));
    let mut served = Served::start_with(&[
        format!("--module={}", batchable_mlp().display()),
        "--function=mlp".into(),
        "--max-concurrency=1".into(),
        "--max-batch-size=4".into(),
        format!("--trace={}", trace.display()),
    ]);
    let served_ref = &served;
    std::thread::scope(|scope| {
        for seed in 0..6 {
            scope.spawn(move || {
                let (status, answer) = served_ref.post("/v2/models/mlp/infer", &mlp_request(1, seed).to_string());
                assert_eq!(status, 200, "{answer}");
            });
        }
    });
    served.terminate();
    let status = served.exit_within(Duration::from_secs(20));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", served.log.lock().unwrap());
    let text = std::fs::read_to_string(&trace).expect("the trace was written");
    std::fs::remove_file(&trace).ok();
    let events: Vec<Value> = serde_json::from_str(&text).expect("the trace is JSON");
    let began = |name: &str| {
        (events.iter())
            .filter(|e| e["name"] == name && e["ph"] == "B")
            .map(|e| e["args"].clone())
            .collect::<Vec<_>>()
    };
    let mut requests: Vec<u64> = (began("serve.request").iter())
        .map(|args| args["request"].as_str().unwrap().parse().unwrap())
        .collect();
    requests.sort_unstable();
    requests.dedup();
    assert_eq!(requests, (0..6).collect::<Vec<_>>(), "{text}");
    let mut answered: Vec<u64> = Vec::new();
    for args in began("serve.call") {
        let numbers: Vec<u64> = (args["requests"].as_str().unwrap().split(','))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(args["rows"].as_str().unwrap(), numbers.len().to_string(), "{args}");
        answered.extend(numbers);
    }
    answered.sort_unstable();
    assert_eq!(answered, requests, "each request in exactly one call");
}

#[test]
fn a_repository_sets_max_batch_size_and_a_model_that_cannot_batch_stops_the_server() {
    let config = |module: &Path, function: &str| {
        format!(
            "function = \"{function}\"\nmodules = [{:?}]\nmax_batch_size = 2\n",
            module.display().to_string()
        )
    };
    let root = repository("batching", &[("mlp", config(&batchable_mlp(), "mlp"))]);
    let served = Served::start_with(&[format!("--model-repository={}", root.display())]);
    let (_, configuration) = served.get("/v2/models/mlp/config");
    assert_eq!(configuration["max_batch_size"], 2, "{configuration}");
    drop(served);
    std::fs::remove_dir_all(root).ok();
    let stderr = refused_at_start(&["--module=tiny_add.vmfb", "--function=tiny_add", "--max-batch-size=2"]);
    assert!(
        stderr.contains("input 'input0' has shape [4]") && stderr.contains("model 'tiny_add'"),
        "{stderr}"
    );
}

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

use tonic_health::pb::health_check_response::ServingStatus;

/// What a server's gRPC port answers about its health.
struct GrpcAnswers {
    /// Each health check's name and status (or the call's code).
    health: Vec<(&'static str, Result<ServingStatus, tonic::Code>)>,
    /// `ServerLive`'s and `ServerReady`'s answers.
    live: bool,
    ready: bool,
    /// A `ModelMetadata` call's code and message.
    metadata: (tonic::Code, String),
}

/// Asks the gRPC port at `address` for its health and the protocol's calls (metadata of a model
/// `m`, which no test serves), each within 10 s.
fn grpc_answers(address: &str) -> GrpcAnswers {
    use halo_serve::grpc::wire::grpc_inference_service_client::GrpcInferenceServiceClient;
    use halo_serve::grpc::wire::{ModelMetadataRequest, ServerLiveRequest, ServerReadyRequest};
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("a gRPC connection");
        let mut checks = HealthClient::new(channel.clone());
        let mut health = Vec::new();
        for name in ["live", "", "ready", "inference.GRPCInferenceService"] {
            let answer = checks.check(HealthCheckRequest { service: name.into() }).await;
            health.push((name, answer.map(|a| a.into_inner().status()).map_err(|s| s.code())));
        }
        let mut inference = GrpcInferenceServiceClient::new(channel);
        let live = inference
            .server_live(ServerLiveRequest {})
            .await
            .expect("ServerLive")
            .into_inner()
            .live;
        let ready = inference
            .server_ready(ServerReadyRequest {})
            .await
            .expect("ServerReady")
            .into_inner()
            .ready;
        let refused = inference
            .model_metadata(ModelMetadataRequest {
                name: "m".into(),
                version: String::new(),
            })
            .await
            .expect_err("no metadata for model 'm'");
        GrpcAnswers {
            health,
            live,
            ready,
            metadata: (refused.code(), refused.message().to_string()),
        }
    })
}

/// Over gRPC, places go to messages as they arrive: two unary calls stopped in the middle of
/// their messages hold both places of a model admitting two, so a third call is refused before
/// its message is read, and a stream whose next message finds no place ends `UNAVAILABLE`. Once
/// they have gone, a message is read again (a damaged one is then `INVALID_ARGUMENT`).
#[test]
fn grpc_places_are_held_by_messages_as_they_arrive() {
    let served = Served::start(
        "tiny_add.vmfb",
        "tiny_add",
        &["--max-concurrency=1", "--max-queue=1", "--body-pause-ms=0"],
    );
    // A 100-byte message of which 6 bytes came, and a whole 3-byte message that is not protobuf.
    let part = [&[0u8, 0, 0, 0, 100][..], b"\x0a\x04tiny"].concat();
    let damaged = [0u8, 0, 0, 0, 3, 0xff, 0xff, 0xff];
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let (grpc, part) = (served.grpc.clone(), part.clone());
            std::thread::spawn(move || {
                raw_grpc_call(&grpc, "ModelInfer", &part, BodyEnd::StaysOpen, Duration::from_secs(3))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let wait = Duration::from_secs(20);
    let refused = raw_grpc_call(&served.grpc, "ModelInfer", &damaged, BodyEnd::Ends, wait);
    let stream_refused = raw_grpc_call(&served.grpc, "ModelStreamInfer", &part, BodyEnd::StaysOpen, wait);
    let held: Vec<_> = holders.into_iter().map(|h| h.join().expect("a holder")).collect();
    let read = raw_grpc_call(&served.grpc, "ModelInfer", &damaged, BodyEnd::Ends, wait);
    assert_eq!(held, [None, None], "the calls stopped mid-message were answered");
    for (what, ended) in [("a call", &refused), ("a stream's message", &stream_refused)] {
        let (status, message) = ended.clone().unwrap_or_else(|| panic!("{what} was never answered"));
        assert_eq!(status, "14", "{what}: UNAVAILABLE, not {status} {message}");
        assert!(message.contains("the server is busy"), "{what}: {message}");
    }
    let (status, message) = read.expect("an answer once the places are free");
    assert_eq!(status, "3", "INVALID_ARGUMENT, not {status} {message}");
}

/// Open `ModelStreamInfer` streams have a limit of their own (`--max-grpc-streams`): past it a
/// stream is refused `UNAVAILABLE`, while unary calls are still read and answered.
#[test]
fn grpc_streams_past_their_limit_are_refused_and_calls_go_on() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--max-grpc-streams=2"]);
    let idle: Vec<_> = (0..2)
        .map(|_| {
            let grpc = served.grpc.clone();
            std::thread::spawn(move || {
                raw_grpc_call(
                    &grpc,
                    "ModelStreamInfer",
                    &[],
                    BodyEnd::StaysOpen,
                    Duration::from_secs(3),
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let wait = Duration::from_secs(20);
    let third = raw_grpc_call(&served.grpc, "ModelStreamInfer", &[], BodyEnd::StaysOpen, wait);
    let damaged = [0u8, 0, 0, 0, 3, 0xff, 0xff, 0xff];
    let call = raw_grpc_call(&served.grpc, "ModelInfer", &damaged, BodyEnd::Ends, wait);
    let idle: Vec<_> = idle.into_iter().map(|h| h.join().expect("an idle stream")).collect();
    assert_eq!(idle, [None, None], "an idle stream was ended");
    let (status, message) = third.expect("the third stream is answered");
    assert_eq!(status, "14", "UNAVAILABLE, not {status} {message}");
    assert!(message.contains("2 gRPC streams are open"), "{message}");
    let (status, message) = call.expect("the call is answered");
    assert_eq!(
        status, "3",
        "the call's message is read: INVALID_ARGUMENT, not {status} {message}"
    );
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

/// A `halo serve` of the repository at `root`, compiling into `root/cache` with a compiler that
/// is the shell script `compiler`; with its stderr read up to the line saying it loads, and the
/// address that answers health checks meanwhile.
fn loading_server(root: &Path, compiler: &str) -> (Stopped, BufReader<std::process::ChildStderr>, String) {
    let (child, stderr, http, _) = loading_server_with_grpc(root, compiler);
    (child, stderr, http)
}

/// [`loading_server`], with the gRPC address that answers health checks meanwhile too.
fn loading_server_with_grpc(
    root: &Path,
    compiler: &str,
) -> (Stopped, BufReader<std::process::ChildStderr>, String, String) {
    loading_server_with(root, compiler, &[])
}

/// [`loading_server_with_grpc`], with `extra` arguments for `halo serve`.
fn loading_server_with(
    root: &Path,
    compiler: &str,
    extra: &[&str],
) -> (Stopped, BufReader<std::process::ChildStderr>, String, String) {
    use std::os::unix::fs::PermissionsExt;
    let script = root.join("iree-compile");
    std::fs::write(&script, format!("#!/bin/sh\n{compiler}\n")).expect("the compiler script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Stopped(
        common::halo_command()
            .args(["serve", "--http-port=0", "--grpc-port=0"])
            .arg(format!("--model-repository={}", root.display()))
            .args(extra)
            .env("HALO_IREE_COMPILE", &script)
            .env("HALO_COMPILE_CACHE", root.join("cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("halo serve starts"),
    );
    let mut stderr = BufReader::new(child.0.stderr.take().expect("stderr"));
    let line = read_until(&mut stderr, "health checks meanwhile");
    // "...; HTTP_ADDRESS (HTTP) and GRPC_ADDRESS (gRPC) answer health checks meanwhile"
    let words: Vec<&str> = line.split("; ").nth(1).unwrap_or_default().split_whitespace().collect();
    let (Some(http), Some(grpc)) = (words.first(), words.get(3)) else {
        panic!("two addresses in: {line}");
    };
    (child, stderr, http.to_string(), grpc.to_string())
}

/// Reads `stderr` up to the line containing `needle`, which it returns.
fn read_until(stderr: &mut impl BufRead, needle: &str) -> String {
    let mut line = String::new();
    while !line.contains(needle) {
        line.clear();
        assert!(
            stderr.read_line(&mut line).expect("a line") > 0,
            "halo serve stopped: {line}"
        );
    }
    line
}

/// A process ended however the test ends, so that it holds no pipe open after a failure.
struct Stopped(Child);

impl Stopped {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.stop();
    }
}

fn repository(name: &str, models_and_configs: &[(&str, String)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("halo-serve-repository-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (model, config) in models_and_configs {
        add_model(&root, model, config);
    }
    root
}

fn add_model(root: &Path, model: &str, config: &str) {
    std::fs::create_dir_all(root.join(model)).expect("a model folder");
    std::fs::write(root.join(model).join("config.toml"), config).expect("config.toml");
}

fn adder_config() -> String {
    format!(
        "function = \"tiny_add\"\nmodules = [{:?}]\nversion = \"2\"\ninput_names = [\"a\", \"b\"]\noutput_names = [\"sum\"]\n",
        model("tiny_add.vmfb").display().to_string()
    )
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

/// The scheduling policy (`/proc/PID/task/TID/stat` field 41) of each of `pid`'s threads, by
/// thread name.
#[cfg(target_os = "linux")]
fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            let (head, tail) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_string();
            // Fields after the name start at field 3.
            let policy = tail.split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((name, policy))
        })
        .collect()
}

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

impl Served {
    fn terminate(&self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM was not sent");
    }

    /// The server's exit status, if it ends within `limit`.
    fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().expect("the server's status") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
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

/// Polls `condition` every 20 ms for up to 30 s; false if it never held.
fn within_30_s(mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !condition() {
        if start.elapsed() > Duration::from_secs(30) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A `kernel_loop` request: 1024 values each stepped `n` times.
fn kernel_loop_request(n: i64) -> String {
    json!({"inputs": [
        {"name": "input0", "shape": [1024], "datatype": "INT64", "data": vec![7i64; 1024]},
        {"name": "input1", "shape": [], "datatype": "INT64", "data": [n]},
    ]})
    .to_string()
}

/// Sends `kernel_loop` a request of `steps` that outlives its deadline (`504`), then waits for
/// the model to say it is not ready: that answer.
fn stall_kernel_loop(served: &Served, steps: i64) -> (u16, Value) {
    let (status, answer) = served.post("/v2/models/kernel_loop/infer", &kernel_loop_request(steps));
    assert_eq!(status, 504, "{answer}");
    let mut ready = (0, json!(null));
    assert!(
        within_30_s(|| {
            ready = served.get("/v2/models/kernel_loop/ready");
            ready.0 == 503
        }),
        "the model stayed ready: {ready:?}"
    );
    ready
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

/// `text` with its `%XX` escapes decoded.
fn percent_decoded(text: &str) -> String {
    let mut bytes = Vec::new();
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        let escaped = (byte == b'%')
            .then(|| tail.get(..2))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escaped {
            Some(decoded) => {
                bytes.push(decoded);
                rest = &tail[2..];
            }
            None => {
                bytes.push(byte);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What a raw gRPC call's body does after its bytes.
#[derive(PartialEq)]
enum BodyEnd {
    Ends,
    StaysOpen,
}

/// Opens a gRPC call of `method` on `address` and sends `sent` as its body, then ends the body if
/// `then` says so or keeps it open: the call's `grpc-status` and `grpc-message` if it ends within
/// `within`, else `None`.
fn raw_grpc_call(
    address: &str,
    method: &str,
    sent: &[u8],
    then: BodyEnd,
    within: Duration,
) -> Option<(String, String)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(address).await.expect("a connection");
        let (client, connection) = h2::client::handshake(tcp).await.expect("an HTTP/2 handshake");
        tokio::spawn(connection);
        let mut client = client.ready().await.expect("a stream");
        let request = http::Request::post(format!("http://{address}/inference.GRPCInferenceService/{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut body) = client.send_request(request, false).expect("the request");
        body.send_data(bytes::Bytes::copy_from_slice(sent), then == BodyEnd::Ends)
            .expect("the bytes");
        let ended = tokio::time::timeout(within, async {
            let response = response.await.expect("a response");
            // `grpc-message` is percent-encoded.
            let field = |headers: &http::HeaderMap, name: &str| {
                headers
                    .get(name)
                    .map(|v| percent_decoded(v.to_str().unwrap_or_default()))
            };
            // A call refused at once answers in its headers alone.
            if let Some(status) = field(response.headers(), "grpc-status") {
                return (status, field(response.headers(), "grpc-message").unwrap_or_default());
            }
            let mut answer = response.into_body();
            while let Some(data) = answer.data().await {
                data.expect("the answer's bytes");
            }
            let trailers = answer.trailers().await.expect("trailers").unwrap_or_default();
            (
                field(&trailers, "grpc-status").unwrap_or_default(),
                field(&trailers, "grpc-message").unwrap_or_default(),
            )
        })
        .await
        .ok();
        drop(body);
        ended
    })
}

/// A client that sends part of an inference request and then nothing gives its place back once
/// its pause passes `--body-pause-ms`: over HTTP its request is answered `504` naming the bytes
/// it had, over gRPC `DEADLINE_EXCEEDED` (a unary call's message, or one message of a stream;
/// between messages a stream may pause). Before, three such clients held every place of a model
/// for as long as they kept their connections, and every other client was refused as busy.
#[test]
fn clients_that_stop_mid_request_give_their_places_back_after_the_pause_limit() {
    use std::io::{Read, Write};
    let served = Served::start(
        "tiny_add.vmfb",
        "tiny_add",
        &["--max-concurrency=1", "--max-queue=2", "--body-pause-ms=300"],
    );
    let address = served.base.trim_start_matches("http://").to_string();
    let partial = || {
        let mut stream = std::net::TcpStream::connect(&address).expect("a connection");
        let head = "POST /v2/models/tiny_add/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                    Content-Length: 1000\r\n\r\n{\"inputs\"";
        stream.write_all(head.as_bytes()).expect("the request's start");
        stream
    };
    let add = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [10, 20, 30, 40]},
    ]})
    .to_string();
    // And one that sends part of a request's head.
    let mut head_only = std::net::TcpStream::connect(&address).expect("a connection");
    head_only
        .write_all(b"POST /v2/models/tiny_add/infer HTTP/1.1\r\nHo")
        .expect("part of a head");
    let held: Vec<_> = (0..3).map(|_| partial()).collect();
    std::thread::sleep(Duration::from_millis(50));
    let (busy, _) = served.post("/v2/models/tiny_add/infer", &add);
    let answers: Vec<String> = held
        .into_iter()
        .map(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            answer
        })
        .collect();
    head_only.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let closed = head_only.read(&mut [0; 64]);
    let (status, answer) = served.post("/v2/models/tiny_add/infer", &add);
    assert!(
        matches!(closed, Ok(0)),
        "the connection with part of a head was not closed: {closed:?}"
    );
    assert_eq!(
        busy, 503,
        "three clients in the middle of a request fill the model's places"
    );
    for answer in &answers {
        assert!(
            answer.starts_with("HTTP/1.1 504")
                && answer.contains("the request body stalled: no bytes arrived for 300ms after the first 9 bytes"),
            "{answer}"
        );
    }
    assert_eq!(
        (status, json_f32(&answer["outputs"][0]["data"])),
        (200, vec![11.0, 22.0, 33.0, 44.0])
    );

    // A 100-byte message of which 6 bytes came.
    let part = [&[0u8, 0, 0, 0, 100][..], b"\x0a\x04tiny"].concat();
    let wait = Duration::from_secs(20);
    for method in ["ModelInfer", "ModelStreamInfer"] {
        let ended = raw_grpc_call(&served.grpc, method, &part, BodyEnd::StaysOpen, wait);
        let (status, message) = ended.unwrap_or_else(|| panic!("{method}: the paused call was never ended"));
        assert_eq!(status, "4", "{method}: DEADLINE_EXCEEDED, not {status} {message}");
        assert!(message.contains("stalled"), "{method}: {message}");
        // The same part with the body ended there is the client's error.
        let ended = raw_grpc_call(&served.grpc, method, &part, BodyEnd::Ends, wait);
        let (status, message) = ended.unwrap_or_else(|| panic!("{method}: the cut call was never ended"));
        assert_eq!(status, "3", "{method}: INVALID_ARGUMENT, not {status} {message}");
        assert!(
            message.contains("ended in the middle of a message"),
            "{method}: {message}"
        );
    }
    // Connections to the gRPC port that send nothing, or part of HTTP/2's preface, are closed.
    for sent in [&b""[..], b"PRI * HTTP/2.0\r\n"] {
        let mut silent = std::net::TcpStream::connect(&served.grpc).expect("a connection");
        silent.write_all(sent).expect("the bytes");
        silent.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut answer = Vec::new();
        let closed = silent.read_to_end(&mut answer);
        assert!(
            closed.is_ok(),
            "a gRPC connection that sent {sent:?} was not closed: {closed:?}"
        );
    }
    let between_messages = raw_grpc_call(
        &served.grpc,
        "ModelStreamInfer",
        &[],
        BodyEnd::StaysOpen,
        Duration::from_secs(1),
    );
    assert_eq!(between_messages, None, "a stream pausing between messages was ended");
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

/// Adds to `root` a model `name` whose initializer never ends: `func_util` with one byte of
/// `__init` changed into a branch back to its start.
fn add_endless_initializer(root: &Path, name: &str) {
    add_model(root, name, "function = \"status\"\n");
    let mut module = std::fs::read(models().join("../vm/func_util.vmfb")).expect("the fixture");
    assert_eq!(module[2368], 0x01, "the byte the damage is known for");
    module[2368] = 0x60;
    std::fs::write(root.join(name).join("model.vmfb"), module).expect("the damaged module");
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

/// Sends `SIGTERM` to `served` while `load`, a repository load request, cannot end by itself:
/// the server must end within 20 s, answering the load `CANCELLED`; returns that answer.
fn stop_during_load(mut served: Served, load: std::thread::JoinHandle<(u16, Value)>) -> String {
    served.terminate();
    let status = served.exit_within(Duration::from_secs(20));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the server ends within 20 s of SIGTERM"
    );
    let (code, answer) = load.join().expect("the load's answer");
    assert_eq!(code, 500, "{answer}");
    let error = answer["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("CANCELLED"), "{answer}");
    error
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
