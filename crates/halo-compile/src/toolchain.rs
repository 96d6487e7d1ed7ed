//! Finding the IREE tools and checking that the compiler is the release halo runs the output of.

use halo_hal::{Error, Result};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `iree-compile` release whose output halo runs (major.minor; any patch or release candidate).
pub const PINNED_COMPILER_VERSION: &str = "3.13";

/// The pip requirement that installs the pinned compiler and `iree-import-onnx`.
pub const COMPILER_PACKAGE: &str = "iree-base-compiler==3.13.0";

/// The environment variable naming the `iree-compile` to use when no flag does.
pub const COMPILER_ENV: &str = "HALO_IREE_COMPILE";

/// The IREE tools one compile uses: `iree-compile` and, for ONNX models, `iree-import-onnx`.
#[derive(Debug, Clone)]
pub struct Toolchain {
    compiler: PathBuf,
    version: String,
}

/// Where the compiler was asked for, so an error can say which setting to fix.
#[derive(Debug, Clone, Copy)]
enum Source {
    Flag,
    Env,
    Path,
}

impl Source {
    fn describe(self) -> &'static str {
        match self {
            Source::Flag => "given by --iree-compile",
            Source::Env => "named by HALO_IREE_COMPILE",
            Source::Path => "found on PATH",
        }
    }
}

impl Toolchain {
    /// Finds `iree-compile`: `explicit` (the `--iree-compile` flag), then `HALO_IREE_COMPILE`, then
    /// `PATH`; then checks its version.
    ///
    /// # Errors
    /// `Unavailable` naming the pip package when no compiler is found; `NotFound` when the flag
    /// or the variable names a file that does not exist; `Incompatible` for another release.
    pub fn locate(explicit: Option<&Path>) -> Result<Toolchain> {
        let env = std::env::var_os(COMPILER_ENV);
        let path = std::env::var_os("PATH");
        Self::locate_in(explicit, env.as_deref(), path.as_deref())
    }

    /// [`Toolchain::locate`] with the environment given, so callers and tests need not change it.
    pub fn locate_in(explicit: Option<&Path>, env: Option<&OsStr>, path: Option<&OsStr>) -> Result<Toolchain> {
        let (compiler, source) = if let Some(explicit) = explicit {
            (explicit.to_path_buf(), Source::Flag)
        } else if let Some(env) = env.filter(|value| !value.is_empty()) {
            (PathBuf::from(env), Source::Env)
        } else {
            let found = path.and_then(|path| find_executable("iree-compile", path));
            (found.ok_or_else(missing_compiler)?, Source::Path)
        };
        if !compiler.is_file() {
            return Err(Error::not_found(format!(
                "iree-compile '{}' ({}) is not a file; install the compiler with `pip install {COMPILER_PACKAGE}`",
                compiler.display(),
                source.describe()
            )));
        }
        let version = compiler_version(&compiler).map_err(|error| {
            error.context(format!(
                "checking iree-compile '{}' ({})",
                compiler.display(),
                source.describe()
            ))
        })?;
        Ok(Toolchain { compiler, version })
    }

    /// The `iree-compile` executable.
    pub fn compiler(&self) -> &Path {
        &self.compiler
    }

    /// The compiler's version as it prints it (e.g. `3.13.0`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The ONNX importer: the `iree-import-onnx` next to the compiler (one pip package installs
    /// both), else the one on `PATH`.
    ///
    /// # Errors
    /// `Unavailable` naming the pip package when there is none.
    pub fn onnx_importer(&self) -> Result<PathBuf> {
        let sibling = self.compiler.with_file_name("iree-import-onnx");
        if is_executable(&sibling) {
            return Ok(sibling);
        }
        std::env::var_os("PATH")
            .and_then(|path| find_executable("iree-import-onnx", &path))
            .ok_or_else(|| {
                Error::unavailable(format!(
                    "iree-import-onnx is neither next to '{}' nor on PATH; it comes with `pip install {COMPILER_PACKAGE} onnx`",
                    self.compiler.display()
                ))
            })
    }
}

fn missing_compiler() -> Error {
    Error::unavailable(format!(
        "iree-compile was not found (no --iree-compile flag, no {COMPILER_ENV}, not on PATH); \
         install it with `pip install {COMPILER_PACKAGE}` (in a virtualenv, then activate it)"
    ))
}

/// Runs `iree-compile --version` and checks the release.
fn compiler_version(compiler: &Path) -> Result<String> {
    let output = Command::new(compiler)
        .arg("--version")
        .output()
        .map_err(|error| Error::unavailable(format!("cannot run it: {error}")))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("IREE compiler version "))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| {
            Error::invalid_argument(format!(
                "`--version` printed no 'IREE compiler version' line (exit {}); is it iree-compile?",
                output.status
            ))
        })?;
    if !is_pinned_release(version) {
        return Err(Error::incompatible(format!(
            "it is IREE compiler {version}, but halo runs what {PINNED_COMPILER_VERSION} produces; \
             install that one with `pip install {COMPILER_PACKAGE}`"
        )));
    }
    Ok(version.to_string())
}

/// True for `3.13.0`, `3.13.1`, `3.13.0rc20261016`; false for `3.1.0` or `3.130.0`.
fn is_pinned_release(version: &str) -> bool {
    version
        .strip_prefix(PINNED_COMPILER_VERSION)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

fn find_executable(name: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pinned_release_is_accepted() {
        for good in ["3.13", "3.13.0", "3.13.1", "3.13.0rc20261016"] {
            assert!(is_pinned_release(good), "{good}");
        }
        for bad in ["3.1.0", "3.130.0", "3.12.0", "4.13.0", ""] {
            assert!(!is_pinned_release(bad), "{bad}");
        }
    }

    #[test]
    fn a_missing_compiler_names_the_pip_package() {
        let empty = tempfile::tempdir().unwrap();
        let error = Toolchain::locate_in(None, None, Some(empty.path().as_os_str())).unwrap_err();
        assert!(error.is_unavailable(), "{error}");
        assert!(error.to_string().contains(COMPILER_PACKAGE), "{error}");
    }

    #[test]
    fn a_flag_or_variable_naming_nothing_says_which_setting_is_wrong() {
        let missing = Path::new("/nonexistent/iree-compile");
        let error = Toolchain::locate_in(Some(missing), None, None).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::NotFound);
        assert!(error.to_string().contains("--iree-compile"), "{error}");
        let error = Toolchain::locate_in(None, Some(missing.as_os_str()), None).unwrap_err();
        assert!(error.to_string().contains("HALO_IREE_COMPILE"), "{error}");
    }
}
