//! `halo run-module --device=cuda` on every model fixture compiled for CUDA
//! (`fixtures/models/cuda`), against IREE's CPU output for the same case, or, for the few cases
//! whose PTX kernels round or order differently from the CPU's, against what IREE's own CUDA
//! runtime printed (`fixtures/models/cuda/<case>.expected`, see its README). Without the CUDA
//! driver library or a GPU it says that it skipped.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

fn cuda_modules() -> PathBuf {
    fixtures().join("cuda")
}

#[test]
fn every_cuda_model_fixture_matches_iree_cpu_output() {
    let test = "every_cuda_model_fixture_matches_iree_cpu_output";
    if !common::device_present("cuda") {
        println!("SKIPPED {test}: no CUDA device");
        return;
    }
    let cases: Vec<PathBuf> = common::cases(&fixtures())
        .into_iter()
        .filter(|flags| common::case_module(&cuda_modules(), flags).exists())
        .collect();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| {
            common::check_case_in(
                &fixtures(),
                &cuda_modules(),
                flags,
                &["--device=cuda"],
                &[],
                common::same_text,
            )
        })
        .collect();
    assert!(cases.len() >= 100, "only {} CUDA model cases found", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ on cuda:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}

/// A program missing from `fixtures/models/cuda` must be listed in its README with the reason.
#[test]
fn every_model_is_compiled_for_cuda_or_explained() {
    let readme = std::fs::read_to_string(cuda_modules().join("README.md")).unwrap();
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "mlir") {
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            let compiled = cuda_modules().join(format!("{name}.vmfb")).exists();
            assert!(
                compiled || readme.contains(&format!("| {name} | fails")),
                "{name}.mlir has no CUDA module and fixtures/models/cuda/README.md does not say why"
            );
        }
    }
}
