//! Timelines of what the runtime does, as Chrome trace-event JSON that `ui.perfetto.dev` and
//! `chrome://tracing` open: one track per thread (the caller's, each `local-task` worker), with
//! spans for calls, VM imports (the `hal` calls), queue submissions, dispatches (export name,
//! workgroup count, the workgroups each thread ran), transfers, allocations and semaphore waits,
//! and an event per semaphore signal; and one track per device queue, with a slice for each
//! command buffer's execution (see [`halo_hal::trace`]).
//!
//! The spans come from the `tracing` crate throughout halo. Until a trace starts no subscriber
//! listens, so each span costs one check of a global level; a trace installs a process-wide
//! subscriber the first time, and later traces reuse it.
//!
//! A process that also logs through `tracing` (`halo serve`) installs the subscriber with its
//! log beside it ([`install_with_log`]) before tracing, since a process has one subscriber.
//!
//! One Chrome layer serves every trace of the process, each trace a new file of its writer
//! (`FlushGuard::start_new`): tracing-chrome keeps each thread's track id and channel in
//! thread-locals for the life of the thread, so a second layer would count track ids from 0
//! again while threads traced before kept theirs, and two threads' spans would share a track.

mod queue_tracks;

use halo_hal::{Error, Result};
use queue_tracks::{QueueTracks, Slices};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tracing::span;
use tracing::{Event, Subscriber};
use tracing_chrome::{ChromeLayer, ChromeLayerBuilder, FlushGuard};
use tracing_subscriber::layer::{Context, Layered, SubscriberExt};
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

type Slot = Option<Layered<QueueTracks, SharedChrome, Registry>>;

/// A log beside the trace's slot ([`install_with_log`]).
type Log = Box<dyn Layer<Layered<reload::Layer<Slot, Registry>, Registry>> + Send + Sync>;

/// The process's one Chrome layer, shared into the subscriber's slot while a trace runs.
#[derive(Clone)]
struct SharedChrome(Arc<ChromeLayer<Registry>>);

impl<S: Subscriber> Layer<S> for SharedChrome
where
    ChromeLayer<Registry>: Layer<S>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        self.0.on_new_span(attrs, id, ctx)
    }
    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        self.0.on_record(id, values, ctx)
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.0.on_event(event, ctx)
    }
    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        self.0.on_enter(id, ctx)
    }
    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        self.0.on_exit(id, ctx)
    }
    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        self.0.on_close(id, ctx)
    }
}

/// The Chrome layer, its writer thread, and when its clock started.
struct Chrome {
    layer: SharedChrome,
    guard: FlushGuard,
    origin: Instant,
}

/// The process's trace subscriber: a slot the running trace's layers are put into.
struct Installed {
    handle: reload::Handle<Slot, Registry>,
    /// The path of the trace being written, if one is.
    running: Mutex<Option<PathBuf>>,
    /// Made by the first trace.
    chrome: Mutex<Option<Chrome>>,
}

fn installed() -> Result<&'static Installed> {
    install(None).map(|(installed, _)| installed)
}

/// The process's trace subscriber, installed now with `log` beside it if it is not yet; and
/// whether `log` went in.
fn install(log: Option<Log>) -> Result<(&'static Installed, bool)> {
    static INSTALLED: OnceLock<std::result::Result<Installed, String>> = OnceLock::new();
    let mut logging = false;
    let installed = INSTALLED
        .get_or_init(|| {
            let (layer, handle) = reload::Layer::new(None);
            logging = log.is_some();
            tracing::subscriber::set_global_default(Registry::default().with(layer).with(log))
                .map_err(|_| "another tracing subscriber is already installed in this process".to_string())?;
            Ok(Installed {
                handle,
                running: Mutex::new(None),
                chrome: Mutex::new(None),
            })
        })
        .as_ref()
        .map_err(|why| Error::failed_precondition(why.clone()))?;
    Ok((installed, logging))
}

