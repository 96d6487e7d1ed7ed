//! `halo run-module`: load bytecode modules, call one function, print or save its results the way
//! `iree-run-module` does, or compare them with expected values.

use crate::compare::{compare, Tolerances};
use crate::module_args::ModuleArgs;
use crate::output::outln;
use clap::Args;
use halo_hal::{Device, DriverRegistry, Error, Result, ResultExt};
use halo_runtime::{format_output, tensor, Value};
use std::io::Write;
use std::path::Path;

/// Flags of `run-module`.
#[derive(Args, Debug, Clone)]
pub struct RunModuleArgs {
    #[command(flatten)]
    pub module: ModuleArgs,
    /// Where result i goes: `-` prints it (the default), empty ignores it, `@file.npy` /
    /// `+file.npy` write / append a NumPy array, `@file.bin` / `+file.bin` raw bytes.
    #[arg(long, allow_hyphen_values = true)]
    pub output: Vec<String>,
    /// Expected value of result i, in `--input` syntax, or `(ignored)`; when given, results are
    /// compared instead of printed and a mismatch fails the command.
    #[arg(
        long = "expected_output",
        visible_alias = "expected-output",
        allow_hyphen_values = true
    )]
    pub expected_output: Vec<String>,
    /// Elements printed per buffer view before the rest is elided with `...`.
    #[arg(
        long = "output_max_element_count",
        visible_alias = "output-max-element-count",
        default_value_t = 1024
    )]
    pub output_max_element_count: usize,
    #[command(flatten)]
    pub tolerances: Tolerances,
}

/// Runs the function and prints `EXEC @name` and its results.
pub fn run(registry: &DriverRegistry, args: &RunModuleArgs) -> Result<()> {
    args.module.traced(|| run_untraced(registry, args))
}

fn run_untraced(registry: &DriverRegistry, args: &RunModuleArgs) -> Result<()> {
    let prepared = args.module.prepare(registry)?;
    let results = prepared.session.call(&prepared.function, &prepared.inputs)?;
    let device = &**prepared.session.device();
    outln!("EXEC @{}", args.module.function)?;
    if !args.expected_output.is_empty() {
        let report = compare(
            device,
            &results,
            &args.expected_output,
            &args.tolerances,
            args.output_max_element_count,
        )?;
        outln!("{}", report.text)?;
        return match report.passed {
            true => Ok(()),
            false => Err(Error::failed_precondition(
                "function outputs did not match their expected values",
            )),
        };
    }
    for (index, value) in results.iter().enumerate() {
        let target = args.output.get(index).map(String::as_str).unwrap_or("-");
        write_output(device, index, value, target, args.output_max_element_count)
            .with_context(|| format!("writing result {index} to '{target}'"))?;
    }
    Ok(())
}

fn write_output(device: &dyn Device, index: usize, value: &Value, target: &str, max_elements: usize) -> Result<()> {
    match target {
        "" => Ok(()),
        "-" => {
            outln!("result[{index}]: {}", format_output(device, value, max_elements)?)?;
            Ok(())
        }
        _ => {
            let (append, path) = match target.split_at(1) {
                ("@", path) => (false, path),
                ("+", path) => (true, path),
                _ => return Err(Error::invalid_argument("an output is '-', empty, '@file' or '+file'")),
            };
            let tensor = tensor::to_host(device, value)?;
            if path.ends_with(".npy") {
                return halo_runtime::npy::write(Path::new(path), &tensor, append);
            }
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(path)
                .map_err(|e| Error::permission_denied(format!("opening '{path}': {e}")))?;
            file.write_all(&tensor.bytes)
                .map_err(|e| Error::permission_denied(format!("writing '{path}': {e}")))
        }
    }
}
