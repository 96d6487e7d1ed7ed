//! `halo compile --tune`: compile every variant of a documented flag space, run each on the
//! device with the model's inputs, drop those whose outputs leave the baseline's tolerance, and
//! keep the fastest.
//!
//! Variants compile in parallel, at most one per core, each under a time limit; they are timed
//! one at a time afterwards, so no timing shares the machine with a compile. The result (report
//! and `.vmfb`) is cached on disk, keyed by what decides it ([`cache`]), so tuning the same
//! model again copies the cached `.vmfb` instead of compiling.

pub mod cache;
pub mod measure;
pub mod report;
pub mod space;

use crate::compile::{publish, Imports};
use crate::kernels::KernelUse;
use crate::stop;
use crate::target::Target;
use crate::toolchain::Toolchain;
use cache::{Lookup, TuneCache};
use halo_hal::{Error, Result};
use halo_runtime::Instance;
use measure::Workload;
use report::{TuneReport, VariantResult, VariantStatus};
use space::Variant;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What to tune, on what, and where the results go.
pub struct TuneRequest {
    /// The model: `.onnx`, `.mlir` or `.mlirbc`.
    pub model: PathBuf,
    /// The `.vmfb` to write: the fastest variant within tolerance.
    pub output: PathBuf,
    /// Where the JSON report goes.
    pub report: PathBuf,
    /// What the variants are compiled for.
    pub target: Target,
    /// Flags added to every variant, last.
    pub extra_flags: Vec<String>,
    /// Whether variants calling halo's kernels join the space (the result may then run only on
    /// halo).
    pub kernels: KernelUse,
    /// The device, function and inputs every variant runs.
    pub workload: Workload,
    /// Where the inputs came from, for the report.
    pub inputs_origin: String,
    /// The largest deviation from the baseline a variant may have.
    pub tolerance: f64,
    /// A compile running longer than this is stopped and reported.
    pub compile_time_limit: Duration,
    /// How many compiles run at once (at most the number of cores).
    pub jobs: usize,
    /// The result cache; `None` tunes without one.
    pub cache: Option<TuneCache>,
}

/// A duration given in seconds by a user, named `setting` in the error.
///
/// # Errors
/// `InvalidArgument` for zero, a negative, a non-finite or a too-large number.
pub fn positive_seconds(value: f64, setting: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Error::invalid_argument(format!("{setting}={value} is not a positive number of seconds")))
}

/// A tolerance given by a user, named `setting` in the error.
///
/// # Errors
/// `InvalidArgument` for a negative number or NaN.
pub fn tolerance(value: f64, setting: &str) -> Result<f64> {
    if value.is_nan() || value < 0.0 {
        return Err(Error::invalid_argument(format!(
            "{setting}={value} is not a non-negative number"
        )));
    }
    Ok(value)
}

/// A step of a tuning, for a progress display.
#[derive(Debug, Clone, Copy)]
pub enum TuneEvent<'a> {
    /// Tuning begins: this many variants will be compiled, then timed in rounds.
    Started {
        /// The number of variants.
        variants: usize,
        /// The rounds each is timed in.
        rounds: u32,
    },
    /// A variant's compile ended.
    Compiled {
        /// Its name.
        variant: &'a str,
    },
    /// A variant has been timed for a round (or skipped, having failed or deviated).
    Measured {
        /// Its name.
        variant: &'a str,
    },
}

/// A finished tuning.
pub struct TuneOutcome {
    /// The report (also written to the request's report path).
    pub report: TuneReport,
    /// True when the result came from the cache.
    pub cache_hit: bool,
    /// Things the user should know that did not stop the tuning (a corrupt cache entry, a
    /// cache that could not be written).
    pub warnings: Vec<String>,
}

