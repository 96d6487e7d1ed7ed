//! Eight threads share one session and call a program thousands of times each with random
//! inputs, checking every result, on `local-task` and (where present) `vulkan` and `cuda`: no deadlock, no
//! lost wake-up, no leak. Every fiftieth call divides by zero, which the program turns into a
//! failure midway through the call; the calls after it on the same device must still work.

mod common;

use halo_runtime::{tensor, HostTensor, Instance, Session, StatusCode};
use std::path::Path;

const THREADS: u64 = 8;
const CALLS: u64 = 10_000;

fn errors_module(device: &str) -> Option<Session> {
    let mut session = match Session::new(&Instance::new(), &[device]) {
        Ok(session) => session,
        Err(error) if error.is_unavailable() => return None,
        Err(error) => panic!("creating a session on {device}: {error}"),
    };
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
    // GPU devices run the build for their driver (`fixtures/models/<driver>`).
    let module = match device {
        "vulkan" | "cuda" | "hip" => modules.join(device).join("errors.vmfb"),
        _ => common::module("errors.vmfb"),
    };
    session.load_module_file(&module).unwrap();
    Some(session)
}

/// Resident memory of this process, in bytes (Linux), if known.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn f32s(tensor: &HostTensor) -> Vec<f32> {
    tensor
        .bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// One thread's calls: `static_add` on small random integers (exact in f32), and every fiftieth
/// call a division by zero that must fail.
fn hammer(session: &Session, thread: u64) {
    let add = session.function("static_add").unwrap();
    let divide = session.function("checked_div").unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ thread;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 1000) as f32
    };
    for call in 0..CALLS {
        if call % 50 == 49 {
            let inputs = [
                session
                    .tensor_input(&HostTensor::parse("3xf32=3 6 9").unwrap())
                    .unwrap(),
                session.tensor_input(&HostTensor::parse("f32=0").unwrap()).unwrap(),
            ];
            let error = session.call(&divide, &inputs).unwrap_err();
            assert_eq!(error.code(), StatusCode::FailedPrecondition, "{error}");
            continue;
        }
        let (a, b): (Vec<f32>, Vec<f32>) = (0..4).map(|_| (random(), random())).unzip();
        let text = |v: &[f32]| format!("4xf32={}", v.iter().map(f32::to_string).collect::<Vec<_>>().join(" "));
        let inputs = [
            session.tensor_input(&HostTensor::parse(&text(&a)).unwrap()).unwrap(),
            session.tensor_input(&HostTensor::parse(&text(&b)).unwrap()).unwrap(),
        ];
        let outputs = session.call(&add, &inputs).unwrap();
        let sum = tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap();
        let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(f32s(&sum), expected, "thread {thread}, call {call}");
    }
}

/// Held by each device's stress run from start to end: resident memory is the process's, so a
/// run measured while another device starts (lavapipe's start alone adds tens of MiB) would
/// count that growth as its own.
static ONE_DEVICE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn stress(device: &str) {
    let _alone = ONE_DEVICE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let Some(session) = errors_module(device) else {
        println!("SKIPPED stress on {device}: device unavailable");
        return;
    };
    // A first round warms pools and caches, so the growth measured after it would be a leak.
    hammer(&session, 99);
    let before = resident_bytes();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let session = &session;
            scope.spawn(move || hammer(session, thread));
        }
    });
    let after = resident_bytes();
    if let (Some(before), Some(after)) = (before, after) {
        let growth = after.saturating_sub(before);
        println!(
            "{device}: {} calls from {THREADS} threads; resident memory {} -> {} MiB (+{} KiB)",
            THREADS * CALLS,
            before >> 20,
            after >> 20,
            growth >> 10
        );
        // A sanitizer keeps freed memory in quarantine, so resident memory says nothing there.
        if std::env::var_os("HALO_TEST_UNDER_SANITIZER").is_some() {
            println!("{device}: resident memory bound skipped under a sanitizer");
        } else {
            assert!(growth < 64 << 20, "resident memory grew by {growth} bytes on {device}");
        }
    }
}

#[test]
fn eight_threads_share_a_session_on_local_task() {
    stress("local-task");
}

#[test]
fn eight_threads_share_a_session_on_vulkan() {
    stress("vulkan");
}

#[test]
fn eight_threads_share_a_session_on_cuda() {
    stress("cuda");
}
