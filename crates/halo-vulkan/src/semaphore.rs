//! HAL timeline semaphores as Vulkan timeline semaphores.
//!
//! Vulkan has no failed state, so a failure is kept beside the semaphore and the timeline is
//! raised as far as Vulkan allows, which releases every host and device waiter; each of them then
//! sees the failure (host waits and queries report it, submissions that wait on it fail their own
//! signals). Vulkan forbids raising a timeline past a value that a submitted batch will still
//! signal, so while such batches are pending the raise stops below them and goes on once they
//! complete.
//!
//! `on_reached` callbacks run when something raises the semaphore: a host signal, a failure, or
//! the completion of a batch that signalled it (the device's waiter reports those).

use crate::completion::create_timeline;
use crate::device::DeviceShared;
use crate::status::{vk_error, VkResultExt};
use ash::vk;
use halo_hal::semaphore::TimepointCallback;
use halo_hal::{Error, PendingTimepoints, Result, Semaphore, Timeout};
use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// A timeline semaphore of one Vulkan device.
///
/// Ownership: keeps its device alive. Threading: any thread.
pub struct VulkanSemaphore(Arc<Timeline>);

/// The `VkSemaphore`, its failure and who waits for it.
struct Timeline {
    shared: Arc<DeviceShared>,
    raw: vk::Semaphore,
    failure: OnceLock<Error>,
    watch: Mutex<Watch>,
}

/// What the host knows is coming for a semaphore.
#[derive(Default)]
struct Watch {
    /// Values that submitted batches will signal, until the waiter sees each batch complete.
    pending_signals: Vec<u64>,
    /// `on_reached` callbacks and their values.
    callbacks: PendingTimepoints,
}

impl VulkanSemaphore {
    pub(crate) fn new(shared: Arc<DeviceShared>, initial_value: u64) -> Result<Arc<Self>> {
        let raw = create_timeline(&shared.raw, initial_value)?;
        Ok(Arc::new(VulkanSemaphore(Arc::new(Timeline {
            shared,
            raw,
            failure: OnceLock::new(),
            watch: Mutex::default(),
        }))))
    }

    /// The `VkSemaphore`.
    pub(crate) fn raw(&self) -> vk::Semaphore {
        self.0.raw
    }

    /// Whether this semaphore belongs to the device `shared`.
    pub(crate) fn is_on(&self, shared: &Arc<DeviceShared>) -> bool {
        Arc::ptr_eq(&self.0.shared, shared)
    }

    /// Notes that a batch about to be submitted signals `value`; `false` (and nothing noted) when
    /// the semaphore already failed, in which case the batch must not signal it.
    pub(crate) fn expect_signal(&self, value: u64) -> bool {
        let mut watch = self.0.watch();
        if self.0.failure.get().is_some() {
            return false;
        }
        watch.pending_signals.push(value);
        true
    }

    /// The batch noted by [`Self::expect_signal`] completed (or was never submitted): runs the
    /// callbacks it satisfied and finishes a raise held back for it.
    pub(crate) fn signal_done(&self, value: u64) {
        let timeline = &self.0;
        let mut watch = timeline.watch();
        if let Some(index) = watch.pending_signals.iter().position(|&v| v == value) {
            watch.pending_signals.swap_remove(index);
        }
        if timeline.failure.get().is_some() {
            timeline.release_waiters(&watch);
            return;
        }
        // The batch signalled `value` even if the counter read races behind it.
        let reached = timeline.counter().map_or(value, |current| current.max(value));
        timeline.run_reached(watch, reached);
    }
}

impl Timeline {
    fn counter(&self) -> Result<u64> {
        // SAFETY: the semaphore and its device are alive while `self` is.
        unsafe { self.shared.raw.get_semaphore_counter_value(self.raw) }.or_vk("vkGetSemaphoreCounterValue")
    }

