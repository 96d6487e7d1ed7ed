//! `halo._halo.compile`: `halo compile`'s library from Python (`halo.compile_onnx` and
//! `halo.compile_mlir` wrap it).

use crate::errors::IntoPyResult;
use halo_compile::tune::cache::TuneCache;
use halo_compile::tune::measure::Workload;
use halo_compile::tune::{positive_seconds, tolerance as checked_tolerance, TuneRequest};
use halo_compile::{ChipChoice, CompileRequest, FlagSet, GraphRewrite, KernelUse, Target, Toolchain};
use halo_hal::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Compiles `model` (`.onnx`, `.mlir`, `.mlirbc`) into `output` for `device` with the pinned
/// `iree-compile` (`iree_compile`, else `HALO_IREE_COMPILE`, else `PATH`), trying the flag sets
/// best first as `halo compile` does; returns what was done as a dict. `kernels`: whether f32
/// matmuls and convolutions call halo's own CPU kernels, the program then running only on halo
/// (`True` as `halo compile --kernels`, `False` as `--portable`, `None` the device's default:
/// on the CPU, yes).
#[pyfunction]
#[pyo3(signature = (model, output, device = "local-task", target_chip = None, flag_set = "best", extra_flags = Vec::new(), iree_compile = None, graph_rewrite = None, kernels = None))]
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
    graph_rewrite: Option<&str>,
    kernels: Option<bool>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut target = Target::for_device(device, target_chip).py()?;
    settle_chip(py, &mut target, device)?;
    warn_about(py, &target)?;
    let request = CompileRequest {
        model,
        output,
        kernels: kernel_use(kernels, &target),
        target,
        flag_set: FlagSet::from_name(flag_set).py()?,
        extra_flags,
        graph_rewrite: graph_rewrite.map(GraphRewrite::from_name).transpose().py()?,
        batch_sizes: Vec::new(),
        stop: None,
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
    summary.set_item("graph_rewrite", report.graph_rewrite.name())?;
    summary.set_item("rewritten_nodes", report.rewritten_nodes)?;
    summary.set_item("kernels", report.kernels == KernelUse::HaloKernels)?;
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

/// Tunes `model` as `halo compile --tune` does: every variant of the documented flag space is
/// compiled, timed on `device` with the inputs in the `.npy` file `inputs` (or inputs generated
/// from the declaration) and checked against the baseline; the fastest goes to `output` and the
/// JSON report to `report`. Variants calling halo's kernels join the space where `kernels`
/// (as in [`compile`]) lets them.
/// Returns (report JSON, whether it came from the cache, warnings).
#[pyfunction]
#[pyo3(signature = (model, output, report, device = "local-task", target_chip = None, extra_flags = Vec::new(), iree_compile = None, inputs = None, function = None, tolerance = 1e-4, min_time = 3.0, compile_timeout = 600.0, jobs = None, cache = None, use_cache = true, kernels = None))]
#[allow(clippy::too_many_arguments, reason = "keyword arguments of one Python function")]
pub fn tune(
    py: Python<'_>,
    model: PathBuf,
    output: PathBuf,
    report: PathBuf,
    device: &str,
    target_chip: Option<&str>,
    extra_flags: Vec<String>,
    iree_compile: Option<PathBuf>,
    inputs: Option<PathBuf>,
    function: Option<String>,
    tolerance: f64,
    min_time: f64,
    compile_timeout: f64,
    jobs: Option<usize>,
    cache: Option<PathBuf>,
    use_cache: bool,
    kernels: Option<bool>,
) -> PyResult<(String, bool, Vec<String>)> {
    let tolerance = checked_tolerance(tolerance, "tolerance").py()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut target = Target::for_device(device, target_chip).py()?;
    settle_chip(py, &mut target, device)?;
    warn_about(py, &target)?;
    let request = TuneRequest {
        model,
        output,
        report,
        kernels: kernel_use(kernels, &target),
        target,
        extra_flags,
        workload: Workload {
            device: device.to_string(),
            function,
            inputs: match &inputs {
                Some(path) => halo_runtime::npy::read_all(path).py()?,
                None => Vec::new(),
            },
            min_time: positive_seconds(min_time, "min_time").py()?,
        },
        inputs_origin: inputs.map_or("generated from the declaration".into(), |p| p.display().to_string()),
        tolerance,
        compile_time_limit: positive_seconds(compile_timeout, "compile_timeout").py()?,
        jobs: jobs.unwrap_or(cores).clamp(1, cores),
        cache: if use_cache {
            cache.or_else(TuneCache::default_root).map(TuneCache::new)
        } else {
            None
        },
    };
    let outcome = py
        .detach(|| {
            let toolchain = Toolchain::locate(iree_compile.as_deref())?;
            halo_compile::tune::tune(&toolchain, &request, &|_| {})
        })
        .py()?;
    let text = serde_json::to_string(&outcome.report)
        .map_err(|e| Error::internal(e.to_string()))
        .py()?;
    Ok((text, outcome.cache_hit, outcome.warnings))
}

/// Gives a GPU target without a chip its device's architecture ([`Target::settle_chip`]),
/// warning with a `UserWarning` when no CUDA device said which, so the compiler's old default
/// stays.
fn settle_chip(py: Python<'_>, target: &mut Target, device: &str) -> PyResult<()> {
    let choice = py.detach(|| target.settle_chip(device));
    match (&choice, choice.note()) {
        (ChipChoice::CompilerDefault { .. }, Some(note)) => {
            let message = std::ffi::CString::new(note).unwrap_or_default();
            PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), &message, 1)
        }
        _ => Ok(()),
    }
}

/// Says what [`Target::caution`] says, as a Python `UserWarning`.
fn warn_about(py: Python<'_>, target: &Target) -> PyResult<()> {
    let Some(caution) = target.caution() else {
        return Ok(());
    };
    let message = std::ffi::CString::new(caution).unwrap_or_default();
    PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), &message, 1)
}

/// `kernels` as asked, else the target's default.
fn kernel_use(kernels: Option<bool>, target: &Target) -> KernelUse {
    match kernels {
        Some(true) => KernelUse::HaloKernels,
        Some(false) => KernelUse::Portable,
        None => KernelUse::default_for(target),
    }
}