/// Tunes `request.model` and writes the chosen `.vmfb` and the report.
///
/// # Errors
/// The model's and the tools' errors as for [`crate::compile`]; `InvalidArgument` listing each
/// variant's failure when none compiled, ran and stayed within tolerance.
pub fn tune(
    toolchain: &Toolchain,
    request: &TuneRequest,
    progress: &(dyn Fn(TuneEvent) + Sync),
) -> Result<TuneOutcome> {
    let model_sha256 = cache::sha256_of_file(&request.model)?;
    let cpu = cache::cpu_description();
    let target_flags = request.target.flags();
    let key = cache::key(&[
        &model_sha256,
        &request.workload.device,
        &target_flags.join(" "),
        &request.extra_flags.join(" "),
        request.workload.function.as_deref().unwrap_or(""),
        &cpu,
        toolchain.version(),
        &space::SPACE_VERSION.to_string(),
        &request.tolerance.to_string(),
        &format!("{:?}", request.kernels),
    ]);
    let mut warnings = Vec::new();
    if let Some(cache) = &request.cache {
        match cache.lookup(&key) {
            Lookup::Hit(report, vmfb) => {
                copy_into_place(&vmfb, &request.output)?;
                write_report(&report, &request.report)?;
                return Ok(TuneOutcome {
                    report: *report,
                    cache_hit: true,
                    warnings,
                });
            }
            Lookup::Corrupt(why) => warnings.push(format!("ignoring a corrupt tuning cache entry: {why}")),
            Lookup::Miss => {}
        }
    }
    let mut imports = Imports::default();
    let space = space::variants(&request.target, request.kernels);
    for variant in &space {
        imports.ensure(toolchain, &request.model, &request.output, variant.import())?;
    }
    let variants = imports.distinct(space);
    // The spec is written once, before the compiles that read it run at once.
    let kernel_flags = if variants.iter().any(|v| v.kernels == KernelUse::HaloKernels) {
        KernelUse::HaloKernels.flags(imports.first().scratch())?
    } else {
        Vec::new()
    };
    progress(TuneEvent::Started {
        variants: variants.len(),
        rounds: ROUNDS,
    });
    let compiled = compile_all(toolchain, request, &imports, (&variants, &kernel_flags), progress)?;
    let mut results: Vec<VariantResult> = variants
        .iter()
        .zip(&compiled)
        .map(|(variant, (_, compile))| VariantResult {
            name: variant.name.to_string(),
            flags: variant.flags.clone(),
            graph_rewrite: variant.graph_rewrite.name().to_string(),
            kernels: variant.kernels == KernelUse::HaloKernels,
            status: compile
                .failure
                .as_ref()
                .map_or(VariantStatus::Measured, |(status, _)| *status),
            compile_seconds: compile.seconds,
            per_call_ms: None,
            per_call_ms_rounds: Vec::new(),
            calls: None,
            deviation: None,
            error: compile.failure.as_ref().map(|(_, error)| error.clone()),
        })
        .collect();
    let baseline = measure_all(request, &variants, &compiled, &mut results, progress);
    stop::check(|| format!("tuning model '{}'", request.model.display()))?;
    let Some((baseline_name, baseline_function)) = baseline else {
        return Err(nothing_ran(&request.model, &results));
    };
    if let Some(first) = results.iter_mut().find(|r| r.name == baseline_name) {
        first.deviation = Some(0.0);
    }
    let chosen = choose(&results).map_or_else(|| baseline_name.clone(), |r| r.name.clone());
    let chosen_index = variants.iter().position(|v| v.name == chosen).unwrap_or(0);
    let chosen_vmfb = imports.variant_path(&variants[chosen_index]);
    let mut chosen_flags = target_flags.clone();
    chosen_flags.extend(variants[chosen_index].flags.iter().cloned());
    chosen_flags.extend(request.extra_flags.iter().cloned());
    let report = TuneReport {
        model: request.model.display().to_string(),
        model_sha256,
        device: request.workload.device.clone(),
        target_flags,
        extra_flags: request.extra_flags.clone(),
        cpu,
        compiler_version: toolchain.version().to_string(),
        space_version: space::SPACE_VERSION,
        function: baseline_function,
        inputs: request.inputs_origin.clone(),
        tolerance: request.tolerance,
        baseline: baseline_name,
        chosen,
        chosen_flags,
        chosen_graph_rewrite: variants[chosen_index].graph_rewrite.name().to_string(),
        chosen_kernels: variants[chosen_index].kernels == KernelUse::HaloKernels,
        vmfb_sha256: cache::sha256_of_file(&chosen_vmfb)?,
        variants: results,
    };
    if let Some(cache) = &request.cache {
        if let Err(error) = cache.store(&key, &report, &chosen_vmfb) {
            warnings.push(format!("the tuning result was not cached: {error}"));
        }
    }
    publish(&chosen_vmfb, &request.output)?;
    write_report(&report, &request.report)?;
    Ok(TuneOutcome {
        report,
        cache_hit: false,
        warnings,
    })
}

/// The timing is split into this many rounds, each giving every variant a median, and the
/// variant's time is the median of those: a disturbance of the machine spoils one round at most.
const ROUNDS: u32 = 3;

