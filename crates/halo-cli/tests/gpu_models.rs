//! `halo run-module --device=cuda` (`hip`) on every model fixture compiled for CUDA (HIP)
//! (`fixtures/models/cuda`, `fixtures/models/hip`), against IREE's CPU output for the same case,
//! or, for the few cases whose kernels round or order differently from the CPU's, against what
//! IREE's own runtime printed on that GPU (`fixtures/models/<driver>/<case>.expected`, see the
//! README there). Without the vendor library or a GPU each test says that it skipped.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// The modules compiled for `driver`'s GPUs.
fn modules(driver: &str) -> PathBuf {
    fixtures().join(driver)
}

#[test]
fn every_cuda_model_fixture_matches_iree_output() {
    check_every_case("every_cuda_model_fixture_matches_iree_output", "cuda", "cuda");
}

#[test]
fn every_cuda_model_fixture_matches_iree_output_with_stream_command_buffers() {
    check_every_case(
        "every_cuda_model_fixture_matches_iree_output_with_stream_command_buffers",
        "cuda",
        "cuda://?command_buffers=stream",
    );
}

#[test]
fn every_hip_model_fixture_matches_iree_output() {
    check_every_case("every_hip_model_fixture_matches_iree_output", "hip", "hip");
}

/// Runs every case of `driver`'s modules on `device` (a driver name or URI).
fn check_every_case(test: &str, driver: &str, device: &str) {
    if !common::device_present(driver) {
        println!("SKIPPED {test}: no {driver} device");
        return;
    }
    let cases: Vec<PathBuf> = common::cases(&fixtures())
        .into_iter()
        .filter(|flags| common::case_module(&modules(driver), flags).exists())
        .collect();
    let device = format!("--device={device}");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| {
            common::check_case_in(&fixtures(), &modules(driver), flags, &[&device], &[], common::same_text)
        })
        .collect();
    assert!(cases.len() >= 100, "only {} {driver} model cases found", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ on {driver}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}

/// `HALO_CUDA_LIBRARY` names the library the `cuda` driver loads: the fake library's device is
/// listed, and a path that does not exist is reported by name.
#[test]
fn halo_cuda_library_names_the_library_to_load() {
    let devices = |library: &std::ffi::OsStr| {
        let output = common::halo_command()
            .arg("devices")
            .env("HALO_CUDA_LIBRARY", library)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
    };
    let fake = std::env::current_exe().unwrap().with_file_name("libhalo_cuda_fake.so");
    let listed = devices(fake.as_os_str());
    assert!(
        listed.contains("halo fake GPU") && listed.contains("CUDA 12.4"),
        "{listed}"
    );
    let missing = devices("/nonexistent/libcuda.so.1".as_ref());
    assert!(
        missing.contains("# cuda: unavailable") && missing.contains("/nonexistent/libcuda.so.1"),
        "{missing}"
    );
}

/// A program missing from `fixtures/models/<driver>` must be listed in its README with the reason.
#[test]
fn every_model_is_compiled_for_each_gpu_or_explained() {
    for driver in ["cuda", "hip"] {
        let readme = std::fs::read_to_string(modules(driver).join("README.md")).unwrap();
        for entry in std::fs::read_dir(fixtures()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "mlir") {
                let name = path.file_stem().unwrap().to_string_lossy().to_string();
                let compiled = modules(driver).join(format!("{name}.vmfb")).exists();
                assert!(
                    compiled || readme.contains(&format!("| {name} | fails")),
                    "{name}.mlir has no {driver} module and fixtures/models/{driver}/README.md does not say why"
                );
            }
        }
    }
}
