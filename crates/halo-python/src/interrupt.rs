//! Ctrl-C during a call from Python's main thread. Python's own SIGINT handler only records the
//! signal; its `KeyboardInterrupt` is raised when the main thread is back in the interpreter, which
//! a call looping for ever (a `while` over an infinity) never is. So the first call from the main
//! thread adds an action to SIGINT, before Python's handler, that cancels the call in flight
//! there; the call ends with `CANCELLED` at its next step, and Python's handler then raises
//! `KeyboardInterrupt` as it would have.
//!
//! Nothing is installed when SIGINT is not Python's to handle (ignored, or left to the system's
//! default), and calls from other threads are not interrupted, as Python's own code on them is not.
//! A later `signal.signal(SIGINT, ...)` puts Python's handler back in front, after which calls
//! cannot be interrupted again.

use halo_runtime::{CancelToken, StatusCode};
use pyo3::prelude::*;
use std::cell::Cell;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

/// The token of the call in flight on the main thread (calls there take turns), once an action
/// on SIGINT cancels it; `None` when none could be added.
static MAIN_THREAD_CALLS: OnceLock<Option<CancelToken>> = OnceLock::new();

thread_local! {
    static ON_MAIN_THREAD: Cell<Option<bool>> = const { Cell::new(None) };
}

/// The token Ctrl-C cancels, reset, for a call about to start on this thread; `None` off the main
/// thread or where SIGINT is not Python's.
pub fn token_for_call(py: Python<'_>) -> PyResult<Option<&'static CancelToken>> {
    if !on_main_thread(py)? {
        return Ok(None);
    }
    if MAIN_THREAD_CALLS.get().is_none() {
        let token = python_handles_sigint(py)?.then(install).flatten();
        let _ = MAIN_THREAD_CALLS.set(token);
    }
    let token = MAIN_THREAD_CALLS.get().and_then(Option::as_ref);
    if let Some(token) = token {
        token.reset();
    }
    Ok(token)
}

/// Whether `result` is that of a call Ctrl-C cancelled; Python's SIGINT handler should then run
/// (`py.check_signals()`, which raises `KeyboardInterrupt` by default).
pub fn interrupted<T>(token: Option<&CancelToken>, result: &halo_runtime::Result<T>) -> bool {
    matches!((token, result), (Some(token), Err(error)) if error.code() == StatusCode::Cancelled && token.is_cancelled())
}

fn on_main_thread(py: Python<'_>) -> PyResult<bool> {
    if let Some(known) = ON_MAIN_THREAD.get() {
        return Ok(known);
    }
    let threading = py.import("threading")?;
    let main = threading
        .call_method0("current_thread")?
        .is(&threading.call_method0("main_thread")?);
    ON_MAIN_THREAD.set(Some(main));
    Ok(main)
}

/// Whether Python's SIGINT handler is a Python function (by default `default_int_handler`),
/// rather than `SIG_IGN`, `SIG_DFL` or one installed outside Python.
fn python_handles_sigint(py: Python<'_>) -> PyResult<bool> {
    let signal = py.import("signal")?;
    let handler = signal.call_method1("getsignal", (signal.getattr("SIGINT")?,))?;
    Ok(handler.is_callable())
}

/// A token that SIGINT cancels; signal-hook calls the handler that was there before (Python's)
/// after setting the flag.
fn install() -> Option<CancelToken> {
    let flag = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, flag.clone()).ok()?;
    Some(CancelToken::from_flag(flag))
}