/// Installs the process's subscriber with a log to stderr beside the trace's (lines `filter`
/// lets through, with colours when `ansi`), for a process that logs and traces: traces started
/// later record every span whatever the filter lets the log show.
///
/// # Errors
/// `FailedPrecondition` when the process has a subscriber already (its own, or the trace's
/// installed without a log by an earlier trace).
pub fn install_with_log(filter: EnvFilter, ansi: bool) -> Result<()> {
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_filter(filter);
    match install(Some(Box::new(log)))? {
        (_, true) => Ok(()),
        (_, false) => Err(Error::failed_precondition(
            "the trace subscriber was installed without a log before the log could be added",
        )),
    }
}

/// A trace file that says when the writer thread has let go of it (the file is then complete).
struct TraceFile {
    file: BufWriter<File>,
    closed: Sender<()>,
}

impl Write for TraceFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file.write(bytes)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for TraceFile {
    fn drop(&mut self) {
        let _ = self.file.flush();
        let _ = self.closed.send(());
    }
}

/// How long finishing a trace waits for the writer thread to complete the file.
const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// A trace being written; dropping it (or [`Trace::finish`]) completes the file.
pub struct Trace {
    /// Says when the file is complete; `None` once finished.
    closed: Option<Receiver<()>>,
    queue_slices: Slices,
    path: PathBuf,
}

impl Trace {
    /// Starts writing everything the runtime does, on every thread, to `path`.
    ///
    /// # Errors
    /// `FailedPrecondition` while another trace is being written or when the process has a
    /// tracing subscriber of its own; the file's creation error, naming it.
    pub fn start(path: &Path) -> Result<Trace> {
        let installed = installed()?;
        let mut running = installed.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(other) = running.as_ref() {
            return Err(Error::failed_precondition(format!(
                "a trace is already being written to '{}'",
                other.display()
            )));
        }
        let file = File::create(path)
            .map_err(|e| Error::invalid_argument(format!("cannot create trace file '{}': {e}", path.display())))?;
        let (closed_tx, closed) = channel();
        let file = TraceFile {
            file: BufWriter::new(file),
            closed: closed_tx,
        };
        let mut chrome = installed.chrome.lock().unwrap_or_else(|p| p.into_inner());
        let chrome = match chrome.as_mut() {
            Some(chrome) => {
                chrome.guard.start_new(Some(Box::new(file)));
                chrome
            }
            None => {
                let (layer, guard) = ChromeLayerBuilder::new().writer(file).include_args(true).build();
                // The writer counts time from its creation, just now.
                chrome.insert(Chrome {
                    layer: SharedChrome(Arc::new(layer)),
                    guard,
                    origin: Instant::now(),
                })
            }
        };
        let queues = QueueTracks::new(chrome.origin);
        let queue_slices = queues.slices();
        installed
            .handle
            .reload(Some(chrome.layer.clone().and_then(queues)))
            .map_err(|e| Error::internal(format!("starting the trace: {e}")))?;
        *running = Some(path.to_path_buf());
        Ok(Trace {
            closed: Some(closed),
            queue_slices,
            path: path.to_path_buf(),
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops tracing and completes the file.
    ///
    /// # Errors
    /// `DataLoss` when the queue tracks cannot be added to the file.
    pub fn finish(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        let Some(closed) = self.closed.take() else {
            return Ok(());
        };
        let installed = installed()?;
        // Nothing more reaches the file; the writer thread completes it when given the next one.
        let _ = installed.handle.reload(None);
        if let Some(chrome) = installed.chrome.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            chrome.guard.start_new(Some(Box::new(std::io::sink())));
        }
        let completed = closed.recv_timeout(FINISH_TIMEOUT).map_err(|_| {
            Error::data_loss(format!(
                "the trace writer did not complete '{}' within {FINISH_TIMEOUT:?}",
                self.path.display()
            ))
        });
        let appended = completed.and_then(|()| queue_tracks::append(&self.path, &self.queue_slices));
        *installed.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
        appended
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        // A trace dropped without `finish` (an early error return) keeps what it could write.
        let _ = self.stop();
    }
}
