//! Stopping a call from another thread. A correct program can loop for ever on some inputs (a
//! `while` over a value that never shrinks, such as an infinity halved), and a server that runs
//! calls for clients must get its thread back when the client gives up or its time runs out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag shared between a caller and the calls it hands it to: once set, each stops with
/// `Cancelled` at its next trip through the interpreter's dispatch loop (at least one every few
/// thousand instructions, and one per call and return).
///
/// Work a call has already queued on a device runs to its end: compiled kernels cannot be
/// stopped part-way.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A token cancelled by setting `flag`, for a flag that something else sets, such as a
    /// signal handler (`signal_hook::flag::register`).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Self {
        Self(flag)
    }

    /// Stops the calls holding this token at their next step.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Makes the token uncancelled again, for a caller whose calls take turns with one token (a
    /// signal handler, installed once, can reach only a token made before it).
    pub fn reset(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    /// The flag behind the token, for work that stops on a flag of its own (a compile run by a
    /// load that this token cancels).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }

    /// Whether [`CancelToken::cancel`] was called since the token was made or reset.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_token_is_uncancelled_for_every_holder_and_can_be_cancelled_again() {
        let token = CancelToken::new();
        let held = token.clone();
        held.cancel();
        assert!(token.is_cancelled());
        token.reset();
        assert!(!held.is_cancelled());
        held.cancel();
        assert!(token.is_cancelled());
    }

    #[test]
    fn a_token_from_a_flag_is_cancelled_by_setting_the_flag() {
        let flag = Arc::new(AtomicBool::new(false));
        let token = CancelToken::from_flag(flag.clone());
        assert!(!token.is_cancelled());
        flag.store(true, Ordering::Relaxed);
        assert!(token.is_cancelled());
    }
}
