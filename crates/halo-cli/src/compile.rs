//! `halo compile`: an ONNX or MLIR model to a `.vmfb`, with the flags `halo-compile` picks.

use crate::output::outln;
use clap::Args;
use halo_compile::{compile, CompileRequest, FlagSet, ModelFormat, Target, Toolchain};
use halo_hal::Result;
use std::path::PathBuf;

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
    /// program), a CUDA architecture (`sm_80`), an AMD one (`gfx942`) or a Vulkan target.
    #[arg(long = "target-chip", visible_alias = "target_chip")]
    pub target_chip: Option<String>,
    /// The optimisation flags: `best` (try `fast-o3`, `fast`, `iree-default` in turn and keep the
    /// first the compiler accepts), or one of those.
    #[arg(long = "flag-set", visible_alias = "flag_set", default_value = "best")]
    pub flag_set: String,
    /// The `iree-compile` to use; without it `HALO_IREE_COMPILE`, then `PATH`.
    #[arg(long = "iree-compile", visible_alias = "iree_compile")]
    pub iree_compile: Option<PathBuf>,
    /// More `iree-compile` flags, after `--`; they come last, so they win over the set's.
    #[arg(last = true, allow_hyphen_values = true)]
    pub compiler_flags: Vec<String>,
}

/// Compiles the model and says which flags it took.
pub fn run(args: &CompileArgs) -> Result<()> {
    let flag_set = FlagSet::from_name(&args.flag_set)?;
    let target = Target::for_device(&args.device, args.target_chip.as_deref())?;
    // The model is checked before the compiler is looked for, so its errors do not depend on one.
    ModelFormat::of_file(&args.model)?;
    let toolchain = Toolchain::locate(args.iree_compile.as_deref())?;
    let request = CompileRequest {
        model: args.model.clone(),
        output: args.output.clone(),
        target,
        flag_set,
        extra_flags: args.compiler_flags.clone(),
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
    outln!("flags: {}", report.flags.join(" "))
}
