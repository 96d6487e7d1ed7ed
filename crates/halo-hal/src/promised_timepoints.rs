//! The semaphore values that work already handed to an in-order queue will signal.
//!
//! The queue runs in order, so a submission whose waits are all reached, or promised by work
//! already on it, can follow that work onto the queue at once: the device itself then keeps the
//! order, with no host round trip (the role device-side event waits play in IREE's GPU drivers).
//! CUDA's stream and OpenCL's in-order queue both keep one table of these.

use crate::{Fence, Result, Semaphore};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Promised semaphore values, one entry per semaphore at its highest promised value. Entries
/// hold the semaphore weakly: a dropped semaphore's promise matters to no one.
///
/// Threading: any thread; work is promised under the table's lock as it is handed to the queue
/// ([`PromisedTimepoints::promise_with`]) or under the queue's own lock
/// ([`PromisedTimepoints::promise`]), so whoever sees a promise is issued behind the work that
/// keeps it.
#[derive(Default)]
pub struct PromisedTimepoints(Mutex<Vec<(Weak<dyn Semaphore>, u64)>>);

/// How far the timepoints of a wait are covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Every one is reached.
    Reached,
    /// Every one is reached or promised, and some only promised: the work may follow onto the
    /// queue, which keeps the order.
    Promised,
    /// Some timepoint is neither: the work must wait on the host.
    Neither,
}

impl PromisedTimepoints {
    fn entries(&self) -> MutexGuard<'_, Vec<(Weak<dyn Semaphore>, u64)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How far the timepoints of `wait` are reached or promised.
    ///
    /// # Errors
    /// The failure of a wait semaphore.
    pub fn cover(&self, wait: &Fence) -> Result<Coverage> {
        let mut pending = Vec::new();
        for (semaphore, value) in wait.timepoints() {
            if semaphore.query()? < *value {
                pending.push((semaphore, *value));
            }
        }
        if pending.is_empty() {
            return Ok(Coverage::Reached);
        }
        let entries = self.entries();
        let promised = pending.iter().all(|(semaphore, value)| {
            // Upgraded, so that a new semaphore at a dropped one's address matches nothing.
            entries.iter().any(|(promised, at)| {
                at >= value
                    && promised
                        .upgrade()
                        .is_some_and(|promised| Arc::ptr_eq(&promised, semaphore))
            })
        });
        Ok(if promised {
            Coverage::Promised
        } else {
            Coverage::Neither
        })
    }

    /// Notes that work now on the queue signals `signal` (called under the queue's lock).
    pub fn promise(&self, signal: &Fence) {
        Self::note(&mut self.entries(), signal);
    }

    /// Runs `hand_over`, which puts work signalling `signal` on the queue, under the table's
    /// lock, and promises `signal` when it succeeds.
    pub fn promise_with<T, E>(
        &self,
        signal: &Fence,
        hand_over: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let mut entries = self.entries();
        let handed = hand_over()?;
        Self::note(&mut entries, signal);
        Ok(handed)
    }

    fn note(entries: &mut Vec<(Weak<dyn Semaphore>, u64)>, signal: &Fence) {
        for (semaphore, value) in signal.timepoints() {
            let same = |promised: &Weak<dyn Semaphore>| std::ptr::addr_eq(promised.as_ptr(), Arc::as_ptr(semaphore));
            match entries.iter_mut().find(|(promised, _)| same(promised)) {
                Some((_, at)) => *at = (*at).max(*value),
                None => entries.push((Arc::downgrade(semaphore), *value)),
            }
        }
    }

    /// Forgets promises that are kept, or can no longer matter (the semaphore failed or is gone).
    pub fn forget_kept(&self) {
        self.entries().retain(|(promised, at)| {
            promised
                .upgrade()
                .is_some_and(|semaphore| semaphore.query().is_ok_and(|value| value < *at))
        });
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, TimelineSemaphore};

    fn semaphore() -> Arc<dyn Semaphore> {
        TimelineSemaphore::new(0)
    }

    #[test]
    fn reached_waits_need_no_promise() {
        let promises = PromisedTimepoints::default();
        let a = semaphore();
        a.signal(3).unwrap();
        assert_eq!(promises.cover(&Fence::new()).unwrap(), Coverage::Reached);
        assert_eq!(promises.cover(&Fence::at(a.clone(), 3)).unwrap(), Coverage::Reached);
        assert_eq!(promises.cover(&Fence::at(a, 4)).unwrap(), Coverage::Neither);
    }

    #[test]
    fn promised_values_cover_waits_up_to_them() {
        let promises = PromisedTimepoints::default();
        let (a, b) = (semaphore(), semaphore());
        promises.promise(&Fence::at(a.clone(), 2));
        promises.promise(&Fence::at(a.clone(), 5));
        promises.promise(&Fence::at(a.clone(), 4));
        assert_eq!(promises.len(), 1, "one entry per semaphore, at its highest value");
        assert_eq!(promises.cover(&Fence::at(a.clone(), 5)).unwrap(), Coverage::Promised);
        assert_eq!(promises.cover(&Fence::at(a.clone(), 6)).unwrap(), Coverage::Neither);
        let mut both = Fence::at(a.clone(), 1);
        both.insert(b.clone(), 1);
        assert_eq!(
            promises.cover(&both).unwrap(),
            Coverage::Neither,
            "b is neither reached nor promised"
        );
        b.signal(1).unwrap();
        assert_eq!(promises.cover(&both).unwrap(), Coverage::Promised, "a is only promised");
    }

    #[test]
    fn a_failed_wait_is_an_error() {
        let promises = PromisedTimepoints::default();
        let a = semaphore();
        promises.promise(&Fence::at(a.clone(), 1));
        a.fail(Error::aborted("the producer failed"));
        let error = promises.cover(&Fence::at(a, 1)).unwrap_err();
        assert!(error.to_string().contains("the producer failed"), "{error}");
    }

    #[test]
    fn kept_failed_and_dropped_promises_are_forgotten() {
        let promises = PromisedTimepoints::default();
        let (kept, pending, failed, dropped) = (semaphore(), semaphore(), semaphore(), semaphore());
        for semaphore in [&kept, &pending, &failed, &dropped] {
            promises.promise(&Fence::at(semaphore.clone(), 2));
        }
        kept.signal(2).unwrap();
        pending.signal(1).unwrap();
        failed.fail(Error::aborted("failed"));
        drop(dropped);
        promises.forget_kept();
        assert_eq!(promises.len(), 1);
        assert_eq!(promises.cover(&Fence::at(pending, 2)).unwrap(), Coverage::Promised);
    }

    #[test]
    fn a_promise_is_made_only_when_the_hand_over_succeeds() {
        let promises = PromisedTimepoints::default();
        let a = semaphore();
        let refused: std::result::Result<(), &str> = promises.promise_with(&Fence::at(a.clone(), 1), || Err("closed"));
        assert!(refused.is_err());
        assert_eq!(promises.cover(&Fence::at(a.clone(), 1)).unwrap(), Coverage::Neither);
        let sent: std::result::Result<u32, ()> = promises.promise_with(&Fence::at(a.clone(), 1), || Ok(7));
        assert_eq!(sent, Ok(7));
        assert_eq!(promises.cover(&Fence::at(a, 1)).unwrap(), Coverage::Promised);
    }
}
