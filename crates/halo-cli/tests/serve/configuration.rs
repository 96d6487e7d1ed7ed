//! How a model is configured: loading failures naming the model, the function served, types for undeclared functions, class labels and warm-up.

use super::*;

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
