//! Batching servers: concurrent clients answered as a call each would be, the trace of which requests each call answered, and `max_batch_size` from a repository.

use super::*;

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
