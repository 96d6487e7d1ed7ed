//! `halo.trace(path)`: the runtime's timeline written while a `with` block runs.

use crate::errors::IntoPyResult;
use halo_runtime::trace::Trace;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Mutex;

/// A trace being written; `finish()` completes the file.
#[pyclass(frozen, module = "halo")]
pub struct TraceWriter {
    trace: Mutex<Option<Trace>>,
}

#[pymethods]
impl TraceWriter {
    /// Stops tracing and completes the file (again: nothing).
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        let trace = self.trace.lock().unwrap_or_else(|p| p.into_inner()).take();
        // Completing the file joins the trace's writer thread.
        py.detach(move || trace.map_or(Ok(()), Trace::finish)).py()
    }
}

/// Starts writing the runtime's timeline to `path` (Chrome trace-event JSON).
#[pyfunction]
pub fn start_trace(py: Python<'_>, path: PathBuf) -> PyResult<TraceWriter> {
    let trace = py.detach(|| Trace::start(&path)).py()?;
    Ok(TraceWriter {
        trace: Mutex::new(Some(trace)),
    })
}
