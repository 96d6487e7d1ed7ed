//! Several traces in one process keep each thread on a track of its own. (Its own test binary:
//! a process holds one trace at a time.)

use halo_runtime::trace::Trace;
use std::path::PathBuf;

fn tids_of(path: &PathBuf, name: &str) -> Vec<u64> {
    let events: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == name && e["ph"] != "M")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect()
}

/// tracing-chrome gives a thread its track id once for the life of the thread: a trace that
/// counted ids from 0 again put a thread new to it on the track of one traced before.
#[test]
fn a_thread_traced_before_and_a_new_thread_get_different_tracks() {
    let dir = std::env::temp_dir().join(format!("halo-trace-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (first, second) = (dir.join("first.json"), dir.join("second.json"));
    let trace = Trace::start(&first).unwrap();
    tracing::info_span!("before").in_scope(|| {});
    trace.finish().unwrap();
    let trace = Trace::start(&second).unwrap();
    tracing::info_span!("caller").in_scope(|| {
        std::thread::spawn(|| tracing::info_span!("worker").in_scope(|| {}))
            .join()
            .unwrap();
    });
    trace.finish().unwrap();
    assert!(!tids_of(&first, "before").is_empty());
    let (caller, worker) = (tids_of(&second, "caller"), tids_of(&second, "worker"));
    assert!(
        !caller.is_empty() && !worker.is_empty(),
        "caller {caller:?}, worker {worker:?}"
    );
    assert!(
        caller.iter().all(|t| !worker.contains(t)),
        "caller and worker share a track: {caller:?} {worker:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
