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
    if !common::device_present("metal") {
        println!("SKIPPED {test}: no Metal device (the emulated one needs clang)");
        return;
    }
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
                &["--device=metal://emulated"],
                &[],
                common::close_enough,
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed on metal://emulated:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}
