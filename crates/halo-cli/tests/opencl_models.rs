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

/// A damaged SPIR-V module that the Vulkan driver's checks refuse is refused on OpenCL too: the
/// translator used to accept it and make a kernel that never ended (found by
/// `scripts/mutate-modules --modules vulkan --drivers vulkan,opencl --seed 1155`: in
/// `async_external`, one byte of a branch's condition id changed so that it names an integer).
#[test]
fn a_spirv_module_the_vulkan_checks_refuse_is_refused_on_opencl() {
    let test = "a_spirv_module_the_vulkan_checks_refuse_is_refused_on_opencl";
    if !common::device_present("opencl") {
        println!("SKIPPED {test}: no OpenCL device");
        return;
    }
    let mut module = std::fs::read(vulkan_modules().join("async_external.vmfb")).unwrap();
    assert_eq!(module[12132], 0x2e, "the byte the damage is known for");
    module[12132] = 0x0e;
    let output = run_on_opencl("damaged-branch", &module, "async_external.two_steps.flags");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("INVALID_ARGUMENT")
            && stderr.contains("OpBranchConditional has a condition that is not a boolean")
            && stderr.contains("checking shader module 0"),
        "{stderr}"
    );
}

/// A binding whose length is not a whole number of elements (a damaged program's) keeps its
/// accesses aligned: the last element that fits started at a misaligned byte, and PoCL's aligned
/// vector loads faulted there, killing the process (found by `bytecode_sweep --device opencl
/// --modules vulkan --values 4 --seed 1161`: in `mlp`'s Vulkan build, byte 4733 makes a dispatch's
/// 128-byte binding 46 bytes long).
#[test]
fn a_binding_of_a_partial_element_does_not_crash_an_opencl_kernel() {
    let test = "a_binding_of_a_partial_element_does_not_crash_an_opencl_kernel";
    if !common::device_present("opencl") {
        println!("SKIPPED {test}: no OpenCL device");
        return;
    }
    let mut module = std::fs::read(vulkan_modules().join("mlp.vmfb")).unwrap();
    assert_eq!(module[4733], 0x80, "the byte the damage is known for");
    module[4733] = 0x2e;
    let output = run_on_opencl("partial-element", &module, "mlp.basic.flags");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{:?}: {stderr}", output.status);
}

/// Runs `module` (a damaged program) with the case `flagfile` on `opencl`, killing it after a
/// minute.
fn run_on_opencl(name: &str, module: &[u8], flagfile: &str) -> std::process::Output {
    let path = std::env::temp_dir().join(format!("halo-{}-{name}.vmfb", std::process::id()));
    std::fs::write(&path, module).unwrap();
    let mut child = common::halo_command()
        .current_dir(fixtures())
        .args(["run-module", "--device=opencl"])
        .arg(format!("--flagfile={flagfile}"))
        .arg(format!("--module={}", path.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            std::fs::remove_file(&path).ok();
            panic!("the damaged module '{name}' ran for a minute on OpenCL");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    std::fs::remove_file(&path).ok();
    output
}
