//! The count of work a device has accepted and not finished, which `Device::wait_idle` waits to
//! reach zero: every driver with its own queue keeps one, so it is written once, here.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::{Error, Result, Timeout};

/// Submissions accepted and not yet finished (completed, failed or cancelled).
///
/// Threading: any thread; [`SubmissionCount::finish`] wakes every thread in [`SubmissionCount::wait_idle`]
/// when the count reaches zero.
#[derive(Debug, Default)]
pub struct SubmissionCount {
    count: Mutex<u64>,
    idle: Condvar,
}

impl SubmissionCount {
    fn count(&self) -> MutexGuard<'_, u64> {
        self.count.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more submission.
    pub fn add(&self) {
        *self.count() += 1;
    }

    /// Counts one submission if none is in flight; whether it did (a queue may then run it on
    /// the caller's thread, with nothing ahead of it).
    pub fn add_if_idle(&self) -> bool {
        let mut count = self.count();
        let idle = *count == 0;
        if idle {
            *count = 1;
        }
        idle
    }

    /// How many submissions are in flight.
    pub fn len(&self) -> u64 {
        *self.count()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts one submission finished.
    pub fn finish(&self) {
        let mut count = self.count();
        debug_assert!(*count > 0, "a submission finished that was never counted");
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.idle.notify_all();
        }
    }

    /// Blocks until none is in flight, or `timeout` passes.
    ///
    /// # Errors
    /// `DeadlineExceeded` saying how many `what` (e.g. "OpenCL submissions") are still in flight.
    pub fn wait_idle(&self, timeout: Timeout, what: &str) -> Result<()> {
        let mut count = self.count();
        while *count > 0 {
            let left = match timeout {
                Timeout::Infinite => None,
                Timeout::Immediate => Some(std::time::Duration::ZERO),
                Timeout::Deadline(deadline) => Some(deadline.saturating_duration_since(Instant::now())),
            };
            count = match left {
                None => self.idle.wait(count).unwrap_or_else(PoisonError::into_inner),
                Some(left) if left.is_zero() => {
                    return Err(Error::deadline_exceeded(format!("{} {what} still in flight", *count)))
                }
                Some(left) => {
                    self.idle
                        .wait_timeout(count, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn idle_is_reached_when_every_submission_finishes() {
        let count = Arc::new(SubmissionCount::default());
        count.wait_idle(Timeout::Immediate, "submissions").unwrap();
        assert!(count.add_if_idle());
        assert!(!count.add_if_idle(), "one is in flight");
        count.add();
        assert_eq!(count.len(), 2);
        let error = count.wait_idle(Timeout::Immediate, "test submissions").unwrap_err();
        assert_eq!(error.code(), crate::StatusCode::DeadlineExceeded, "{error}");
        assert!(
            error.message().contains("2 test submissions still in flight"),
            "{error}"
        );
        let later = Timeout::Deadline(Instant::now() + Duration::from_millis(20));
        assert!(count.wait_idle(later, "submissions").is_err(), "a deadline passes");
        let finisher = {
            let count = count.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                count.finish();
                count.finish();
            })
        };
        count.wait_idle(Timeout::Infinite, "submissions").unwrap();
        assert!(count.is_empty());
        finisher.join().unwrap();
    }
}
