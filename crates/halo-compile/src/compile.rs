//! Running the importer and the compiler, and trying flag sets until one is accepted.

use crate::declaration::{declare_functions, GraphNames};
use crate::flag_set::FlagSet;
use crate::model::ModelFormat;
use crate::target::Target;
use crate::toolchain::Toolchain;
use halo_hal::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What to compile, for what, and where the `.vmfb` goes.
#[derive(Debug, Clone)]
pub struct CompileRequest {
    /// The model: `.onnx`, `.mlir` or `.mlirbc`.
    pub model: PathBuf,
    /// The `.vmfb` to write; replaced only when the compile succeeds.
    pub output: PathBuf,
    /// The device kind and chip.
    pub target: Target,
    /// The optimisation flags, or [`FlagSet::Best`] to try them best first.
    pub flag_set: FlagSet,
    /// More `iree-compile` flags, appended after the set's (so they win where they conflict).
    pub extra_flags: Vec<String>,
}

/// A flag set the compiler rejected before another was accepted.
#[derive(Debug, Clone)]
pub struct RejectedCandidate {
    /// The set.
    pub flag_set: FlagSet,
    /// The compiler's first error line.
    pub first_error: String,
}

/// What a successful compile did.
#[derive(Debug, Clone)]
pub struct CompileReport {
    /// The `.vmfb` written.
    pub output: PathBuf,
    /// The set that compiled.
    pub flag_set: FlagSet,
    /// Every flag given to `iree-compile` besides the input and output.
    pub flags: Vec<String>,
    /// Sets tried first and rejected, best first.
    pub rejected: Vec<RejectedCandidate>,
    /// The compiler's version.
    pub compiler_version: String,
    /// Time spent importing an ONNX model.
    pub import_time: Option<Duration>,
    /// Time spent in `iree-compile`, over every candidate tried.
    pub compile_time: Duration,
}

/// Compiles `request.model` to `request.output` with `toolchain`.
///
/// The intermediate files live in a temporary folder next to the output, so the finished
/// `.vmfb` is moved into place by a rename: readers never see a half-written file.
///
/// # Errors
/// The model's and the tools' errors, naming the file; `InvalidArgument` with the compiler's
/// messages when every candidate flag set is rejected.
pub fn compile(toolchain: &Toolchain, request: &CompileRequest) -> Result<CompileReport> {
    let model = &request.model;
    let format = ModelFormat::of_file(model)?;
    let work = scratch_folder(&request.output)?;
    let (input, import_time) = match format {
        ModelFormat::Onnx => {
            let started = Instant::now();
            let mlir = work.path().join("imported.mlir");
            import_onnx(toolchain, model, &mlir)?;
            declare_imported(model, &mlir)?;
            (mlir, Some(started.elapsed()))
        }
        ModelFormat::MlirText | ModelFormat::MlirBytecode => (model.clone(), None),
    };
    let staged = work.path().join("compiled.vmfb");
    let started = Instant::now();
    let mut rejected = Vec::new();
    let candidates = request.flag_set.candidates(&request.target);
    for (index, set) in candidates.iter().copied().enumerate() {
        let mut flags = request.target.flags();
        flags.extend(set.optimisation_flags(&request.target));
        flags.extend(request.extra_flags.iter().cloned());
        let mut command = Command::new(toolchain.compiler());
        command.arg(&input).args(&flags).arg("-o").arg(&staged);
        match run(command, "iree-compile").map_err(|failure| failure.naming(&input, model)) {
            Ok(()) => {
                publish(&staged, &request.output)?;
                return Ok(CompileReport {
                    output: request.output.clone(),
                    flag_set: set,
                    flags,
                    rejected,
                    compiler_version: toolchain.version().to_string(),
                    import_time,
                    compile_time: started.elapsed(),
                });
            }
            Err(failure) if index + 1 < candidates.len() => rejected.push(RejectedCandidate {
                flag_set: set,
                first_error: failure.first_error(),
            }),
            Err(failure) => {
                let earlier: String = rejected
                    .iter()
                    .map(|r| format!("\n  flag set '{}': {}", r.flag_set.name(), r.first_error))
                    .collect();
                let tried = if earlier.is_empty() {
                    String::new()
                } else {
                    format!("\nflag sets rejected before it:{earlier}")
                };
                return Err(Error::invalid_argument(format!(
                    "iree-compile rejected model '{}' with flag set '{}' ({}):\n{}{tried}",
                    model.display(),
                    set.name(),
                    failure.status,
                    failure.excerpt()
                )));
            }
        }
    }
    Err(Error::internal("flag set with no candidates"))
}

