//! `halo._halo.compile`: `halo compile`'s library from Python (`halo.compile_onnx` and
//! `halo.compile_mlir` wrap it).

use crate::errors::IntoPyResult;
use halo_compile::{CompileRequest, FlagSet, Target, Toolchain};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Compiles `model` (`.onnx`, `.mlir`, `.mlirbc`) into `output` for `device` with the pinned
/// `iree-compile` (`iree_compile`, else `HALO_IREE_COMPILE`, else `PATH`), trying the flag sets
/// best first as `halo compile` does; returns what was done as a dict.
#[pyfunction]
#[pyo3(signature = (model, output, device = "local-task", target_chip = None, flag_set = "best", extra_flags = Vec::new(), iree_compile = None))]
#[allow(clippy::too_many_arguments, reason = "keyword arguments of one Python function")]
pub fn compile<'py>(
    py: Python<'py>,
    model: PathBuf,
    output: PathBuf,
    device: &str,
    target_chip: Option<&str>,
    flag_set: &str,
    extra_flags: Vec<String>,
    iree_compile: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let request = CompileRequest {
        model,
        output,
        target: Target::for_device(device, target_chip).py()?,
        flag_set: FlagSet::from_name(flag_set).py()?,
        extra_flags,
    };
    let report = py
        .detach(|| {
            let toolchain = Toolchain::locate(iree_compile.as_deref())?;
            halo_compile::compile(&toolchain, &request)
        })
        .py()?;
    let summary = PyDict::new(py);
    summary.set_item("output", report.output)?;
    summary.set_item("flag_set", report.flag_set.name())?;
    summary.set_item("flags", report.flags)?;
    let rejected: Vec<(&str, String)> = report
        .rejected
        .into_iter()
        .map(|r| (r.flag_set.name(), r.first_error))
        .collect();
    summary.set_item("rejected", rejected)?;
    summary.set_item("compiler_version", report.compiler_version)?;
    summary.set_item("compile_seconds", report.compile_time.as_secs_f64())?;
    Ok(summary)
}
