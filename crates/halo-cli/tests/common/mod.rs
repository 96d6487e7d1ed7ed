//! Runs `halo run-module` on fixture cases (`<module>.<case>.flags` next to `<module>.vmfb`) and
//! compares with what `iree-run-module` printed (`.expected`) or failed with (`.expected-error`).
#![allow(dead_code, reason = "each test binary uses its own subset of these helpers")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `halo` as the tests start it: through the command in `HALO_TEST_RUNNER` where that is set (an
/// emulator for a cross build, such as `qemu-aarch64 -L /usr/aarch64-linux-gnu`, which
/// `scripts/test-arm64` sets), else directly.
pub fn halo_command() -> Command {
    let halo = env!("CARGO_BIN_EXE_halo");
    let runner = std::env::var("HALO_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(halo);
            command
        }
        None => Command::new(halo),
    }
}

/// This architecture's CPU executable formats: embedded ELF, then system ELF.
pub const HOST_FORMATS: [&str; 2] = if cfg!(target_arch = "aarch64") {
    ["embedded-elf-arm_64", "system-elf-arm_64"]
} else {
    ["embedded-elf-x86_64", "system-elf-x86_64"]
};

/// This architecture's builds of a fixture set's programs, in `dir` (x86-64) or its `arm_64/`
/// (AArch64), and how their printed outputs are compared ([`host_comparison`]).
pub fn host_builds(dir: &Path) -> (PathBuf, fn(&str, &str) -> bool) {
    let builds = if cfg!(target_arch = "aarch64") {
        dir.join("arm_64")
    } else {
        dir.to_path_buf()
    };
    (builds, host_comparison())
}

/// This architecture's build of the fixture module at `path`: `DIR/X.vmfb` becomes
/// `DIR/arm_64/X.vmfb` on AArch64 where that build exists (the model and benchmark-model
/// fixtures); any other path, and every path on x86-64, is unchanged.
pub fn host_module(path: &Path) -> PathBuf {
    let arm = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => dir.join("arm_64").join(name),
        _ => return path.to_path_buf(),
    };
    if cfg!(target_arch = "aarch64") && arm.exists() {
        arm
    } else {
        path.to_path_buf()
    }
}

/// A command-line argument with the module of `--module=PATH` (PATH relative to `dir`, or
/// absolute) replaced by this architecture's build ([`host_module`]).
pub fn host_module_arg(dir: &Path, arg: &str) -> String {
    match arg.strip_prefix("--module=") {
        Some(module) => {
            let mapped = host_module(&dir.join(module));
            if mapped == dir.join(module) {
                arg.to_string()
            } else {
                format!("--module={}", mapped.display())
            }
        }
        None => arg.to_string(),
    }
}

/// How this architecture's printed outputs are compared with IREE's x86-64 ones: exactly on
/// x86-64; within [`close_enough`] elsewhere, where other instructions may change the last bits
/// and the CPU's default NaN may have another sign (AArch64's is positive, x86-64's negative).
pub fn host_comparison() -> fn(&str, &str) -> bool {
    if cfg!(target_arch = "x86_64") {
        same_text
    } else {
        close_enough
    }
}

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

/// Printed outputs equal but for trailing whitespace.
pub fn same_text(got: &str, want: &str) -> bool {
    got.trim_end() == want.trim_end()
}

/// The module a case runs: `<module>.vmfb` in `modules` for `<module>.<case>.flags`.
pub fn case_module(modules: &Path, flags: &Path) -> PathBuf {
    let name = flags.file_stem().unwrap().to_string_lossy().to_string();
    modules.join(format!("{}.vmfb", name.split('.').next().unwrap()))
}

/// Runs one case inside `dir` (flagfiles name inputs relative to it) with `extra` flags, the
/// module taken from `modules`, `envs` set for halo, and printed outputs compared by `same`;
/// returns a description of the difference, if any. A `<case>.expected` in `modules` (what
/// IREE's own runtime printed on that device, where its kernels differ from the CPU's) takes the
/// place of the CPU's.
pub fn check_case_in(
    dir: &Path,
    modules: &Path,
    flags: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
    same: fn(&str, &str) -> bool,
) -> Option<String> {
    let name = flags.file_stem().unwrap().to_string_lossy().to_string();
    let module = case_module(modules, flags);
    let output = halo_command()
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
    let device_expected = modules.join(format!("{name}.expected"));
    let expected = if device_expected.exists() {
        device_expected
    } else {
        flags.with_extension("expected")
    };
    if expected.exists() {
        let want = std::fs::read_to_string(&expected).unwrap();
        let matches = output.status.success() && same(&stdout, &want);
        return (!matches).then(|| format!("{name} {extra:?}: got\n{stdout}{stderr}\nwant\n{want}"));
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

/// Whether `halo devices` lists a Vulkan device.
pub fn vulkan_device_present() -> bool {
    device_present("vulkan")
}

/// Whether `halo devices` lists a device of `driver`.
pub fn device_present(driver: &str) -> bool {
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
        .arg("devices")
        .output()
        .expect("running halo devices");
    String::from_utf8_lossy(&output.stdout).contains(&format!("{driver}://"))
}

/// Whether `halo devices` lists the device `uri` (`metal://emulated`) here.
pub fn device_listed(uri: &str) -> bool {
    let output = Command::new(env!("CARGO_BIN_EXE_halo"))
        .arg("devices")
        .output()
        .expect("running halo devices");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .any(|line| line.split('\t').next() == Some(uri))
}

/// Every number in `got` within 1e-5 (relative) or 1e-7 (absolute) of the one in `want` (NaNs
/// match NaNs), the rest of the text equal.
pub fn close_enough(got: &str, want: &str) -> bool {
    let split = |text: &str| -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || c == '[' || c == ']' || c == '=')
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (got, want) = (split(got), split(want));
    got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(g, w)| match (g.parse::<f64>(), w.parse::<f64>()) {
                (Ok(g), Ok(w)) => {
                    g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-7 || (g - w).abs() <= 1e-5 * w.abs()
                }
                _ => g == w,
            })
}
