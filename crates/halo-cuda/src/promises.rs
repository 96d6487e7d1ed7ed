//! The semaphore values that work already on a device's stream will signal.
//!
//! The stream runs in order, so a submission whose waits are all reached, or promised by work
//! already on it, can follow that work onto the stream at once: the device itself then keeps the
//! order, with no host round trip (the role device-side event waits play in IREE's HIP driver).

use halo_hal::{Fence, Result, Semaphore};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Promised semaphore values, one entry per semaphore at its highest promised value.
///
/// Threading: any thread; callers that issue work add its promise under the stream's lock, so
/// whoever sees a promise issues behind the work that keeps it.
#[derive(Default)]
pub(crate) struct Promises(Mutex<Vec<(Weak<dyn Semaphore>, u64)>>);

impl Promises {
    fn entries(&self) -> MutexGuard<'_, Vec<(Weak<dyn Semaphore>, u64)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether every timepoint of `wait` is reached, or promised by work already on the stream.
    ///
    /// # Errors
    /// The failure of a wait semaphore.
    pub(crate) fn cover(&self, wait: &Fence) -> Result<bool> {
        let mut pending = Vec::new();
        for (semaphore, value) in wait.timepoints() {
            if semaphore.query()? < *value {
                pending.push((semaphore, *value));
            }
        }
        if pending.is_empty() {
            return Ok(true);
        }
        let entries = self.entries();
        Ok(pending.iter().all(|(semaphore, value)| {
            // Upgraded, so that a new semaphore at a dropped one's address matches nothing.
            entries.iter().any(|(promised, at)| {
                at >= value
                    && promised
                        .upgrade()
                        .is_some_and(|promised| Arc::ptr_eq(&promised, semaphore))
            })
        }))
    }

    /// Notes that work now on the stream signals `signal`.
    pub(crate) fn add(&self, signal: &Fence) {
        let mut entries = self.entries();
        for (semaphore, value) in signal.timepoints() {
            let same = |promised: &Weak<dyn Semaphore>| std::ptr::addr_eq(promised.as_ptr(), Arc::as_ptr(semaphore));
            match entries.iter_mut().find(|(promised, _)| same(promised)) {
                Some((_, at)) => *at = (*at).max(*value),
                None => entries.push((Arc::downgrade(semaphore), *value)),
            }
        }
    }

    /// Forgets promises that are kept, or can no longer matter (the semaphore failed or is gone).
    pub(crate) fn forget_kept(&self) {
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
    use halo_hal::{Error, TimelineSemaphore};

    fn semaphore() -> Arc<dyn Semaphore> {
        TimelineSemaphore::new(0)
    }

    #[test]
    fn reached_waits_need_no_promise() {
        let promises = Promises::default();
        let a = semaphore();
        a.signal(3).unwrap();
        assert!(promises.cover(&Fence::new()).unwrap());
        assert!(promises.cover(&Fence::at(a.clone(), 3)).unwrap());
        assert!(!promises.cover(&Fence::at(a, 4)).unwrap());
    }

    #[test]
    fn promised_values_cover_waits_up_to_them() {
        let promises = Promises::default();
        let (a, b) = (semaphore(), semaphore());
        promises.add(&Fence::at(a.clone(), 2));
        promises.add(&Fence::at(a.clone(), 5));
        promises.add(&Fence::at(a.clone(), 4));
        assert_eq!(promises.len(), 1, "one entry per semaphore, at its highest value");
        assert!(promises.cover(&Fence::at(a.clone(), 5)).unwrap());
        assert!(!promises.cover(&Fence::at(a.clone(), 6)).unwrap());
        let mut both = Fence::at(a.clone(), 1);
        both.insert(b.clone(), 1);
        assert!(!promises.cover(&both).unwrap(), "b is neither reached nor promised");
        b.signal(1).unwrap();
        assert!(promises.cover(&both).unwrap());
    }

    #[test]
    fn a_failed_wait_is_an_error() {
        let promises = Promises::default();
        let a = semaphore();
        promises.add(&Fence::at(a.clone(), 1));
        a.fail(Error::aborted("the producer failed"));
        let error = promises.cover(&Fence::at(a, 1)).unwrap_err();
        assert!(error.to_string().contains("the producer failed"), "{error}");
    }

    #[test]
    fn kept_failed_and_dropped_promises_are_forgotten() {
        let promises = Promises::default();
        let (kept, pending, failed, dropped) = (semaphore(), semaphore(), semaphore(), semaphore());
        for semaphore in [&kept, &pending, &failed, &dropped] {
            promises.add(&Fence::at(semaphore.clone(), 2));
        }
        kept.signal(2).unwrap();
        pending.signal(1).unwrap();
        failed.fail(Error::aborted("failed"));
        drop(dropped);
        promises.forget_kept();
        assert_eq!(promises.len(), 1);
        assert!(promises.cover(&Fence::at(pending, 2)).unwrap());
    }
}
