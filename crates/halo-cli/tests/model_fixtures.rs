//! `halo run-module` on every model fixture case (whole programs using the `hal` module), on
//! both CPU devices, against what `iree-run-module` printed for it.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

fn check_all_on(device: &str) {
    let cases = common::cases(&fixtures());
    let flag = format!("--device={device}");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| common::check_case(&fixtures(), flags, &[&flag]))
        .collect();
    assert!(cases.len() >= 120, "only {} model cases found", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ on {device}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}

#[test]
fn every_model_fixture_matches_iree_run_module_on_local_task() {
    check_all_on("local-task");
}

#[test]
fn every_model_fixture_matches_iree_run_module_on_local_sync() {
    check_all_on("local-sync");
}
