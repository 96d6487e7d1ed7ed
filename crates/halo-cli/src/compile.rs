//! `halo compile`: an ONNX or MLIR model to a `.vmfb`, with the flags `halo-compile` picks.

use crate::output::outln;
use clap::Args;
use halo_compile::tune::cache::TuneCache;
use halo_compile::tune::measure::Workload;
use halo_compile::tune::{self, positive_seconds, TuneEvent, TuneRequest};
use halo_compile::{
    compile, CompileRequest, CpuArch, FlagSet, GraphRewrite, KernelUse, ModelFormat, Target, Toolchain, KERNEL_IMPORTS,
};
use halo_hal::{Error, Result, ResultExt};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// Flags of `compile`.
#[derive(Args, Debug, Clone)]
pub struct CompileArgs {
    /// The model: `.onnx` (imported with `iree-import-onnx --opset-version 17`), `.mlir` or `.mlirbc`.
    pub model: PathBuf,
    /// The `.vmfb` to write (replaced only when the compile succeeds).
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// The device the program will run on; it chooses the compile target.
    #[arg(long, default_value = "local-task")]
    pub device: String,
    /// The chip to compile for: an LLVM CPU (default `host`; `x86-64-v2` for a portable
    /// program), a CUDA architecture (`sm_80`), an AMD one (`gfx942`) or a Vulkan target
    /// (`ampere`). For CUDA, and Vulkan on NVIDIA, the default is the architecture of the GPU at
    /// `--device` when it opens here.
    #[arg(long = "target-chip", visible_alias = "target_chip")]
    pub target_chip: Option<String>,
    /// For CPU devices, the architecture to compile for: `host` (this machine), `x86_64` or
    /// `arm_64` (`aarch64`). A program for another architecture runs only there; without
    /// `--target-chip` it is compiled for that architecture's baseline CPU (`x86-64-v2`,
    /// `generic`).
    #[arg(long = "target-arch", visible_alias = "target_arch", default_value = "host")]
    pub target_arch: String,
    /// The optimisation flags: `best` (try `fast-o3`, `fast`, `iree-default` in turn and keep the
    /// first the compiler accepts), or one of those.
    #[arg(long = "flag-set", visible_alias = "flag_set", default_value = "best")]
    pub flag_set: String,
    /// The change made to an ONNX graph before import: `convolutions-as-shifts` (what every CPU
    /// flag set but `iree-default` does), `depthwise-as-shifts` or `none`; default: the flag set's.
    #[arg(long = "graph-rewrite", visible_alias = "graph_rewrite", conflicts_with = "tune")]
    pub graph_rewrite: Option<String>,
    /// Have f32 matmuls and convolutions (stride 1 or 2) call halo's own kernels instead of IREE's
    /// code for them: the default on CPU devices; an error for any other device. The program then
    /// runs only on halo's CPU drivers (IREE's runtime refuses it at load). With `--tune`,
    /// variants with and without them are timed and the kernels stay only where they win.
    #[arg(long, conflicts_with = "portable")]
    pub kernels: bool,
    /// Only IREE's own code, no call of halo's kernels: the program runs on IREE's runtime too
    /// (and `--tune` times only such variants).
    #[arg(long)]
    pub portable: bool,
    /// Add a function per batch size (`--batch-sizes=1,2,4,8`: `@f_b1` ... `@f_b8`) beside an
    /// ONNX model's function, whose inputs and outputs must lead with a symbolic batch
    /// dimension: each compiles with its shapes known, which IREE makes faster code of than of
    /// the dynamic one, and `halo serve --max-batch-size` calls them, padding a batch up to the
    /// next size.
    #[arg(long = "batch-sizes", value_delimiter = ',', conflicts_with = "tune")]
    pub batch_sizes: Vec<u64>,
    /// The `iree-compile` to use; without it `HALO_IREE_COMPILE`, then `PATH`.
    #[arg(long = "iree-compile", visible_alias = "iree_compile")]
    pub iree_compile: Option<PathBuf>,
    /// Tune: compile every variant of the documented flag space, time each on `--device` with
    /// the model's inputs, drop those whose outputs leave the baseline's tolerance, and write the
    /// fastest (a JSON report goes beside it; results are cached).
    #[arg(long, conflicts_with = "flag_set")]
    pub tune: bool,
    /// With `--tune`: an `.npy` file of inputs (`@file.npy` too), repeated or holding several
    /// arrays; without it inputs are generated from the function's declaration.
    #[arg(long, requires = "tune")]
    pub input: Vec<String>,
    /// With `--tune`: the function to time (default: the module's only public function).
    #[arg(long, requires = "tune")]
    pub function: Option<String>,
    /// With `--tune`: where the JSON report goes (default: the output with `.tune.json`).
    #[arg(long = "tune-report", requires = "tune")]
    pub tune_report: Option<PathBuf>,
    /// With `--tune`: the cache folder (default: `HALO_TUNE_CACHE`, else the user cache dir).
    #[arg(long = "tune-cache", requires = "tune")]
    pub tune_cache: Option<PathBuf>,
    /// With `--tune`: tune without reading or writing the cache.
    #[arg(long = "no-tune-cache", requires = "tune", conflicts_with = "tune_cache")]
    pub no_tune_cache: bool,
    /// With `--tune`: the largest deviation from the baseline's outputs a variant may have,
    /// relative to each output's largest magnitude.
    #[arg(long = "tune-tolerance", requires = "tune", default_value_t = 1e-4)]
    pub tune_tolerance: f64,
    /// With `--tune`: seconds each variant is timed for (after one warm-up call).
    #[arg(long = "tune-min-time", requires = "tune", default_value_t = 3.0)]
    pub tune_min_time: f64,
    /// With `--tune`: seconds a variant's compile may take before it is stopped and skipped.
    #[arg(long = "tune-compile-timeout", requires = "tune", default_value_t = 600.0)]
    pub tune_compile_timeout: f64,
    /// With `--tune`: compiles run at once (default and maximum: the number of cores).
    #[arg(long, requires = "tune")]
    pub jobs: Option<usize>,
    /// More `iree-compile` flags, after `--`; they come last, so they win over the set's.
    #[arg(last = true, allow_hyphen_values = true)]
    pub compiler_flags: Vec<String>,
}

