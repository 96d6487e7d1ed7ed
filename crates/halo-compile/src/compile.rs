//! Running the importer and the compiler, and trying flag sets until one is accepted.

use crate::batch_functions::{add_batch_functions, batch_sizes_for};
use crate::declaration::{declare_functions, GraphNames};
use crate::flag_set::FlagSet;
use crate::graph_rewrite::{self, GraphRewrite};
use crate::kernels::KernelUse;
use crate::model::{GraphKind, ModelFormat};
use crate::stop;
use crate::target::Target;
use crate::toolchain::Toolchain;
use halo_hal::{Error, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
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
    /// The change made to an ONNX graph before import, instead of each flag set's own
    /// ([`FlagSet::graph_rewrite`]).
    pub graph_rewrite: Option<GraphRewrite>,
    /// Whether the program may call halo's own kernels.
    pub kernels: KernelUse,
    /// Fixed batch sizes to add a function for beside an ONNX model's function, whose inputs
    /// and outputs must lead with a dynamic batch dimension (`@f_b4` for 4); empty for none.
    pub batch_sizes: Vec<u64>,
    /// Stops this compile once set, as [`crate::stop_flag`] stops every compile: the running tool
    /// is killed and the compile ends `Cancelled`.
    pub stop: Option<Arc<AtomicBool>>,
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
    /// The change made to the ONNX graph before import ([`GraphRewrite::None`] when the set's
    /// rewrite found nothing to change).
    pub graph_rewrite: GraphRewrite,
    /// How many nodes that rewrite replaced.
    pub rewritten_nodes: usize,
    /// Whether the program may call halo's kernels (then it runs only on halo).
    pub kernels: KernelUse,
    /// Every flag given to `iree-compile` besides the input and output.
    pub flags: Vec<String>,
    /// Sets tried first and rejected, best first.
    pub rejected: Vec<RejectedCandidate>,
    /// The compiler's version.
    pub compiler_version: String,
    /// Time spent rewriting and importing an ONNX model.
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
    // Before the import, which can take a while.
    request.kernels.check(&request.target)?;
    let batch_sizes = batch_sizes_for(model, &request.batch_sizes)?;
    // One import per graph rewrite the candidates ask for, made when the first of them is tried.
    let mut imports = Imports::stopped_by(request.stop.clone());
    imports.batch_sizes = batch_sizes;
    let started = Instant::now();
    let mut rejected = Vec::new();
    let kind = GraphKind::of_file(model, ModelFormat::of_file(model)?);
    let candidates = request.flag_set.candidates(&request.target, kind);
    for (index, set) in candidates.iter().copied().enumerate() {
        let rewrite = request
            .graph_rewrite
            .unwrap_or_else(|| set.graph_rewrite(&request.target));
        let import = (rewrite, request.kernels);
        imports.ensure(toolchain, model, &request.output, import)?;
        let prepared = imports.of(import);
        let staged = prepared.scratch().join("compiled.vmfb");
        let mut flags = request.target.flags();
        flags.extend(set.optimisation_flags(&request.target));
        flags.extend(request.kernels.flags(prepared.scratch())?);
        flags.extend(request.extra_flags.iter().cloned());
        let failure = match prepared.compile(toolchain, &flags, &staged, None) {
            Ok(()) => {
                publish(&staged, &request.output)?;
                let import_time = imports.import_time();
                return Ok(CompileReport {
                    output: request.output.clone(),
                    flag_set: set,
                    flags,
                    graph_rewrite: prepared.rewrite,
                    rewritten_nodes: prepared.rewritten_nodes,
                    kernels: request.kernels,
                    rejected,
                    compiler_version: toolchain.version().to_string(),
                    import_time,
                    compile_time: started.elapsed(),
                });
            }
            Err(failure) => failure,
        };
        if failure.stopped {
            let own = request.stop.as_deref();
            return Err(stop::stopped(&format!("compiling model '{}'", model.display()), own));
        }
        if index + 1 < candidates.len() {
            rejected.push(RejectedCandidate {
                flag_set: set,
                first_error: failure.first_error(),
            });
            continue;
        }
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
    Err(Error::internal("flag set with no candidates"))
}

/// What an import depends on: the graph rewrite, and whether the program will call halo's
/// kernels (which changes what the rewrite leaves).
pub(crate) type ImportKind = (GraphRewrite, KernelUse);

/// The model imported once for each [`ImportKind`] asked for.
#[derive(Default)]
pub(crate) struct Imports {
    made: Vec<(ImportKind, PreparedModel)>,
    stop: Option<Arc<AtomicBool>>,
    /// Fixed batch sizes whose functions each import gets.
    pub batch_sizes: Vec<u64>,
}

impl Imports {
    /// No imports yet; the tools they and their compiles run are stopped by `stop` too (besides
    /// the process's stop flag).
    pub fn stopped_by(stop: Option<Arc<AtomicBool>>) -> Self {
        Imports {
            made: Vec::new(),
            stop,
            batch_sizes: Vec::new(),
        }
    }

    /// Imports `model` as `kind` says beside `output`, unless that was done already.
    pub fn ensure(&mut self, toolchain: &Toolchain, model: &Path, output: &Path, kind: ImportKind) -> Result<()> {
        if !self.made.iter().any(|(done, _)| *done == kind) {
            let mut prepared = PreparedModel::new(toolchain, model, output, kind, self.stop.clone())?;
            prepared.add_batch_functions(&self.batch_sizes)?;
            self.made.push((kind, prepared));
        }
        Ok(())
    }

    /// The import made for `kind` (one [`Imports::ensure`] made), else the first one made.
    pub fn of(&self, kind: ImportKind) -> &PreparedModel {
        let found = self.made.iter().find(|(done, _)| *done == kind);
        &found.unwrap_or(&self.made[0]).1
    }

    /// The first import made, whose scratch folder holds what is shared.
    pub fn first(&self) -> &PreparedModel {
        &self.made[0].1
    }

    /// Time spent rewriting and importing, over every import made; `None` when nothing was
    /// imported (MLIR).
    pub fn import_time(&self) -> Option<Duration> {
        self.made.iter().filter_map(|(_, p)| p.import_time).reduce(|a, b| a + b)
    }
}

/// A model ready for `iree-compile` (rewritten, imported and declared when it was ONNX), with a
/// scratch folder next to the output for what the compiles write; the folder goes when this drops.
pub(crate) struct PreparedModel {
    model: PathBuf,
    input: PathBuf,
    work: tempfile::TempDir,
    /// Stops the tools run for this model, besides the process's stop flag.
    stop: Option<Arc<AtomicBool>>,
    /// Time spent rewriting and importing an ONNX model.
    pub import_time: Option<Duration>,
    /// The rewrite that changed the graph: [`GraphRewrite::None`] when the one asked for found
    /// nothing to change, or the model is not ONNX.
    pub rewrite: GraphRewrite,
    /// How many nodes the rewrite replaced.
    pub rewritten_nodes: usize,
}

impl PreparedModel {
    /// Rewrites `model` with `rewrite` (for a program that calls halo's kernels or not) and
    /// imports it when it is ONNX, in a scratch folder beside `output`; setting `stop` kills the
    /// tools it runs.
    pub fn new(
        toolchain: &Toolchain,
        model: &Path,
        output: &Path,
        rewrite: ImportKind,
        stop: Option<Arc<AtomicBool>>,
    ) -> Result<PreparedModel> {
        let format = ModelFormat::of_file(model)?;
        let work = scratch_folder(output)?;
        let mut prepared = PreparedModel {
            model: model.to_path_buf(),
            input: model.to_path_buf(),
            work,
            stop,
            import_time: None,
            rewrite: GraphRewrite::None,
            rewritten_nodes: 0,
        };
        if format == ModelFormat::Onnx {
            let started = Instant::now();
            let source = prepared.rewritten(rewrite)?;
            let mlir = prepared.work.path().join("imported.mlir");
            let stop = prepared.stop.as_deref();
            match import_onnx(toolchain, model, &source, &mlir, stop) {
                // The importer refused the rewritten graph but may take the model as given: a
                // rewrite must never cost a model its compile.
                Err(_) if source != model => {
                    prepared.rewrite = GraphRewrite::None;
                    prepared.rewritten_nodes = 0;
                    import_onnx(toolchain, model, model, &mlir, stop)?;
                }
                imported => imported?,
            }
            declare_imported(model, &mlir)?;
            prepared.input = mlir;
            prepared.import_time = Some(started.elapsed());
        }
        Ok(prepared)
    }

    /// Adds a function per batch size in `sizes` to the import ([`crate::batch_functions`]).
    fn add_batch_functions(&mut self, sizes: &[u64]) -> Result<()> {
        if sizes.is_empty() {
            return Ok(());
        }
        let unreadable = |error: std::io::Error| {
            Error::internal(format!(
                "cannot add batch functions to the import of model '{}' ('{}'): {error}",
                self.model.display(),
                self.input.display()
            ))
        };
        let imported = std::fs::read_to_string(&self.input).map_err(unreadable)?;
        let sized = add_batch_functions(&imported, sizes)
            .map_err(|error| error.context(format!("model '{}'", self.model.display())))?;
        std::fs::write(&self.input, sized).map_err(unreadable)
    }

    /// The ONNX file to import: a rewritten copy in the scratch folder when `rewrite` changes
    /// the graph, else the model itself.
    fn rewritten(&mut self, (rewrite, kernels): ImportKind) -> Result<PathBuf> {
        if rewrite == GraphRewrite::None {
            return Ok(self.model.clone());
        }
        let bytes = std::fs::read(&self.model)
            .map_err(|error| Error::not_found(format!("cannot read model '{}': {error}", self.model.display())))?;
        let Some(rewritten) = graph_rewrite::rewrite(&bytes, rewrite, kernels) else {
            return Ok(self.model.clone());
        };
        let path = self.work.path().join("rewritten.onnx");
        std::fs::write(&path, &rewritten.bytes).map_err(|error| {
            Error::internal(format!(
                "cannot write the rewritten graph of model '{}' to '{}': {error}",
                self.model.display(),
                path.display()
            ))
        })?;
        self.rewrite = rewritten.rewrite;
        self.rewritten_nodes = rewritten.nodes;
        Ok(path)
    }

    /// The scratch folder, on the output's file system so a finished file moves by a rename.
    pub fn scratch(&self) -> &Path {
        self.work.path()
    }

    /// Runs `iree-compile` with `flags` into `vmfb`, killing it past `time_limit`.
    pub fn compile(
        &self,
        toolchain: &Toolchain,
        flags: &[String],
        vmfb: &Path,
        time_limit: Option<Duration>,
    ) -> std::result::Result<(), Failure> {
        let mut command = Command::new(toolchain.compiler());
        command.arg(&self.input).args(flags).arg("-o").arg(vmfb);
        run(command, "iree-compile", time_limit, self.stop.as_deref())
            .map_err(|failure| failure.naming(&self.input, &self.model))
    }
}

/// The start of a scratch folder's name; [`process_space`], the creating process's id and a
/// random part follow.
const SCRATCH_PREFIX: &str = ".halo-compile-";

fn scratch_folder(output: &Path) -> Result<tempfile::TempDir> {
    let parent = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let space = process_space();
    if let Some(space) = &space {
        remove_abandoned_scratch(parent, space);
    }
    let owner = space.map_or_else(String::new, |space| format!("{space}-{}-", std::process::id()));
    tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{owner}"))
        .tempdir_in(parent)
        .map_err(|error| {
            Error::invalid_argument(format!(
                "cannot write next to output '{}' (folder '{}'): {error}",
                output.display(),
                parent.display()
            ))
        })
}

/// Which process ids this process can see: a short hash of the machine's boot and this process's
/// PID namespace, so that a folder shared between machines or containers is swept only of what
/// processes that are visible here left. `None` where `/proc` does not say.
fn process_space() -> Option<String> {
    use sha2::{Digest, Sha256};
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let namespace = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let digest = Sha256::new()
        .chain_update(boot.trim())
        .chain_update(namespace.as_os_str().as_encoded_bytes())
        .finalize();
    Some(digest[..4].iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Removes the scratch folders in `folder` made in process space `space` by processes that have
/// ended without removing them (killed outright, or the machine lost), so that they do not pile
/// up beside the outputs. A live process's folder, or one from elsewhere, is left alone.
fn remove_abandoned_scratch(folder: &Path, space: &str) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    let prefix = format!("{SCRATCH_PREFIX}{space}-");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|name| name.strip_prefix(&prefix))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(owner.to_string()).exists() {
            // Another compile may be removing it too; either way it goes.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Imports ONNX file `source` (`model` itself, or its rewritten copy) into `mlir`.
fn import_onnx(
    toolchain: &Toolchain,
    model: &Path,
    source: &Path,
    mlir: &Path,
    stop: Option<&AtomicBool>,
) -> Result<()> {
    let importer = toolchain.onnx_importer()?;
    let mut command = Command::new(&importer);
    command.arg(source).arg("--opset-version").arg("17").arg("-o").arg(mlir);
    run(command, "iree-import-onnx", None, stop).map_err(|failure| {
        if failure.stopped {
            return stop::stopped(&format!("importing model '{}'", model.display()), stop);
        }
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

/// Moves a finished `.vmfb` into place.
pub(crate) fn publish(staged: &Path, output: &Path) -> Result<()> {
    std::fs::rename(staged, output)
        .map_err(|error| Error::invalid_argument(format!("cannot write output '{}': {error}", output.display())))
}

/// A tool that ran and failed, ran past its time limit, or could not be started.
pub(crate) struct Failure {
    /// How it ended (`exit status: 1`, `killed after the time limit of 60 s`, `not started`).
    pub status: String,
    /// True when it was stopped at its time limit.
    pub timed_out: bool,
    /// True when a signal stopped it: a stop was requested (see [`stop::stop_flag`]), or the
    /// tool itself ended by Ctrl-C or `SIGTERM`, as it does when the terminal sends Ctrl-C to
    /// the whole process group.
    pub stopped: bool,
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

    /// The first line that says `error:`, else the first line.
    pub fn first_error(&self) -> String {
        let first = self
            .lines()
            .find(|line| line.contains("error:"))
            .or_else(|| self.lines().next());
        first.unwrap_or("(no message)").trim().to_string()
    }

    fn last_line(&self) -> String {
        self.lines().last().unwrap_or("(no message)").trim().to_string()
    }

    /// The lines from the first error on, up to [`EXCERPT_LINES`].
    pub fn excerpt(&self) -> String {
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

/// How long a tool's error output is waited for after the tool has exited.
const STDERR_GRACE: Duration = Duration::from_secs(2);

/// How often a running tool is checked on (its time limit, a stop).
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Runs `command`, killing it past `time_limit` or once a stop is requested (the process's or
/// `stop`).
fn run(
    mut command: Command,
    tool: &str,
    time_limit: Option<Duration>,
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Failure> {
    let program = command.get_program().to_string_lossy().into_owned();
    let not_started = |error: std::io::Error| Failure {
        status: "not started".into(),
        timed_out: false,
        stopped: false,
        stderr: format!("error: cannot run {tool} '{program}': {error}"),
    };
    let mut child = match command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(error) => return Err(not_started(error)),
    };
    // Read on a thread: a compiler that fills the pipe would otherwise never exit.
    let mut pipe = child.stderr.take();
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(pipe) = pipe.as_mut() {
            // A read error leaves what was read; the exit status still says what happened.
            let _ = pipe.read_to_end(&mut text);
        }
        let _ = sender.send(String::from_utf8_lossy(&text).into_owned());
    });
    let status = wait(&mut child, time_limit, stop);
    // A process the tool started may outlive it and hold the pipe open; its output is not
    // worth waiting for once the tool itself has ended.
    let stderr = received.recv_timeout(STDERR_GRACE).unwrap_or_default();
    let failure = |status: String, timed_out, stopped| {
        Err(Failure {
            status,
            timed_out,
            stopped,
            stderr,
        })
    };
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => failure(status.to_string(), false, ended_by_a_stop_signal(status)),
        Err(Ended::TimedOut(status)) => failure(status, true, false),
        Err(Ended::Stopped(status)) => failure(status, false, true),
        Err(Ended::Lost(status)) => failure(status, false, false),
    }
}

fn ended_by_a_stop_signal(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(status.signal(), Some(libc::SIGINT | libc::SIGTERM))
}

/// Why a tool has no exit status, as the failure's status text.
enum Ended {
    TimedOut(String),
    Stopped(String),
    Lost(String),
}

/// Waits for `child`, killing it past `time_limit` or once a stop is requested (the process's or
/// `stop`).
fn wait(
    child: &mut Child,
    time_limit: Option<Duration>,
    stop: Option<&AtomicBool>,
) -> std::result::Result<ExitStatus, Ended> {
    let lost = |error: std::io::Error| Ended::Lost(format!("lost: {error}"));
    let deadline = time_limit.map(|limit| (Instant::now() + limit, limit));
    loop {
        let status = child.try_wait().map_err(lost)?;
        if let Some(status) = status {
            return Ok(status);
        }
        let ended = if stop::requested_for(stop) {
            Ended::Stopped("killed: a stop was requested".into())
        } else if let Some((_, limit)) = deadline.filter(|(at, _)| Instant::now() >= *at) {
            Ended::TimedOut(format!("killed after the time limit of {:.1} s", limit.as_secs_f64()))
        } else {
            std::thread::sleep(POLL_INTERVAL);
            continue;
        };
        // Killing fails only when it has just exited; the wait below reaps it either way.
        let _ = child.kill();
        let _ = child.wait();
        return Err(ended);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_scratch_folders_of_ended_processes_seen_here_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let space = process_space().expect("/proc says which processes this one sees");
        let other_space = if space == "00000000" { "00000001" } else { "00000000" };
        // Process ids stop well below 999999999 (at most 2^22 on Linux).
        let folder = |name: String| {
            let path = dir.path().join(name);
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("imported.mlir"), "module {}").unwrap();
            path
        };
        let abandoned = folder(format!("{SCRATCH_PREFIX}{space}-999999999-a1b2"));
        let live = folder(format!("{SCRATCH_PREFIX}{space}-{}-c3d4", std::process::id()));
        let elsewhere = folder(format!("{SCRATCH_PREFIX}{other_space}-999999999-e5f6"));
        let older_kind = folder(format!("{SCRATCH_PREFIX}g7h8i9"));
        remove_abandoned_scratch(dir.path(), &space);
        assert!(!abandoned.exists());
        for kept in [live, elsewhere, older_kind] {
            assert!(kept.join("imported.mlir").exists(), "{}", kept.display());
        }
        let scratch = scratch_folder(&dir.path().join("m.vmfb")).unwrap();
        let name = scratch.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("{SCRATCH_PREFIX}{space}-{}-", std::process::id())),
            "{name}"
        );
    }

    #[test]
    fn a_tool_past_its_time_limit_is_stopped_and_says_so() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo 'error: still going' >&2; exec sleep 30"]);
        let failure = run(command, "sh", Some(Duration::from_millis(300)), None).unwrap_err();
        assert!(
            failure.status.starts_with("killed after the time limit"),
            "{}",
            failure.status
        );
        assert_eq!(failure.first_error(), "error: still going");

        // A process the tool started holds the pipe open past the tool's end.
        let started = Instant::now();
        let mut command = Command::new("sh");
        command.args(["-c", "sleep 30 & sleep 30"]);
        let failure = run(command, "sh", Some(Duration::from_millis(300)), None).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert!(
            failure.status.starts_with("killed after the time limit"),
            "{}",
            failure.status
        );

        let mut command = Command::new("sh");
        command.args(["-c", "echo 'error: bad flag' >&2; exit 3"]);
        let failure = run(command, "sh", Some(Duration::from_secs(30)), None).unwrap_err();
        assert!(failure.status.contains('3') && !failure.timed_out, "{}", failure.status);
        assert_eq!(failure.first_error(), "error: bad flag");
        assert!(run(Command::new("true"), "true", None, None).is_ok());
        let failure = run(Command::new("/nonexistent/tool"), "tool", None, None).unwrap_err();
        assert_eq!(failure.status, "not started");
    }
}
