//! `halo run-module` on every VM fixture case, against what `iree-run-module` printed for it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vm")
}

fn run(module: &Path, flags: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_halo"))
        .arg("run-module")
        .arg(format!("--module={}", module.display()))
        .arg(format!("--flagfile={}", flags.display()))
        .output()
        .expect("running halo")
}

#[test]
fn every_vm_fixture_matches_iree_run_module() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "flags"))
        .collect();
    cases.sort();
    let mut checked = 0;
    let mut failures = Vec::new();
    for flags in &cases {
        let name = flags.file_stem().unwrap().to_string_lossy().to_string();
        let module = fixtures().join(format!("{}.vmfb", name.split('.').next().unwrap()));
        let expected = flags.with_extension("expected");
        let expected_error = flags.with_extension("expected-error");
        let output = run(&module, flags);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if expected.exists() {
            let want = std::fs::read_to_string(&expected).unwrap();
            if !output.status.success() || stdout.trim_end() != want.trim_end() {
                failures.push(format!("{name}: got\n{stdout}{stderr}\nwant\n{want}"));
            }
        } else if expected_error.exists() {
            // "CODE; message": the status code name and a substring of the message.
            let want = std::fs::read_to_string(&expected_error).unwrap();
            let (code, message) = want.trim_end().split_once("; ").unwrap_or((want.trim_end(), ""));
            if output.status.success()
                || !stderr.contains(code)
                || !stderr.contains(message)
                || stderr.contains("panicked")
            {
                failures.push(format!(
                    "{name}: expected error '{want}', got status {} and: {stderr}",
                    output.status
                ));
            }
        } else {
            continue;
        }
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} VM cases found");
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
}

#[test]
fn dump_module_lists_tables_and_disassembles() {
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
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
    let missing = Command::new(env!("CARGO_BIN_EXE_halo"))
        .args(["dump-module", "/nonexistent.vmfb"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent.vmfb"));
}