/// Makes Ctrl-C and `SIGTERM` stop the compile cleanly (the running tool killed, the scratch
/// folder beside the output removed); a second one ends the process at once, as before. Returns
/// the actions registered, for a caller that takes them away again.
pub(crate) fn stop_on_signals() -> Result<Vec<signal_hook::SigId>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = halo_compile::stop_flag();
    let mut actions = Vec::new();
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as the earlier signal left it.
        let registered = signal_hook::flag::register_conditional_default(signal, stop.clone())
            .and_then(|first| Ok([first, signal_hook::flag::register(signal, stop.clone())?]))
            .map_err(|error| Error::internal(format!("cannot handle signal {signal}: {error}")))?;
        actions.extend(registered);
    }
    Ok(actions)
}

/// Compiles the model and says which flags it took.
pub fn run(args: &CompileArgs) -> Result<()> {
    let flag_set = FlagSet::from_name(&args.flag_set)?;
    let graph_rewrite = args.graph_rewrite.as_deref().map(GraphRewrite::from_name).transpose()?;
    let mut target = Target::for_device(&args.device, args.target_chip.as_deref())?;
    if args.target_arch != "host" {
        target = target.with_cpu_arch(CpuArch::from_name(&args.target_arch)?)?;
    }
    if args.tune && !target.runs_here() {
        return Err(Error::invalid_argument(format!(
            "--tune times each variant on this machine, which cannot run programs for --target-arch={}",
            args.target_arch
        )));
    }
    // The model is checked before the compiler is looked for, so its errors do not depend on one.
    ModelFormat::of_file(&args.model)?;
    let _ = stop_on_signals()?;
    if let Some(note) = target.settle_chip(&args.device).note() {
        eprintln!("halo: note: {note}");
    }
    if let Some(caution) = target.caution() {
        eprintln!("halo: note: {caution}");
    }
    if args.tune {
        return run_tune(args, target);
    }
    // Before the compiler is looked for: a wrong size is the user's first thing to fix.
    let batch_sizes = halo_compile::batch_sizes_for(&args.model, &args.batch_sizes)?;
    let toolchain = Toolchain::locate(args.iree_compile.as_deref())?;
    let kernels = kernel_use(args, &target);
    let request = CompileRequest {
        model: args.model.clone(),
        output: args.output.clone(),
        target,
        flag_set,
        extra_flags: args.compiler_flags.clone(),
        graph_rewrite,
        kernels,
        batch_sizes: batch_sizes.clone(),
        stop: None,
    };
    let report = compile(&toolchain, &request)?;
    for rejected in &report.rejected {
        outln!(
            "flag set '{}' rejected by iree-compile: {}",
            rejected.flag_set.name(),
            rejected.first_error
        )?;
    }
    let import = report
        .import_time
        .map(|time| format!("import {:.2} s, ", time.as_secs_f64()))
        .unwrap_or_default();
    outln!(
        "compiled '{}' to '{}' with flag set '{}' (iree-compile {}; {import}compile {:.2} s)",
        args.model.display(),
        report.output.display(),
        report.flag_set.name(),
        report.compiler_version,
        report.compile_time.as_secs_f64()
    )?;
    if report.rewritten_nodes > 0 {
        outln!(
            "graph rewrite '{}': {} node(s) replaced before import",
            report.graph_rewrite.name(),
            report.rewritten_nodes
        )?;
    }
    if report.kernels == KernelUse::HaloKernels {
        say_kernels_are_used()?;
    }
    if !batch_sizes.is_empty() {
        let sizes: Vec<String> = batch_sizes.iter().map(|size| format!("_b{size}")).collect();
        outln!(
            "functions for fixed batch sizes: each public function's name with {}",
            sizes.join(", ")
        )?;
    }
    outln!("flags: {}", report.flags.join(" "))
}

