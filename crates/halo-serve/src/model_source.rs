//! Models given as ONNX or MLIR instead of a `.vmfb`, compiled at load as `halo compile` does.
//!
//! A user of Triton drops `model.onnx` into a repository folder and serves it; here the same
//! folder serves through the pinned `iree-compile` (found as `halo compile` finds it), with the
//! best flags known for the model's first device (and halo's kernels on the CPU, as `halo compile`
//! does). The program is kept in a cache folder, keyed
//! by everything it depends on, so a restart, a reload or a second replica sharing the folder
//! loads it without compiling again.

use halo_compile::tune::cache::{cpu_description, key, sha256_of_file, user_cache_folder};
use halo_compile::tune::space::SPACE_VERSION;
use halo_compile::{compile, ChipChoice, CompileRequest, FlagSet, KernelUse, ModelFormat, Target, Toolchain};
use halo_hal::{Error, Result, ResultExt};
use halo_runtime::CancelToken;
use std::path::{Path, PathBuf};

/// The environment variable naming the cache folder of compiled models.
pub const CACHE_ENV: &str = "HALO_COMPILE_CACHE";

/// File extensions of the model sources compiled at load.
pub const SOURCE_EXTENSIONS: [&str; 3] = ["onnx", "mlir", "mlirbc"];

/// Whether `path` names a model source rather than a compiled module.
pub fn is_source(path: &Path) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| SOURCE_EXTENSIONS.contains(&extension))
}

/// The module to load for `module`: itself when it is a `.vmfb`, else the program compiled from
/// it for `device`, from the cache when it is there. Cancelling `stop` kills the compiler.
///
/// # Errors
/// The compiler's absence (naming the package to install) and its errors, naming the model;
/// `Cancelled` once `stop` is cancelled.
pub fn compiled(module: &Path, device: &str, stop: &CancelToken) -> Result<PathBuf> {
    if !is_source(module) {
        return Ok(module.to_path_buf());
    }
    compile_cached(module, device, stop)
        .with_context(|| format!("compiling '{}' for device '{device}'", module.display()))
}

fn compile_cached(source: &Path, device: &str, stop: &CancelToken) -> Result<PathBuf> {
    ModelFormat::of_file(source)?;
    let mut target = Target::for_device(device, None)?;
    let choice = target.settle_chip(device);
    match (&choice, choice.note()) {
        (ChipChoice::CompilerDefault { .. }, Some(note)) => tracing::warn!(model = %source.display(), "{note}"),
        (_, Some(note)) => tracing::info!(model = %source.display(), "{note}"),
        (_, None) => {}
    }
    if let Some(caution) = target.caution() {
        tracing::warn!(model = %source.display(), "{caution}");
    }
    let toolchain = Toolchain::locate(None)?;
    let kernels = KernelUse::default_for(&target);
    let cache = cache_root();
    let output = cache.join(format!(
        "{}.vmfb",
        key(&[
            &sha256_of_file(source)?,
            &target.flags().join(" "),
            toolchain.version(),
            &SPACE_VERSION.to_string(),
            &format!("{kernels:?}"),
            &cpu_description(),
        ])
    ));
    if output.is_file() {
        tracing::info!(model = %source.display(), program = %output.display(), "compiled before");
        return Ok(output);
    }
    std::fs::create_dir_all(&cache)
        .map_err(|e| Error::unavailable(format!("cannot make the cache folder '{}': {e}", cache.display())))?;
    let report = compile(
        &toolchain,
        &CompileRequest {
            model: source.to_path_buf(),
            output: output.clone(),
            target,
            flag_set: FlagSet::Best,
            extra_flags: Vec::new(),
            graph_rewrite: None,
            kernels,
            batch_sizes: Vec::new(),
            stop: Some(stop.flag()),
        },
    )?;
    tracing::info!(
        model = %source.display(),
        program = %output.display(),
        flag_set = report.flag_set.name(),
        seconds = report.compile_time.as_secs_f64(),
        "compiled"
    );
    Ok(output)
}

/// `HALO_COMPILE_CACHE`, else `halo/compiled` in the user's cache folder, else in the temporary
/// folder.
fn cache_root() -> PathBuf {
    user_cache_folder(CACHE_ENV, "compiled").unwrap_or_else(|| std::env::temp_dir().join("halo-compiled"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_and_mlir_files_are_sources_and_modules_are_not() {
        for source in ["m.onnx", "dir/m.mlir", "m.mlirbc"] {
            assert!(is_source(Path::new(source)), "{source}");
        }
        for module in ["m.vmfb", "m", "m.onnx.vmfb"] {
            assert!(!is_source(Path::new(module)), "{module}");
            let stop = CancelToken::new();
            assert_eq!(
                compiled(Path::new(module), "local-task", &stop).unwrap(),
                Path::new(module)
            );
        }
    }
}
