//! `halo`: run and benchmark IREE-compiled executables and modules on halo's drivers.
//!
//! Flag names and output text follow IREE's tools (`iree-run-module`,
//! `iree-benchmark-executable`) so their users can switch; kebab-case spellings are accepted too.

mod benchmark_executable;
mod benchmark_module;
mod benchmark_report;
mod compare;
mod compile;
mod devices;
mod dump_module;
mod executable_args;
mod flagfile;
mod module_args;
mod output;
mod registry;
mod run_executable;
mod run_module;
mod serve;

use clap::{Parser, Subcommand};

// A call of a compiled program allocates small objects (buffer views, fences, argument lists)
// on every call; mimalloc's thread-local free lists make those cheap. Built without transparent
// huge pages (`no_thp`): with them mimalloc's arenas fault in whole zeroed 2 MiB pages, which
// cost peak memory and time (benchmark-module runs, with against without: densenet121 114 -> 96
// MiB and 0.91x the wall time, resnet50 251 -> 242 MiB and 0.92x, squeezenet 44 -> 36 MiB).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

/// halo: a hardware abstraction layer and runtime for IREE-compiled programs.
#[derive(Parser)]
#[command(name = "halo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lists the drivers linked into this binary.
    Drivers,
    /// Compiles an ONNX or MLIR model to a `.vmfb` with `iree-compile` 3.13 and the best flags
    /// known for the device.
    Compile(compile::CompileArgs),
    /// Lists the devices every driver finds on this machine.
    Devices,
    /// Dispatches one export of an executable once and prints every binding afterwards.
    #[command(name = "run-executable")]
    RunExecutable(executable_args::RunExecutableArgs),
    /// Calls a function of a bytecode module (`.vmfb`) and prints its results, like `iree-run-module`.
    #[command(name = "run-module")]
    RunModule(run_module::RunModuleArgs),
    /// Describes a bytecode module and disassembles its functions, like `iree-dump-module`.
    #[command(name = "dump-module")]
    DumpModule {
        /// The `.vmfb` file.
        module: String,
    },
    /// Times calls of a function of a bytecode module, like `iree-benchmark-module`.
    #[command(name = "benchmark-module")]
    BenchmarkModule(benchmark_module::BenchmarkModuleArgs),
    /// Times dispatches of one export of an executable, like `iree-benchmark-executable`.
    #[command(name = "benchmark-executable")]
    BenchmarkExecutable(benchmark_executable::BenchmarkArgs),
    /// Serves a function of a module over the Open Inference Protocol (KServe v2 HTTP/REST)
    /// until Ctrl-C or SIGTERM.
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    let args = match flagfile::expand_args(std::env::args().collect()) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("halo: {error}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    let registry = halo_runtime::default_registry();
    let result = match cli.command {
        Command::Drivers => devices::list_drivers(&registry),
        Command::Compile(args) => compile::run(&args),
        Command::Devices => devices::list_devices(&registry),
        Command::RunExecutable(args) => run_executable::run(&registry, &args),
        Command::BenchmarkExecutable(args) => benchmark_executable::run(&registry, &args),
        Command::BenchmarkModule(args) => benchmark_module::run(&registry, &args),
        Command::RunModule(args) => run_module::run(&registry, &args),
        Command::DumpModule { module } => dump_module::run(&module),
        Command::Serve(args) => serve::run(registry, &args),
    };
    match result.and_then(|()| output::flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if output::is_closed(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("halo: {error}");
            ExitCode::FAILURE
        }
    }
}
