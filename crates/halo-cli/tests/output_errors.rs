//! Standard output that cannot be written: a reader that went away ends the command quietly, a
//! full disk is an error message; neither panics.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables")
}

/// `halo run-executable` printing a 300,000-element binding (600 kB, more than a pipe holds).
fn large_output() -> Command {
    let format = common::HOST_FORMATS[0];
    let mut command = common::halo_command();
    command.args([
        "run-executable".to_string(),
        "--device=local-sync".into(),
        format!("--executable_format={format}"),
        format!(
            "--executable_file={}",
            fixtures().join(format!("grid3d.{format}.so")).display()
        ),
        "--entry_point=0".into(),
        "--workgroup_count=1,1,1".into(),
        "--binding=300000xi32".into(),
        "--output_max_element_count=1000000".into(),
    ]);
    command
}

#[test]
fn a_reader_that_closes_the_pipe_ends_the_command_quietly() {
    let mut child = large_output()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closing the read end at once: whatever halo writes beyond the pipe's buffer fails.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "status {}: {stderr}", output.status);
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn a_full_disk_is_an_error_message() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        println!("SKIPPED a_full_disk_is_an_error_message: no /dev/full on this machine");
        return;
    };
    for mut command in [large_output(), {
        let mut drivers = common::halo_command();
        drivers.arg("drivers");
        drivers
    }] {
        let output = command.stdout(full.try_clone().unwrap()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("RESOURCE_EXHAUSTED: writing standard output") && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
}
