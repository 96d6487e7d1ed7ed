//! Timelines of what the runtime does, as Chrome trace-event JSON that `ui.perfetto.dev` and
//! `chrome://tracing` open: one track per thread (the caller's, each `local-task` worker), with
//! spans for calls, VM imports (the `hal` calls), queue submissions, dispatches (export name,
//! workgroup count, the workgroups each thread ran), transfers and semaphore waits, and an event
//! per semaphore signal.
//!
//! The spans come from the `tracing` crate throughout halo. Until a trace starts no subscriber
//! listens, so each span costs one check of a global level; a trace installs a process-wide
//! subscriber the first time, and later traces reuse it.

use halo_hal::{Error, Result};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use tracing_chrome::{ChromeLayer, ChromeLayerBuilder, FlushGuard};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{reload, Registry};

type Layer = Option<ChromeLayer<Registry>>;

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
        installed
            .handle
            .reload(Some(layer))
            .map_err(|e| Error::internal(format!("starting the trace: {e}")))?;
        *running = Some(path.to_path_buf());
        Ok(Trace {
            guard: Some(guard),
            path: path.to_path_buf(),
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops tracing and completes the file.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(guard) = self.guard.take() else { return };
        if let Ok(installed) = installed() {
            // Spans end and the writer thread finishes the JSON when the layer and guard go.
            let _ = installed.handle.reload(None);
            drop(guard);
            *installed.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        self.stop();
    }
}
