//! `halo run-module --device=opencl` on every model fixture compiled for Vulkan
//! (`fixtures/models/vulkan`): the programs' SPIR-V translated to OpenCL C and run on the first
//! OpenCL device (PoCL in CI), against IREE's CPU output for the same case (numbers within 1e-5
//! relative: OpenCL's math and the subgroup emulation's order of sums are not the CPU kernels').
//! Without an OpenCL device it says that it skipped.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

fn vulkan_modules() -> PathBuf {
    fixtures().join("vulkan")
}

#[test]
fn every_vulkan_model_fixture_runs_on_opencl() {
    check_every_case("every_vulkan_model_fixture_runs_on_opencl", "--device=opencl");
}

/// The same with device-local memory the host cannot map, as on a discrete GPU: inputs, outputs
/// and the values programs read back all go through copies on the queue.
#[test]
fn every_vulkan_model_fixture_runs_on_opencl_with_unmapped_device_memory() {
    check_every_case(
        "every_vulkan_model_fixture_runs_on_opencl_with_unmapped_device_memory",
        "--device=opencl://?device_local_mappable=false",
    );
}

fn check_every_case(test: &str, device_flag: &str) {
    if !common::device_present("opencl") {
        println!("SKIPPED {test}: no OpenCL device");
        return;
    }
    let cases: Vec<PathBuf> = common::cases(&fixtures())
        .into_iter()
        .filter(|flags| common::case_module(&vulkan_modules(), flags).exists())
        .collect();
    assert!(cases.len() >= 100, "only {} Vulkan model cases found", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| {
            common::check_case_in(
                &fixtures(),
                &vulkan_modules(),
                flags,
                &[device_flag],
                &[],
                common::close_enough,
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed with {device_flag}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}
