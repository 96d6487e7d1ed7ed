//! `--trace`: the timeline `run-module` and `benchmark-module` write is valid Chrome trace-event
//! JSON with the runtime's spans, properly nested, in order.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn models() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/models"))
}

/// Runs `halo <command>` on the CNN fixture with `--trace` and returns the trace's events.
fn traced(command: &str, device: &str, extra: &[&str]) -> Vec<Value> {
    let trace = tempfile_path(&format!("{command}-{device}"));
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
        .current_dir(models())
        .args([
            command,
            "--module=cnn.vmfb",
            "--function=cnn",
            "--input=@cnn.basic.0.npy",
        ])
        .arg(format!("--device={device}"))
        .arg(format!("--trace={}", trace.display()))
        .args(extra)
        .output()
        .expect("halo runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = std::fs::read_to_string(&trace).expect("the trace was written");
    std::fs::remove_file(&trace).ok();
    match serde_json::from_str(&text).expect("the trace is JSON") {
        Value::Array(events) => events,
        other => panic!("a trace is an array of events, not {other}"),
    }
}

fn tempfile_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("halo-trace-test-{}-{name}.json", std::process::id()))
}

fn name(event: &Value) -> &str {
    event["name"].as_str().unwrap_or("")
}

/// Checks every event has the fields trace viewers need and that spans nest on each thread;
/// returns each span as (name, thread, begin, end, args).
fn spans(events: &[Value]) -> Vec<(String, u64, f64, f64, Value)> {
    let mut open: HashMap<u64, Vec<&Value>> = HashMap::new();
    let mut closed = Vec::new();
    for event in events {
        let phase = event["ph"].as_str().expect("every event has a phase");
        if phase == "M" {
            continue;
        }
        let thread = event["tid"].as_u64().expect("every event has a thread");
        let ts = event["ts"].as_f64().expect("every event has a time");
        assert!(event["pid"].is_u64(), "{event}");
        match phase {
            "B" => open.entry(thread).or_default().push(event),
            "E" => {
                let begin = open.get_mut(&thread).and_then(Vec::pop).expect("an end has a begin");
                assert_eq!(name(begin), name(event), "spans nest on thread {thread}");
                let start = begin["ts"].as_f64().unwrap_or(f64::NAN);
                assert!(start <= ts, "a span ends after it begins");
                closed.push((name(event).to_string(), thread, start, ts, begin["args"].clone()));
            }
            "i" | "I" => {}
            other => panic!("unexpected phase {other} in {event}"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "every span ends: {open:?}");
    closed
}

fn check_cnn_call(events: &[Value]) {
    let spans = spans(events);
    let calls: Vec<_> = spans.iter().filter(|s| s.0 == "call").collect();
    assert!(!calls.is_empty(), "a call span");
    let (_, caller, call_start, call_end, args) = calls[0];
    assert_eq!(args["function"], "\"cnn\"");
    let dispatches: Vec<_> = spans.iter().filter(|s| s.0 == "dispatch").collect();
    assert!(!dispatches.is_empty(), "dispatch spans");
    for dispatch in &dispatches {
        let export = dispatch.4["export"].as_str().unwrap_or("");
        assert!(export.starts_with("\"cnn_dispatch_"), "{export}");
        assert!(dispatch.4["workgroup_count"].is_string());
    }
    let first = dispatches
        .iter()
        .find(|d| d.2 >= *call_start)
        .expect("a dispatch in the call");
    assert!(first.3 <= *call_end, "the call ends after its first dispatch");
    let imports: Vec<_> = spans
        .iter()
        .filter(|s| s.0 == "vm.import" && s.1 == *caller && s.2 >= *call_start && s.3 <= *call_end)
        .map(|s| s.4["name"].as_str().unwrap_or("").to_string())
        .collect();
    // The program records its command buffer once, at initialization, and submits it per call.
    assert!(
        imports.iter().any(|n| n == "\"hal.device.queue.execute.indirect\""),
        "{imports:?}"
    );
    assert!(imports.iter().any(|n| n == "\"hal.fence.await\""), "{imports:?}");
    assert!(spans
        .iter()
        .any(|s| s.0 == "vm.import" && s.4["name"] == "\"hal.command_buffer.dispatch\"" && s.3 <= *call_start));
    assert!(spans.iter().any(|s| s.0 == "queue.execute" && s.1 == *caller));
    assert!(events
        .iter()
        .any(|e| name(e) == "semaphore.signal" && e["args"]["value"].is_string()));
}

#[test]
fn run_module_traces_a_call_on_local_sync() {
    check_cnn_call(&traced("run-module", "local-sync", &[]));
}

#[test]
fn run_module_traces_a_call_on_local_task_across_its_workers() {
    let events = traced("run-module", "local-task", &[]);
    check_cnn_call(&events);
    let threads: std::collections::HashSet<_> = events
        .iter()
        .filter(|e| e["ph"] == "M" && name(e) == "thread_name")
        .filter_map(|e| e["tid"].as_u64())
        .collect();
    assert!(
        threads.len() >= 2,
        "the caller and the workers have tracks: {threads:?}"
    );
}

#[test]
fn benchmark_module_traces_every_call() {
    let events = traced("benchmark-module", "local-task", &["--benchmark_min_time=5x"]);
    let calls = spans(&events).iter().filter(|s| s.0 == "call").count();
    assert!(calls >= 6, "the untimed call and five timed ones: {calls}");
}

#[test]
fn an_unwritable_trace_file_is_named() {
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
        .current_dir(models())
        .args([
            "run-module",
            "--module=cnn.vmfb",
            "--function=cnn",
            "--input=@cnn.basic.0.npy",
        ])
        .arg("--trace=/nonexistent-dir/trace.json")
        .output()
        .expect("halo runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent-dir/trace.json"), "{stderr}");
}
