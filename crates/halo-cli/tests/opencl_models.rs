//! `halo run-module --device=opencl` on every model fixture compiled for Vulkan
//! (`fixtures/models/vulkan`): the programs' SPIR-V translated to OpenCL C and run on the first
//! OpenCL device (PoCL in CI), against IREE's CPU output for the same case. Without an OpenCL
//! device it says that it skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

fn vulkan_modules() -> PathBuf {
    fixtures().join("vulkan")
}

fn opencl_device_present() -> bool {
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
        .arg("devices")
        .output()
        .unwrap();
    output.status.success() && String::from_utf8_lossy(&output.stdout).contains("opencl://")
}

/// Programs whose kernels use what the translator refuses today: each of their cases must fail
/// with `UNIMPLEMENTED` naming it (never a wrong answer), and an entry whose cases pass fails the
/// test, so the list stays true.
const NOT_YET: &[(&str, &str)] = &[
    ("float16", "f16 arithmetic on a device without cl_khr_fp16"),
    ("mlp", "vectors of booleans (OpIsNan on a vector)"),
    ("onnx_mlp", "vectors of booleans (OpFUnordGreaterThan on a vector)"),
];

#[test]
fn every_vulkan_model_fixture_runs_on_opencl() {
    if !opencl_device_present() {
        println!("SKIPPED every_vulkan_model_fixture_runs_on_opencl: no OpenCL device");
        return;
    }
    let cases: Vec<PathBuf> = common::cases(&fixtures())
        .into_iter()
        .filter(|flags| common::case_module(&vulkan_modules(), flags).exists())
        .collect();
    assert!(cases.len() >= 100, "only {} Vulkan model cases found", cases.len());
    let mut failures = Vec::new();
    let mut refused = 0;
    for flags in &cases {
        let name = flags.file_stem().unwrap().to_string_lossy().to_string();
        let module = name.split('.').next().unwrap();
        let failure = common::check_case_in(
            &fixtures(),
            &vulkan_modules(),
            flags,
            &["--device=opencl"],
            &[],
            common::close_enough,
        );
        match (NOT_YET.iter().find(|(m, _)| *m == module), failure) {
            (None, None) => {}
            (None, Some(failure)) => failures.push(failure),
            (Some(_), Some(failure)) if failure.contains("UNIMPLEMENTED") => refused += 1,
            (Some((_, reason)), Some(failure)) => {
                failures.push(format!("{name} should be refused ({reason}) but: {failure}"))
            }
            (Some((_, reason)), None) => failures.push(format!(
                "{name} passes but NOT_YET lists {module} ({reason}); remove the entry"
            )),
        }
    }
    println!(
        "{} of {} Vulkan model cases ran on OpenCL; {refused} refused as NOT_YET lists",
        cases.len() - refused,
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed on opencl:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}
