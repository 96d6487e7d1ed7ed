//! The benchmark model set at test scale (fixtures/benchmark-models): halo's answers are
//! onnxruntime's, on both CPU drivers and on the Tenstorrent mock device.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

const MODELS: [&str; 12] = [
    "resnet50",
    "resnext50",
    "efficientnet_b0",
    "mobilenet_v3",
    "inception",
    "vit",
    "mobilenet_v2",
    "squeezenet",
    "shufflenet_v2",
    "densenet121",
    "encoder",
    "mlp",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/benchmark-models")
}

/// `halo run-module` on `vmfb` with `model`'s inputs, compared with `expected`'s arrays.
fn run_against(device: &str, vmfb: &Path, model: &str, expected: &str) -> Output {
    let dir = fixtures();
    common::halo_command()
        .arg("run-module")
        .arg(format!("--device={device}"))
        .arg(format!("--module={}", common::host_module(vmfb).display()))
        .arg(format!("--function={model}"))
        .arg(format!("--input=@{}", dir.join(format!("{model}.input.npy")).display()))
        .arg(format!(
            "--expected_output=@{}",
            dir.join(format!("{expected}.expected.npy")).display()
        ))
        .output()
        .expect("running halo")
}

#[test]
fn every_model_gives_onnxruntimes_answers_on_both_cpu_drivers_and_the_tenstorrent_mock() {
    for device in ["local-task", "local-sync", "tenstorrent://mock"] {
        for model in MODELS {
            let output = run_against(device, &fixtures().join(format!("{model}.vmfb")), model, model);
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success() && stdout.contains("[SUCCESS]"),
                "{model} on {device}: {stdout}{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

#[test]
fn another_models_answers_are_reported_as_a_mismatch() {
    let output = run_against(
        "local-task",
        &fixtures().join("squeezenet.vmfb"),
        "squeezenet",
        "resnet50",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("[FAILED] result[0]: element at index"), "{stdout}");
}
