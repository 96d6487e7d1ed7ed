//! Runs `halo run-module` on fixture cases (`<module>.<case>.flags` next to `<module>.vmfb`) and
//! compares with what `iree-run-module` printed (`.expected`) or failed with (`.expected-error`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every case in `dir`, sorted.
pub fn cases(dir: &Path) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "flags"))
        .collect();
    cases.sort();
    cases
}

/// Runs one case inside `dir` (flagfiles name inputs relative to it) with `extra` flags;
/// returns a description of the difference, if any.
#[allow(dead_code, reason = "each test binary uses its own subset of these helpers")]
pub fn check_case(dir: &Path, flags: &Path, extra: &[&str]) -> Option<String> {
    check_case_in(dir, dir, flags, extra, &[])
}

/// The module a case runs: `<module>.vmfb` in `modules` for `<module>.<case>.flags`.
pub fn case_module(modules: &Path, flags: &Path) -> PathBuf {
    let name = flags.file_stem().unwrap().to_string_lossy().to_string();
    modules.join(format!("{}.vmfb", name.split('.').next().unwrap()))
}

/// [`check_case`] with the module taken from `modules` and `envs` set for halo.
pub fn check_case_in(
    dir: &Path,
    modules: &Path,
    flags: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> Option<String> {
    let name = flags.file_stem().unwrap().to_string_lossy().to_string();
    let module = case_module(modules, flags);
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
        .current_dir(dir)
        .envs(envs.iter().copied())
        .arg("run-module")
        .arg(format!("--module={}", module.display()))
        .arg(format!("--flagfile={}", flags.display()))
        .args(extra)
        .output()
        .expect("running halo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = flags.with_extension("expected");
    if expected.exists() {
        let want = std::fs::read_to_string(&expected).unwrap();
        let same = output.status.success() && stdout.trim_end() == want.trim_end();
        return (!same).then(|| format!("{name} {extra:?}: got\n{stdout}{stderr}\nwant\n{want}"));
    }
    // "CODE; message": the status code name and a substring of the message.
    let want = std::fs::read_to_string(flags.with_extension("expected-error"))
        .unwrap_or_else(|_| panic!("{name} has neither .expected nor .expected-error"));
    let (code, message) = want.trim_end().split_once("; ").unwrap_or((want.trim_end(), ""));
    let matches =
        !output.status.success() && stderr.contains(code) && stderr.contains(message) && !stderr.contains("panicked");
    (!matches).then(|| {
        format!(
            "{name} {extra:?}: expected error '{want}', got status {} and: {stderr}",
            output.status
        )
    })
}
