//! Stopping a compile or a tuning run part-way (Ctrl-C, `SIGTERM`): the tool it is running is
//! killed and its scratch folder, beside the output and often hundreds of MB, is removed as the
//! error returns. A process raises the flag from its signal handlers ([`stop_flag`]); the waits on
//! tools and the tuning rounds look at it. One compile can also be stopped alone, by the flag in
//! its request ([`crate::CompileRequest::stop`]; a server shutting down stops the compile of a
//! model it was loading).

use halo_hal::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The process's flag that stops every compile and tuning run in progress once set (for
/// `signal_hook::flag::register`); nothing starts again until the process ends.
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(Arc::default).clone()
}

/// Whether [`stop_flag`] is set.
pub(crate) fn requested() -> bool {
    STOP.get().is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// Whether [`stop_flag`] or the one compile's own flag `own` is set.
pub(crate) fn requested_for(own: Option<&AtomicBool>) -> bool {
    requested() || own.is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// `Cancelled` once a stop is requested, naming what was under way.
pub(crate) fn check(doing: impl FnOnce() -> String) -> Result<()> {
    if requested() {
        return Err(stopped(&doing(), None));
    }
    Ok(())
}

/// The error of work stopped while `doing` (`compiling model 'm.onnx'`): by its caller when its
/// own flag `own` is set and the process's is not, else by a signal (the process's flag, or a
/// tool ended by Ctrl-C or `SIGTERM`).
pub(crate) fn stopped(doing: &str, own: Option<&AtomicBool>) -> Error {
    if !requested() && requested_for(own) {
        Error::cancelled(format!("stopped by its caller while {doing}"))
    } else {
        Error::cancelled(format!("stopped by a signal while {doing}"))
    }
}
