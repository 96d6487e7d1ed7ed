//! Fences: sets of timepoints that queue operations wait on and signal.

use crate::semaphore::{wait_semaphores, Semaphore, Timeout, Timepoint, TimepointCallback, WaitMode};
use crate::{Error, Result, StatusCode};
use smallvec::{smallvec, SmallVec};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long [`Fence::wait_unless`] blocks at a time between looks at its caller.
pub const GIVE_UP_CHECKS: Duration = Duration::from_millis(20);

/// A set of (semaphore, value) timepoints, at most one per semaphore (`iree_hal_fence_t`).
///
/// Ownership: holds its semaphores alive. Threading: a fence is a value; share it by cloning.
#[derive(Clone, Default)]
pub struct Fence {
    /// Almost every fence has one timepoint, kept inline so making one allocates nothing.
    timepoints: SmallVec<[Timepoint; 1]>,
}

impl Fence {
    /// An empty fence: waiting on it returns at once, signalling it does nothing.
    pub const fn new() -> Self {
        Fence {
            timepoints: SmallVec::new_const(),
        }
    }

    /// A fence with a single timepoint.
    pub fn at(semaphore: Arc<dyn Semaphore>, value: u64) -> Self {
        Fence {
            timepoints: smallvec![(semaphore, value)],
        }
    }