/// In a round every variant is called at least this many times, however slow.
const MIN_CALLS_PER_ROUND: usize = 3;

/// Loads every compiled variant on one device, checks each one's outputs against the baseline
/// (the first that runs), then times them call by call in turn for the workload's time, so that
/// every variant sees the same disturbances (a machine whose speed drifts by more than the
/// variants differ would otherwise decide the choice). All variants stay loaded meanwhile.
/// Returns the baseline's name and function.
fn measure_all(
    request: &TuneRequest,
    variants: &[Variant],
    compiled: &[(PathBuf, CompileResult)],
    results: &mut [VariantResult],
    progress: &(dyn Fn(TuneEvent) + Sync),
) -> Option<(String, String)> {
    let device = match Instance::new().create_device(&request.workload.device) {
        Ok(device) => device,
        Err(error) => {
            for result in results.iter_mut().filter(|r| r.status == VariantStatus::Measured) {
                result.status = VariantStatus::RunFailed;
                result.error = Some(error.to_string());
            }
            return None;
        }
    };
    let mut baseline: Option<(String, String, Vec<measure::Output>)> = None;
    let mut running = Vec::new();
    for (index, (vmfb, _)) in compiled.iter().enumerate() {
        let result = &mut results[index];
        if result.status != VariantStatus::Measured {
            continue;
        }
        let loaded = measure::LoadedVariant::load(&device, vmfb, &request.workload)
            .and_then(|loaded| loaded.outputs().map(|outputs| (loaded, outputs)));
        match loaded {
            Err(error) => fail(result, &error),
            Ok((loaded, outputs)) => {
                if check_against_baseline(
                    result,
                    loaded.function_name(),
                    outputs,
                    &mut baseline,
                    request.tolerance,
                ) {
                    running.push((index, loaded));
                }
            }
        }
    }
    // Each variant gets the workload's time in all, whatever the number of variants.
    let round_time = request.workload.min_time * running.len() as u32 / ROUNDS;
    for _ in 0..ROUNDS {
        if stop::requested() {
            break;
        }
        let times = time_round(&mut running, results, round_time);
        for ((index, _), times) in running.iter().zip(times) {
            let result = &mut results[*index];
            if let (VariantStatus::Measured, Some(ms)) = (result.status, median(&times)) {
                result.per_call_ms_rounds.push(ms);
            }
        }
        running.retain(|(index, _)| results[*index].status == VariantStatus::Measured);
        for variant in variants {
            progress(TuneEvent::Measured { variant: variant.name });
        }
    }
    for result in results.iter_mut() {
        result.per_call_ms = median(&result.per_call_ms_rounds);
    }
    baseline.map(|(name, function, _)| (name, function))
}

/// One round: every running variant is called in turn (starting one further each cycle, so no
/// variant always follows the same one) until `round_time` has passed; returns each variant's
/// call times in ms. A variant whose call fails is marked and left out of later cycles.
fn time_round(
    running: &mut [(usize, measure::LoadedVariant)],
    results: &mut [VariantResult],
    round_time: Duration,
) -> Vec<Vec<f64>> {
    let mut times = vec![Vec::new(); running.len()];
    let started = Instant::now();
    let mut cycle = 0;
    while (cycle < MIN_CALLS_PER_ROUND || started.elapsed() < round_time) && !stop::requested() {
        let mut called = false;
        for turn in 0..running.len() {
            let slot = (turn + cycle) % running.len();
            let (index, loaded) = &mut running[slot];
            let result = &mut results[*index];
            if result.status != VariantStatus::Measured {
                continue;
            }
            match loaded.time_call() {
                Ok(time) => {
                    times[slot].push(time.as_secs_f64() * 1e3);
                    result.calls = Some(result.calls.unwrap_or(0) + 1);
                    called = true;
                }
                Err(error) => fail(result, &error),
            }
        }
        if !called {
            break;
        }
        cycle += 1;
    }
    times
}

fn fail(result: &mut VariantResult, error: &Error) {
    result.status = VariantStatus::RunFailed;
    result.error = Some(error.to_string());
}

/// A variant replaces the default choice only when it is at least this much faster: smaller
/// differences are within the noise of a machine that runs other work.
const MARGIN: f64 = 0.03;

