//! `halo run-module` on every VM fixture case, against what `iree-run-module` printed for it.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vm")
}

#[test]
fn every_vm_fixture_matches_iree_run_module() {
    let cases = common::cases(&fixtures());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| {
            // The programs hold no kernels: one build serves every architecture.
            common::check_case_in(&fixtures(), &fixtures(), flags, &[], &[], common::host_comparison())
        })
        .collect();
    assert!(cases.len() >= 270, "only {} VM cases found", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}

#[test]
fn dump_module_lists_tables_and_disassembles() {
    let output = common::halo_command()
        .arg("dump-module")
        .arg(fixtures().join("recursion.vmfb"))
        .output()
        .expect("running halo");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with("@recursion : version 0"), "{text}");
    assert!(
        text.contains("Exported Functions:") && text.contains("fib -> func["),
        "{text}"
    );
    assert!(
        text.contains("    call func[") && text.contains("    return ["),
        "{text}"
    );
    let missing = common::halo_command()
        .args(["dump-module", "/nonexistent.vmfb"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent.vmfb"));
}