    /// Adds a timepoint, keeping the larger value if the semaphore is already in the fence.
    pub fn insert(&mut self, semaphore: Arc<dyn Semaphore>, value: u64) {
        match self.timepoints.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &semaphore)) {
            Some((_, existing)) => *existing = (*existing).max(value),
            None => self.timepoints.push((semaphore, value)),
        }
    }

    /// The union of several fences.
    pub fn join<'a>(fences: impl IntoIterator<Item = &'a Fence>) -> Fence {
        let mut joined = Fence::new();
        for fence in fences {
            for (semaphore, value) in &fence.timepoints {
                joined.insert(semaphore.clone(), *value);
            }
        }
        joined
    }

    /// The timepoints.
    pub fn timepoints(&self) -> &[Timepoint] {
        &self.timepoints
    }

    /// True when the fence has no timepoints.
    pub fn is_empty(&self) -> bool {
        self.timepoints.is_empty()
    }

    /// `Ok(true)` when every timepoint is reached, `Ok(false)` when some are pending.
    ///
    /// # Errors
    /// The failure of any failed semaphore.
    pub fn query(&self) -> Result<bool> {
        let mut reached = true;
        for (semaphore, value) in &self.timepoints {
            reached &= semaphore.query()? >= *value;
        }
        Ok(reached)
    }

    /// Signals every timepoint.
    pub fn signal(&self) -> Result<()> {
        for (semaphore, value) in &self.timepoints {
            semaphore.signal(*value)?;
        }
        Ok(())
    }

    /// Fails every semaphore in the fence with `error`.
    pub fn fail(&self, error: &Error) {
        for (semaphore, _) in &self.timepoints {
            semaphore.fail(error.clone());
        }
    }

    /// Blocks until every timepoint is reached.
    pub fn wait(&self, timeout: Timeout) -> Result<()> {
        wait_semaphores(WaitMode::All, &self.timepoints, timeout)
    }

    /// [`Fence::wait`] that asks `given_up` every [`GIVE_UP_CHECKS`] and ends `Cancelled` once it
    /// answers true: a fence never reached (a kernel or device that hangs, a program waiting on
    /// a fence nothing signals) must not hold a caller that has given up on the work.
    pub fn wait_unless(&self, timeout: Timeout, given_up: impl Fn() -> bool) -> Result<()> {
        loop {
            let next_look = Instant::now() + GIVE_UP_CHECKS;
            let (until, last) = match timeout {
                Timeout::Deadline(deadline) if deadline <= next_look => (timeout, true),
                Timeout::Immediate => (timeout, true),
                _ => (Timeout::Deadline(next_look), false),
            };
            match self.wait(until) {
                Err(error) if error.code() == StatusCode::DeadlineExceeded && !last => {
                    if given_up() {
                        return Err(Error::cancelled("the wait for a fence was given up by its caller"));
                    }
                }
                reached_or_failed => return reached_or_failed,
            }
        }
    }

    /// A synchronous queue's operation: waits for `wait` (giving up once the call the calling
    /// thread runs is cancelled, [`crate::caller`]), runs `work`, then signals `signal`. A failure
    /// of either fails `signal` instead of returning, so callers meet it at their next wait, as
    /// on asynchronous drivers.
    pub fn run_between(wait: &Fence, signal: &Fence, work: impl FnOnce() -> Result<()>) -> Result<()> {
        let waited = wait.wait_unless(Timeout::Infinite, crate::caller::has_given_up);
        match waited.and_then(|()| work()) {
            Ok(()) => signal.signal(),
            Err(error) => {
                signal.fail(&error);
                Ok(())
            }
        }
    }

    /// Runs `callback` once every timepoint is reached, or with the first failure.
    pub fn on_reached(&self, callback: impl FnOnce(Result<()>) + Send + 'static) {
        self.on_all(Semaphore::on_reached, callback);
    }

    /// Runs `callback` once every timepoint is reached and visible to queries and waiters
    /// ([`Semaphore::on_published`]), or with the first failure: for work that will signal
    /// other semaphores.
    pub fn on_published(&self, callback: impl FnOnce(Result<()>) + Send + 'static) {
        self.on_all(Semaphore::on_published, callback);
    }

    /// Runs `callback` once `register` has reported every timepoint, or with the first failure.
    fn on_all(
        &self,
        register: fn(&dyn Semaphore, u64, TimepointCallback),
        callback: impl FnOnce(Result<()>) + Send + 'static,
    ) {
        if self.timepoints.is_empty() {
            callback(Ok(()));
            return;
        }
        let pending = Arc::new((AtomicUsize::new(self.timepoints.len()), Mutex::new(Some(callback))));
        for (semaphore, value) in &self.timepoints {
            let pending = pending.clone();
            register(
                semaphore.as_ref(),
                *value,
                Box::new(move |outcome| {
                    let fire = match outcome {
                        Err(error) => Some(Err(error)),
                        Ok(()) if pending.0.fetch_sub(1, Ordering::AcqRel) == 1 => Some(Ok(())),
                        Ok(()) => None,
                    };
                    if let Some(outcome) = fire {
                        let callback = pending.1.lock().unwrap_or_else(|p| p.into_inner()).take();
                        if let Some(callback) = callback {
                            callback(outcome);
                        }
                    }
                }),
            );
        }
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.timepoints.iter().map(|(_, value)| value))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimelineSemaphore;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_wait_unless_ends_when_reached_failed_timed_out_or_given_up() {
        let semaphore = TimelineSemaphore::new(0);
        let fence = Fence::at(semaphore.clone(), 1);
        let never = || false;
        let error = fence
            .wait_unless(Timeout::from(Duration::from_millis(50)), never)
            .unwrap_err();
        assert_eq!(error.code(), StatusCode::DeadlineExceeded, "{error}");
        let given_up = Arc::new(AtomicBool::new(false));
        let giver = {
            let given_up = given_up.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(60));
                given_up.store(true, Ordering::Relaxed);
            })
        };
        let error = fence
            .wait_unless(Timeout::Infinite, || given_up.load(Ordering::Relaxed))
            .unwrap_err();
        giver.join().unwrap();
        assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
        semaphore.signal(1).unwrap();
        fence.wait_unless(Timeout::Infinite, never).unwrap();
        let failed = TimelineSemaphore::new(0);
        failed.fail(Error::data_loss("the kernel faulted"));
        let error = Fence::at(failed, 1).wait_unless(Timeout::Infinite, never).unwrap_err();
        assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    }
}