/// The default choice, best first: what `halo compile` without `--tune` takes (`fast-o3` on
/// CPUs, `shifted` on Vulkan, `o3` on CUDA and HIP, and the sets it falls back to).
const DEFAULT_ORDER: [&str; 5] = ["fast-o3", "shifted", "o3", "fast", "iree-default"];

/// The fastest measured variant, unless the default choice is within [`MARGIN`] of it.
fn choose(results: &[VariantResult]) -> Option<&VariantResult> {
    let measured = || {
        results
            .iter()
            .filter(|r| r.status == VariantStatus::Measured && r.per_call_ms.is_some())
    };
    let time = |r: &VariantResult| r.per_call_ms.unwrap_or(f64::MAX);
    let fastest = measured().min_by(|a, b| time(a).total_cmp(&time(b)))?;
    let default = DEFAULT_ORDER
        .iter()
        .find_map(|name| measured().find(|r| r.name == *name));
    match default {
        Some(default) if time(fastest) > time(default) * (1.0 - MARGIN) => Some(default),
        _ => Some(fastest),
    }
}

/// The first variant that runs becomes the baseline; any other is checked against its outputs.
/// Returns whether the variant is within tolerance (and so is timed).
fn check_against_baseline(
    result: &mut VariantResult,
    function: &str,
    outputs: Vec<measure::Output>,
    baseline: &mut Option<(String, String, Vec<measure::Output>)>,
    tolerance: f64,
) -> bool {
    let Some((_, _, reference)) = baseline else {
        *baseline = Some((result.name.clone(), function.to_string(), outputs));
        return true;
    };
    let deviation = measure::deviation(&outputs, reference);
    result.deviation = deviation.is_finite().then_some(deviation);
    if deviation > tolerance {
        result.status = VariantStatus::Deviates;
        result.error = Some(format!(
            "outputs deviate from the baseline's by {deviation:.3e} (tolerance {tolerance:.1e})"
        ));
        return false;
    }
    true
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

/// How one variant's compile went.
struct CompileResult {
    seconds: f64,
    failure: Option<(VariantStatus, String)>,
}

/// What tuning needs of the model imported once for each graph rewrite of the space.
impl Imports {
    /// Where `variant`'s `.vmfb` is written (in the first import's scratch folder).
    fn variant_path(&self, variant: &Variant) -> PathBuf {
        self.first().scratch().join(format!("{}.vmfb", variant.name))
    }

    /// `space` without the variants that would compile what an earlier one does: same flags and
    /// kernels, and a rewrite that changed the graph no more than the earlier one's (a model
    /// without depthwise convolutions is the same with and without their rewrite). Each kept
    /// variant names the rewrite that really happened.
    fn distinct(&self, space: Vec<Variant>) -> Vec<Variant> {
        let mut kept: Vec<Variant> = Vec::new();
        for mut variant in space {
            variant.graph_rewrite = self.of(variant.import()).rewrite;
            let same = |k: &Variant| {
                (&k.flags, k.graph_rewrite, k.kernels) == (&variant.flags, variant.graph_rewrite, variant.kernels)
            };
            if !kept.iter().any(same) {
                kept.push(variant);
            }
        }
        kept
    }
}

/// Compiles every variant, `request.jobs` at a time, those calling halo's kernels with
/// `kernel_flags`; each result is in the space's order.
fn compile_all(
    toolchain: &Toolchain,
    request: &TuneRequest,
    imports: &Imports,
    (variants, kernel_flags): (&[Variant], &[String]),
    progress: &(dyn Fn(TuneEvent) + Sync),
) -> Result<Vec<(PathBuf, CompileResult)>> {
    let next = AtomicUsize::new(0);
    // Set when a compiler ended by Ctrl-C (sent to the whole process group from a terminal): no
    // other variant starts then.
    let interrupted = AtomicBool::new(false);
    let done: Mutex<Vec<Option<CompileResult>>> = Mutex::new(variants.iter().map(|_| None).collect());
    let jobs = request.jobs.clamp(1, variants.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                if interrupted.load(Ordering::Relaxed) || stop::requested() {
                    break;
                }
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(variant) = variants.get(index) else { break };
                let mut flags = request.target.flags();
                flags.extend(variant.flags.iter().cloned());
                if variant.kernels == KernelUse::HaloKernels {
                    flags.extend(kernel_flags.iter().cloned());
                }
                flags.extend(request.extra_flags.iter().cloned());
                let started = Instant::now();
                let outcome = imports.of(variant.import()).compile(
                    toolchain,
                    &flags,
                    &imports.variant_path(variant),
                    Some(request.compile_time_limit),
                );
                let failure = outcome.err().map(|failure| {
                    if failure.stopped {
                        interrupted.store(true, Ordering::Relaxed);
                    }
                    let status = if failure.timed_out {
                        VariantStatus::CompileTimedOut
                    } else {
                        VariantStatus::CompileFailed
                    };
                    (status, format!("{}: {}", failure.status, failure.first_error()))
                });
                let result = CompileResult {
                    seconds: started.elapsed().as_secs_f64(),
                    failure,
                };
                if let Ok(mut done) = done.lock() {
                    done[index] = Some(result);
                }
                progress(TuneEvent::Compiled { variant: variant.name });
            });
        }
    });
    if interrupted.into_inner() || stop::requested() {
        return Err(stop::stopped(
            &format!("tuning model '{}'", request.model.display()),
            None,
        ));
    }
    let done = done.into_inner().unwrap_or_default();
    Ok(variants
        .iter()
        .zip(done)
        .map(|(variant, result)| {
            let result = result.unwrap_or(CompileResult {
                seconds: 0.0,
                failure: Some((VariantStatus::CompileFailed, "the compile did not report".into())),
            });
            (imports.variant_path(variant), result)
        })
        .collect())
}

