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

mod queue_tracks;

use halo_hal::{Error, Result};
use queue_tracks::{QueueTracks, Slices};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;
use tracing_chrome::{ChromeLayer, ChromeLayerBuilder, FlushGuard};
use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::{reload, Layer as _, Registry};

type Layer = Option<Layered<QueueTracks, ChromeLayer<Registry>, Registry>>;

/// The process's trace subscriber: a slot the running trace's layer is put into.
struct Installed {
    handle: reload::Handle<Layer, Registry>,
    /// The path of the trace being written, if one is.
    running: Mutex<Option<PathBuf>>,
}

fn installed() -> Result<&'static Installed> {
    static INSTALLED: OnceLock<std::result::Result<Installed, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let (layer, handle) = reload::Layer::new(None);
            tracing::subscriber::set_global_default(Registry::default().with(layer))
                .map_err(|_| "another tracing subscriber is already installed in this process".to_string())?;
            Ok(Installed {
                handle,
                running: Mutex::new(None),
            })
        })
        .as_ref()
        .map_err(|why| Error::failed_precondition(why.clone()))
}

/// A trace being written; dropping it (or [`Trace::finish`]) completes the file.
pub struct Trace {
    guard: Option<FlushGuard>,
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
        let (layer, guard) = ChromeLayerBuilder::new()
            .writer(BufWriter::new(file))
            .include_args(true)
            .build();
        // The writer counts time from its creation, just now.
        let queues = QueueTracks::new(Instant::now());
        let queue_slices = queues.slices();
        installed
            .handle
            .reload(Some(layer.and_then(queues)))
            .map_err(|e| Error::internal(format!("starting the trace: {e}")))?;
        *running = Some(path.to_path_buf());
        Ok(Trace {
            guard: Some(guard),
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
        let Some(guard) = self.guard.take() else { return Ok(()) };
        let installed = installed()?;
        // Spans end and the writer thread finishes the JSON when the layer and guard go.
        let _ = installed.handle.reload(None);
        drop(guard);
        let appended = queue_tracks::append(&self.path, &self.queue_slices);
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