fn scratch_folder(output: &Path) -> Result<tempfile::TempDir> {
    let parent = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    tempfile::Builder::new()
        .prefix(".halo-compile-")
        .tempdir_in(parent)
        .map_err(|error| {
            Error::invalid_argument(format!(
                "cannot write next to output '{}' (folder '{}'): {error}",
                output.display(),
                parent.display()
            ))
        })
}

fn import_onnx(toolchain: &Toolchain, model: &Path, mlir: &Path) -> Result<()> {
    let importer = toolchain.onnx_importer()?;
    let mut command = Command::new(&importer);
    command.arg(model).arg("--opset-version").arg("17").arg("-o").arg(mlir);
    run(command, "iree-import-onnx").map_err(|failure| {
        Error::invalid_argument(format!(
            "iree-import-onnx rejected model '{}' ({}): {}",
            model.display(),
            failure.status,
            failure.last_line()
        ))
    })
}

/// Writes the ABI declaration the importer leaves out into the imported functions, so the
/// compiled program describes its inputs and outputs.
fn declare_imported(model: &Path, mlir: &Path) -> Result<()> {
    let unreadable = |error: std::io::Error| {
        Error::internal(format!(
            "cannot rewrite the import of model '{}' ('{}'): {error}",
            model.display(),
            mlir.display()
        ))
    };
    let imported = std::fs::read_to_string(mlir).map_err(unreadable)?;
    let declared = declare_functions(&imported, &GraphNames::of_onnx_file(model));
    std::fs::write(mlir, declared).map_err(unreadable)
}

fn publish(staged: &Path, output: &Path) -> Result<()> {
    std::fs::rename(staged, output)
        .map_err(|error| Error::invalid_argument(format!("cannot write output '{}': {error}", output.display())))
}

/// A tool that ran and failed, or could not be started.
struct Failure {
    status: String,
    stderr: String,
}

/// Lines of a failing compiler's output an error message carries; the rest is IR dumps.
const EXCERPT_LINES: usize = 12;

impl Failure {
    /// The failure with the imported file's temporary path replaced by the model's, since the
    /// temporary file is gone by the time anyone reads the message.
    fn naming(mut self, input: &Path, model: &Path) -> Failure {
        if input != model {
            let shown = format!("{} (imported)", model.display());
            self.stderr = self.stderr.replace(&*input.to_string_lossy(), &shown);
        }
        self
    }

    fn lines(&self) -> impl Iterator<Item = &str> {
        self.stderr
            .lines()
            .map(str::trim_end)
            .filter(|line| !line.trim().is_empty())
    }

    fn first_error(&self) -> String {
        let first = self
            .lines()
            .find(|line| line.contains("error:"))
            .or_else(|| self.lines().next());
        first.unwrap_or("(no message)").trim().to_string()
    }

    fn last_line(&self) -> String {
        self.lines().last().unwrap_or("(no message)").trim().to_string()
    }

    fn excerpt(&self) -> String {
        let lines: Vec<&str> = self.lines().collect();
        let start = lines.iter().position(|line| line.contains("error:")).unwrap_or(0);
        let shown = &lines[start..lines.len().min(start + EXCERPT_LINES)];
        let mut text = shown.join("\n");
        if lines.len() > start + EXCERPT_LINES {
            text.push_str(&format!("\n... ({} more lines)", lines.len() - start - EXCERPT_LINES));
        }
        text
    }
}

fn run(mut command: Command, tool: &str) -> std::result::Result<(), Failure> {
    match command.output() {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(Failure {
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }),
        Err(error) => Err(Failure {
            status: "not started".into(),
            stderr: format!(
                "error: cannot run {tool} '{}': {error}",
                command.get_program().to_string_lossy()
            ),
        }),
    }
}