fn nothing_ran(model: &Path, results: &[VariantResult]) -> Error {
    let lines: String = results
        .iter()
        .map(|r| {
            format!(
                "\n  {} ({}): {}",
                r.name,
                r.status.name(),
                r.error.as_deref().unwrap_or("(no message)")
            )
        })
        .collect();
    Error::invalid_argument(format!(
        "no variant of model '{}' compiled and ran:{lines}",
        model.display()
    ))
}

/// Copies `from` to `output` through a temporary file beside it, so a reader never sees half.
fn copy_into_place(from: &Path, output: &Path) -> Result<()> {
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staged = tempfile::NamedTempFile::new_in(parent)
        .map_err(|error| Error::invalid_argument(format!("cannot write output '{}': {error}", output.display())))?;
    std::fs::copy(from, staged.path())
        .map_err(|error| Error::invalid_argument(format!("cannot write output '{}': {error}", output.display())))?;
    staged
        .persist(output)
        .map(|_| ())
        .map_err(|error| Error::invalid_argument(format!("cannot write output '{}': {error}", output.display())))
}

fn write_report(report: &TuneReport, path: &Path) -> Result<()> {
    let text = report.to_json()?;
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let failed = |error: std::io::Error| {
        Error::invalid_argument(format!("cannot write tuning report '{}': {error}", path.display()))
    };
    let mut staged = tempfile::NamedTempFile::new_in(parent).map_err(failed)?;
    std::io::Write::write_all(&mut staged, text.as_bytes()).map_err(failed)?;
    staged.persist(path).map(|_| ()).map_err(|e| failed(e.error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, status: VariantStatus, ms: Option<f64>) -> VariantResult {
        VariantResult {
            name: name.into(),
            flags: Vec::new(),
            graph_rewrite: "none".into(),
            kernels: false,
            status,
            compile_seconds: 1.0,
            per_call_ms: ms,
            per_call_ms_rounds: ms.into_iter().collect(),
            calls: ms.map(|_| 3),
            deviation: None,
            error: None,
        }
    }

    #[test]
    fn the_default_choice_stays_unless_another_is_clearly_faster() {
        use VariantStatus::*;
        let chosen = |results: &[VariantResult]| choose(results).map(|r| r.name.clone());
        let mut results = vec![
            result("iree-default", Measured, Some(10.0)),
            result("fast-o3", Measured, Some(5.0)),
            result("o3-no-im2col", Measured, Some(4.9)),
            result("o3-reassociate", Deviates, Some(1.0)),
        ];
        assert_eq!(chosen(&results).as_deref(), Some("fast-o3"), "2 % faster is noise");
        results[2].per_call_ms = Some(4.8);
        assert_eq!(chosen(&results).as_deref(), Some("o3-no-im2col"), "4 % faster wins");
        results[1].status = CompileFailed;
        results[1].per_call_ms = None;
        results.push(result("fast", Measured, Some(4.75)));
        assert_eq!(
            chosen(&results).as_deref(),
            Some("fast"),
            "the next default, and fastest"
        );
        assert!(choose(&[result("iree-default", RunFailed, None)]).is_none());
    }
}
