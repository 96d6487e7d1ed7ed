//! Answers over HTTP: inference equal to `run-module`'s results in JSON and binary form, every malformed request answered `400` naming the problem, metrics, body limits and compression.

use super::*;

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
    // On a connection of its own, so that nothing here depends on how the 400s left theirs.
    let mut response = ureq::get(&format!("{}/metrics", served.base))
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

/// A request for a model the server does not have is answered only after its body has arrived,
/// so the kept-alive connection it came on serves the next request; before, the refusal went out
/// first and the late body was read as the connection's next request.
#[test]
fn a_request_for_no_model_leaves_its_kept_alive_connection_serving() {
    use std::io::Write;
    let served = Served::start("tiny_add.vmfb", "tiny_add", &[]);
    let address = served.base.trim_start_matches("http://");
    let body = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
    ]})
    .to_string();
    let head = |model: &str| {
        format!(
            "POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
    };
    let mut stream = std::net::TcpStream::connect(address).expect("a connection");
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The head first and the body a moment later, as a slow client sends them.
    stream.write_all(head("made-up").as_bytes()).expect("the head");
    std::thread::sleep(Duration::from_millis(300));
    stream.write_all(body.as_bytes()).expect("the body");
    let statuses = read_responses(&mut stream, 1);
    assert_eq!(statuses, [400], "the refusal");
    stream.write_all(head("tiny_add").as_bytes()).expect("the second head");
    stream.write_all(body.as_bytes()).expect("the second body");
    assert_eq!(
        read_responses(&mut stream, 1),
        [200],
        "the same connection's next request"
    );
}

/// The statuses of the next `count` responses on `stream` (fewer when it closes first), each
/// read through its `Content-Length` body.
fn read_responses(stream: &mut std::net::TcpStream, count: usize) -> Vec<u16> {
    use std::io::Read;
    let mut statuses = Vec::new();
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    while statuses.len() < count {
        let text = String::from_utf8_lossy(&buffer).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = &text[..end];
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buffer.len() >= end + 4 + length {
                let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                statuses.push(status);
                buffer.drain(..end + 4 + length);
                continue;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
    statuses
}
