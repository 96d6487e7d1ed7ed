//! Files that are not what a user meant to pass: a FIFO (reading it would block until a writer
//! appears), a device that never ends, a shape too large for any memory. Each ends in an error
//! that names the file or the tensor, never a hang or an abort.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// Runs halo with `args`, killing it if it takes longer than a few seconds; returns (status code,
/// stderr).
fn halo(args: &[String]) -> (Option<i32>, String) {
    let mut child = common::halo_command()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("halo {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn tiny_add(inputs: &[&str]) -> Vec<String> {
    let mut args = vec![
        "run-module".to_string(),
        "--device=local-sync".into(),
        format!(
            "--module={}",
            common::host_builds(&models()).0.join("tiny_add.vmfb").display()
        ),
        "--function=tiny_add".into(),
    ];
    args.extend(inputs.iter().map(|input| format!("--input={input}")));
    args
}

#[test]
fn fifos_are_refused_not_waited_on() {
    let fifo = std::env::temp_dir().join(format!("halo-fifo-{}", std::process::id()));
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|status| status.success()) {
        println!("SKIPPED fifos_are_refused_not_waited_on: mkfifo is not available");
        return;
    }
    let path = fifo.display().to_string();
    let cases = [
        vec![
            "run-module".to_string(),
            format!("--module={path}"),
            "--function=f".into(),
        ],
        vec!["run-module".to_string(), format!("--flagfile={path}")],
        vec![
            "run-executable".to_string(),
            format!("--executable_format={}", common::HOST_FORMATS[0]),
            format!("--executable_file={path}"),
        ],
        tiny_add(&[&format!("4xf32=@{path}"), "4xf32=1"]),
        tiny_add(&[&format!("@{path}.npy")]),
    ];
    for args in cases {
        let (code, stderr) = halo(&args);
        assert!(matches!(code, Some(1 | 2)), "{args:?}: {code:?} {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.contains(&path), "{args:?}: {stderr}");
    }
    std::fs::remove_file(&fifo).unwrap();
}

#[test]
fn an_endless_device_is_refused_as_input() {
    let (code, stderr) = halo(&tiny_add(&["4xf32=@/dev/zero", "4xf32=1"]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("'/dev/zero' is not a regular file"), "{stderr}");
}

#[test]
fn a_raw_input_of_the_wrong_size_is_refused_before_it_is_read() {
    let file = std::env::temp_dir().join(format!("halo-raw-{}.bin", std::process::id()));
    std::fs::write(&file, [0u8; 12]).unwrap();
    let (code, stderr) = halo(&tiny_add(&[&format!("4xf32=@{}", file.display()), "4xf32=1"]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("holds 12 bytes but 4xf32 needs 16"), "{stderr}");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn a_tensor_larger_than_memory_is_resource_exhausted() {
    // 10^18 bytes: no machine has them, so the allocation fails however memory is overcommitted.
    let (code, stderr) = halo(&tiny_add(&["1000000x1000000x1000000xi8=0", "4xf32=1"]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("RESOURCE_EXHAUSTED: cannot allocate 1000000000000000000 bytes for tensor"),
        "{stderr}"
    );
}
