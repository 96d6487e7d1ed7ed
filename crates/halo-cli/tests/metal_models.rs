//! `halo run-module --device=metal://emulated` on every model fixture compiled for Metal
//! (`fixtures/models/metal`, by `scripts/generate-metal-model-fixtures`): IREE's MSL compiled for
//! the host and run on host threads, against IREE's CPU output for the same case (numbers within
//! 1e-5 relative: the MSL's math and its order of sums are not the CPU kernels'). Without clang
//! it says that it skipped.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

fn metal_modules() -> PathBuf {
    fixtures().join("metal")
}

#[test]
fn every_metal_model_fixture_runs_on_the_emulated_metal_device() {
    let test = "every_metal_model_fixture_runs_on_the_emulated_metal_device";
    if !common::device_listed("metal://emulated") {
        println!("SKIPPED {test}: no emulated Metal device (it needs clang)");
        return;
    }
    check_every_case("metal://emulated");
}

/// The same on the system's GPU (a Mac), against the same CPU outputs.
#[test]
fn every_metal_model_fixture_runs_on_the_metal_gpu() {
    let test = "every_metal_model_fixture_runs_on_the_metal_gpu";
    if !common::device_listed("metal://0") {
        println!("SKIPPED {test}: no Metal GPU (on a Mac only)");
        return;
    }
    check_every_case("metal://0");
}

fn check_every_case(device: &str) {
    let cases: Vec<PathBuf> = common::cases(&fixtures())
        .into_iter()
        .filter(|flags| common::case_module(&metal_modules(), flags).exists())
        .collect();
    assert!(cases.len() >= 90, "only {} Metal model cases found", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| {
            common::check_case_in(
                &fixtures(),
                &metal_modules(),
                flags,
                &[&format!("--device={device}")],
                &[],
                common::close_enough,
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed on {device}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}

/// `halo run-executable` with more threadgroups than the conv fixture's grid: the stray writes
/// are contained and the command ends in an error naming the binding, instead of corrupting
/// memory.
#[test]
fn threadgroups_past_a_metal_kernels_grid_end_in_an_error_naming_the_access() {
    let test = "threadgroups_past_a_metal_kernels_grid_end_in_an_error_naming_the_access";
    if !common::device_present("metal") {
        println!("SKIPPED {test}: no Metal device (the emulated one needs clang)");
        return;
    }
    let executables = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables");
    let flags = std::fs::read_to_string(executables.join("metal-msl-fb/conv2d_f32.basic.flags")).unwrap();
    assert!(flags.contains("--workgroup_count=6,1,1"), "the fixture changed");
    let changed = std::env::temp_dir().join(format!("halo-metal-conv-{}.flags", std::process::id()));
    std::fs::write(
        &changed,
        flags.replace("--workgroup_count=6,1,1", "--workgroup_count=100,1,1"),
    )
    .unwrap();
    let output = common::halo_command()
        .args([
            "run-executable",
            "--device=metal://emulated",
            "--executable_format=metal-msl-fb",
        ])
        .arg(format!(
            "--executable_file={}",
            executables.join("conv2d_f32.metal-msl-fb.fb").display()
        ))
        .arg(format!("--flagfile={}", changed.display()))
        .output()
        .unwrap();
    std::fs::remove_file(&changed).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("OUT_OF_RANGE: an access of 4 bytes")
            && stderr.contains("of binding 2, which holds 576 bytes: outside the dispatch's bindings"),
        "{stderr}"
    );
}