/// `--kernels`, `--portable`, else the target's default.
fn kernel_use(args: &CompileArgs, target: &Target) -> KernelUse {
    if args.kernels {
        KernelUse::HaloKernels
    } else if args.portable {
        KernelUse::Portable
    } else {
        KernelUse::default_for(target)
    }
}

/// Tells the user that the program written calls halo's kernels.
fn say_kernels_are_used() -> Result<()> {
    outln!(
        "halo's kernels ({}) where they apply: this program runs only on halo's CPU drivers \
         (--portable writes one that IREE's runtime runs too)",
        KERNEL_IMPORTS.join(", ")
    )
}

/// `--tune`: checks the tuning flags, tunes with a progress bar, and prints the variants.
fn run_tune(args: &CompileArgs, target: Target) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = match args.jobs {
        Some(0) => return Err(Error::invalid_argument("--jobs must be at least 1")),
        Some(jobs) => jobs.min(cores),
        None => cores,
    };
    let tolerance = tune::tolerance(args.tune_tolerance, "--tune-tolerance")?;
    let mut inputs = Vec::new();
    for text in &args.input {
        let path = Path::new(text.strip_prefix('@').unwrap_or(text));
        inputs.extend(halo_runtime::npy::read_all(path).with_context(|| format!("reading --input '{text}'"))?);
    }
    let inputs_origin = if args.input.is_empty() {
        "generated from the declaration".to_string()
    } else {
        args.input.join(", ")
    };
    let cache = if args.no_tune_cache {
        None
    } else {
        args.tune_cache
            .clone()
            .or_else(TuneCache::default_root)
            .map(TuneCache::new)
    };
    let kernels = kernel_use(args, &target);
    let request = TuneRequest {
        model: args.model.clone(),
        output: args.output.clone(),
        report: args
            .tune_report
            .clone()
            .unwrap_or_else(|| args.output.with_extension("tune.json")),
        target,
        extra_flags: args.compiler_flags.clone(),
        kernels,
        workload: Workload {
            device: args.device.clone(),
            function: args.function.clone(),
            inputs,
            min_time: positive_seconds(args.tune_min_time, "--tune-min-time")?,
        },
        inputs_origin,
        tolerance,
        compile_time_limit: positive_seconds(args.tune_compile_timeout, "--tune-compile-timeout")?,
        jobs,
        cache,
    };
    let toolchain = Toolchain::locate(args.iree_compile.as_deref())?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let on_event = |event: TuneEvent| match event {
        TuneEvent::Started { variants, rounds } => bar.set_length(variants as u64 * (1 + u64::from(rounds))),
        TuneEvent::Compiled { variant } => {
            bar.set_message(format!("compiled {variant}"));
            bar.inc(1);
        }
        TuneEvent::Measured { variant } => {
            bar.set_message(format!("timed {variant}"));
            bar.inc(1);
        }
    };
    let outcome = tune::tune(&toolchain, &request, &on_event);
    bar.finish_and_clear();
    let outcome = outcome?;
    for warning in &outcome.warnings {
        eprintln!("warning: {warning}");
    }
    let report = &outcome.report;
    if outcome.cache_hit {
        outln!("tuning result for '{}' found in the cache", args.model.display())?;
    }
    // As wide as the longest variant's name, so the columns line up.
    let width = report.variants.iter().map(|v| v.name.len()).max().unwrap_or(0).max(7);
    outln!(
        "{:<width$} {:<18} {:>10} {:>12} {:>11}",
        "variant",
        "status",
        "compile s",
        "ms per call",
        "deviation"
    )?;
    for variant in &report.variants {
        let ms = variant.per_call_ms.map_or("-".into(), |ms| format!("{ms:.3}"));
        let deviation = variant.deviation.map_or("-".into(), |d| format!("{d:.1e}"));
        outln!(
            "{:<width$} {:<18} {:>10.2} {:>12} {:>11}",
            variant.name,
            variant.status.name(),
            variant.compile_seconds,
            ms,
            deviation
        )?;
    }
    let speedup = match (report.chosen_result(), report.baseline_result()) {
        (Some(chosen), Some(baseline)) => match (chosen.per_call_ms, baseline.per_call_ms) {
            (Some(c), Some(b)) if c > 0.0 => format!(", {:.2}x the baseline's speed", b / c),
            _ => String::new(),
        },
        _ => String::new(),
    };
    outln!(
        "chose '{}' for '{}' on {}{speedup}; wrote '{}' and '{}'",
        report.chosen,
        report.function,
        report.device,
        args.output.display(),
        request.report.display()
    )?;
    outln!("flags: {}", report.chosen_flags.join(" "))?;
    outln!("graph rewrite: {}", report.chosen_graph_rewrite)?;
    if report.chosen_kernels {
        say_kernels_are_used()?;
    }
    Ok(())
}
