//! `--trace`: the timeline `run-module` and `benchmark-module` write is valid Chrome trace-event
//! JSON with the runtime's spans, properly nested, in order, and a track per device queue.

mod common;

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

fn models() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/models"))
}

/// This architecture's build of the CNN fixture.
fn cnn() -> String {
    common::host_builds(models()).0.join("cnn.vmfb").display().to_string()
}

/// Runs `halo <command>` on the CNN fixture with `--trace` and returns the trace's events.
fn traced(command: &str, device: &str, extra: &[&str]) -> Vec<Value> {
    traced_module(command, device, &cnn(), extra)
}

fn traced_module(command: &str, device: &str, module: &str, extra: &[&str]) -> Vec<Value> {
    let trace = tempfile_path(&format!("{command}-{}", device.replace(['/', ':', '?', '='], "_")));
    let output = common::halo_command()
        .current_dir(models())
        .arg(command)
        .arg(format!("--module={module}"))
        .args(["--function=cnn", "--input=@cnn.basic.0.npy"])
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

/// Checks every event has the fields trace viewers need and that spans nest on each thread and
/// queue track; returns each span as (name, thread, begin, end, args).
fn spans(events: &[Value]) -> Vec<(String, u64, f64, f64, Value)> {
    let mut open: HashMap<u64, Vec<&Value>> = HashMap::new();
    let mut closed = Vec::new();
    let mut complete: HashMap<u64, Vec<(f64, f64)>> = HashMap::new();
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
            "X" => {
                let end = ts + event["dur"].as_f64().expect("a complete event has a duration");
                complete.entry(thread).or_default().push((ts, end));
                closed.push((name(event).to_string(), thread, ts, end, event["args"].clone()));
            }
            "i" | "I" => {}
            other => panic!("unexpected phase {other} in {event}"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "every span ends: {open:?}");
    for (track, mut slices) in complete {
        slices.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in slices.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "slices on track {track} overlap: {pair:?}");
        }
    }
    closed
}

/// The names of the tracks (threads and queues) by id.
fn track_names(events: &[Value]) -> HashMap<u64, String> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && name(e) == "thread_name")
        .filter_map(|e| Some((e["tid"].as_u64()?, e["args"]["name"].as_str()?.to_string())))
        .collect()
}

/// Checks that `driver`'s queue has a track with command-buffer executions inside the call.
fn check_queue_track(events: &[Value], driver: &str) {
    let spans = spans(events);
    let tracks = track_names(events);
    let call = spans.iter().find(|s| s.0 == "call").expect("a call span");
    let executions: Vec<_> = spans
        .iter()
        .filter(|s| s.0 == "execute" && s.2 >= call.2 && s.2 <= call.3)
        .collect();
    // Vulkan's slice ends when its completion thread learns of it, which may be after the call.
    assert!(
        !executions.is_empty(),
        "a command buffer started executing during the call"
    );
    for execution in &executions {
        let track = tracks.get(&execution.1).map_or("", String::as_str);
        assert!(
            track.starts_with(driver) && track.contains("queue"),
            "executions are on {driver}'s queue track, not '{track}'"
        );
        assert!(
            execution.4["commands"].as_u64().is_some_and(|n| n > 0),
            "{:?}",
            execution.4
        );
    }
    assert!(
        spans.iter().any(|s| s.0 == "allocate" && s.4["size"].is_string()),
        "allocations are traced"
    );
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
    let events = traced("run-module", "local-sync", &[]);
    check_cnn_call(&events);
    check_queue_track(&events, "local-sync");
    // The queue runs each dispatch of local-sync inside the submission, on the caller's thread.
    // Compared with the caller's `queue.execute` span, not the queue track's `execute` slice:
    // the track's clock starts a moment after the trace writer's, so on a loaded machine a
    // dispatch that ends just before its execution can seem to end after it.
    let spans = spans(&events);
    let submission = spans.iter().find(|s| s.0 == "queue.execute").expect("a submission");
    assert!(spans
        .iter()
        .any(|s| s.0 == "dispatch" && s.1 == submission.1 && s.2 >= submission.2 && s.3 <= submission.3));
}

#[test]
fn run_module_traces_a_call_on_vulkan() {
    if !common::vulkan_device_present() {
        println!("skipped: run_module_traces_a_call_on_vulkan: no Vulkan device");
        return;
    }
    let events = traced_module("run-module", "vulkan", "vulkan/cnn.vmfb", &[]);
    check_queue_track(&events, "vulkan");
    let spans = spans(&events);
    assert!(spans.iter().any(|s| s.0 == "queue.execute"), "submissions are traced");
}

#[test]
fn run_module_traces_a_call_on_local_task_across_its_workers() {
    let events = traced("run-module", "local-task", &[]);
    check_cnn_call(&events);
    check_queue_track(&events, "local-task");
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
    let output = common::halo_command()
        .current_dir(models())
        .args([
            "run-module",
            &format!("--module={}", cnn()),
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
