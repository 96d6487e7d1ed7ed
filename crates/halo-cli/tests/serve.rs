//! `halo serve` answers the Open Inference Protocol's HTTP/REST calls: health, metadata and JSON
//! inference equal to `run-module`'s results, and every malformed request with `400` and a
//! message, after which the server still answers.

use halo_hal::HostTensor;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// A `halo serve` process on a free port, stopped when dropped.
struct Served {
    child: Child,
    base: String,
    agent: ureq::Agent,
}

impl Served {
    fn start(module: &str, function: &str, extra: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_halo"))
            .current_dir(models())
            .args(["serve", "--http-port=0"])
            .arg(format!("--module={module}"))
            .arg(format!("--function={function}"))
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .expect("halo serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut line = String::new();
        BufReader::new(stderr).read_line(&mut line).expect("a first line");
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("the server says where it listens: {line}"));
        let base = url.split("/v2").next().unwrap_or(url).to_string();
        // Error answers are read like any other: their bodies carry the messages under test.
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        Served { child, base, agent }
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
    let status = Command::new(env!("CARGO_BIN_EXE_halo"))
        .current_dir(models())
        .args([
            "run-module",
            &format!("--module={module}"),
            &format!("--function={function}"),
        ])
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
fn scalar_and_integer_inputs_answer_as_run_module_does() {
    let splat = Served::start("shape_ops.vmfb", "splat", &[]);
    let body = json!({"inputs": [{"name": "input0", "shape": [], "datatype": "FP32", "data": [3.25]}]});
    let (status, response) = splat.post("/v2/models/shape_ops/infer", &body.to_string());
    assert_eq!(status, 200, "{response}");
    let expected = run_module_results("shape_ops.vmfb", "splat", &["3.25"], 1);
    assert_eq!(response["outputs"][0]["shape"], json!(expected[0].shape));
    assert_eq!(json_f32(&response["outputs"][0]["data"]), f32_data(&expected[0]));

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

#[test]
fn a_body_over_the_limit_is_refused() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--max-request-bytes=64"]);
    let body = json!({"inputs": [{"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]});
    assert_eq!(served.post("/v2/models/tiny_add/infer", &body.to_string()).0, 413);
}

#[test]
fn a_model_that_cannot_load_stops_the_server_with_its_name() {
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
        .current_dir(models())
        .args(["serve", "--http-port=0", "--module=tiny_add.vmfb", "--function=missing"])
        .output()
        .expect("halo runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("model 'tiny_add'") && stderr.contains("missing"),
        "{stderr}"
    );
}