    fn check_failure(&self) -> Result<()> {
        match self.failure.get() {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    fn watch(&self) -> MutexGuard<'_, Watch> {
        self.watch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs (outside the lock) the callbacks for values up to `reached`.
    fn run_reached(&self, mut watch: MutexGuard<'_, Watch>, reached: u64) {
        let due = watch.callbacks.take_reached(reached);
        drop(watch);
        due.run(&self.check_failure());
    }

    /// Polls the counter for up to the device's spin time (bounded by `timeout`); whether it
    /// reached `value`. Waking a thread blocked in `vkWaitSemaphores` costs tens of microseconds
    /// on lavapipe, as much as a small dispatch, so short waits are cheaper watched than slept.
    fn spin_until(&self, value: u64, timeout: Timeout) -> bool {
        let spin = self.shared.spin;
        if spin.is_zero() || timeout == Timeout::Immediate {
            return false;
        }
        let mut until = Instant::now() + spin;
        if let Timeout::Deadline(deadline) = timeout {
            until = until.min(deadline);
        }
        loop {
            if self.counter().is_ok_and(|current| current >= value) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            // Lets the threads that do the work run on this core if they need it.
            std::thread::yield_now();
        }
    }

    /// Raises the failed timeline as far as Vulkan allows: by the largest difference it permits,
    /// but below every value a pending batch will still signal.
    fn release_waiters(&self, watch: &Watch) {
        let Ok(current) = self.counter() else {
            return;
        };
        let mut top = current.saturating_add(self.shared.max_timeline_difference);
        if let Some(lowest) = watch.pending_signals.iter().min() {
            top = top.min(lowest.saturating_sub(1));
        }
        if top > current {
            let info = vk::SemaphoreSignalInfo::default().semaphore(self.raw).value(top);
            // SAFETY: the semaphore is alive and `top` rises without passing a pending signal. If
            // it fails, waiters are left to their timeouts, which is all that can be done.
            let _ = unsafe { self.shared.raw.signal_semaphore(&info) };
        }
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        self.shared.retire_semaphore(self.raw);
    }
}

impl Semaphore for VulkanSemaphore {
    fn query(&self) -> Result<u64> {
        self.0.check_failure()?;
        self.0.counter()
    }

    fn signal(&self, value: u64) -> Result<()> {
        let timeline = &self.0;
        timeline.check_failure()?;
        let current = timeline.counter()?;
        if value <= current {
            return Err(Error::out_of_range(format!(
                "semaphore signal to {value} is not above its current value {current}"
            )));
        }
        let info = vk::SemaphoreSignalInfo::default().semaphore(timeline.raw).value(value);
        // SAFETY: the semaphore is alive and the value rises, as Vulkan requires.
        unsafe { timeline.shared.raw.signal_semaphore(&info) }.or_vk("vkSignalSemaphore")?;
        timeline.run_reached(timeline.watch(), value);
        Ok(())
    }

    fn fail(&self, error: Error) {
        let timeline = &self.0;
        let mut watch = timeline.watch();
        if timeline.failure.set(error.clone()).is_err() {
            return;
        }
        timeline.release_waiters(&watch);
        let callbacks = watch.callbacks.take_all();
        drop(watch);
        callbacks.run(&Err(error));
    }

    fn wait(&self, value: u64, timeout: Timeout) -> Result<()> {
        let timeline = &self.0;
        timeline.check_failure()?;
        if timeline.spin_until(value, timeout) {
            return timeline.check_failure();
        }
        let nanos = crate::status::timeout_nanos(timeout);
        let semaphores = [timeline.raw];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        // SAFETY: the semaphore is alive for the call.
        match unsafe { timeline.shared.raw.wait_semaphores(&info, nanos) } {
            Ok(()) => timeline.check_failure(),
            Err(vk::Result::TIMEOUT) => Err(Error::deadline_exceeded(format!(
                "semaphore did not reach value {value} in time (it is at {})",
                timeline.counter().unwrap_or(0)
            ))),
            Err(result) => Err(vk_error(result, "vkWaitSemaphores")),
        }
    }

    fn on_reached(&self, value: u64, callback: TimepointCallback) {
        let timeline = &self.0;
        let mut watch = timeline.watch();
        if let Some(error) = timeline.failure.get() {
            drop(watch);
            return callback(Err(error.clone()));
        }
        if timeline.counter().is_ok_and(|current| current >= value) {
            drop(watch);
            return callback(Ok(()));
        }
        watch.callbacks.add(value, callback);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
