//! Fences: sets of timepoints that queue operations wait on and signal.

use crate::semaphore::{wait_semaphores, Semaphore, Timeout, Timepoint, TimepointCallback, WaitMode};
use crate::{Error, Result};
use smallvec::{smallvec, SmallVec};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
