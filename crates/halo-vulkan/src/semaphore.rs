//! HAL timeline semaphores as Vulkan timeline semaphores.
//!
//! Vulkan has no failed state, so a failure is kept beside the semaphore and the timeline is
//! raised as far as Vulkan allows, which releases every host and device waiter; each of them then
//! sees the failure (host waits and queries report it, submissions that wait on it fail their own
//! signals).

use crate::completion::create_timeline;
use crate::device::DeviceShared;
use crate::status::{vk_error, VkResultExt};
use ash::vk;
use halo_hal::semaphore::TimepointCallback;
use halo_hal::{Error, Result, Semaphore, Timeout};
use std::any::Any;
use std::sync::{Arc, OnceLock};

/// A timeline semaphore of one Vulkan device.
///
/// Ownership: keeps its device alive; pending `on_reached` callbacks keep the `VkSemaphore`
/// alive. Threading: any thread.
pub struct VulkanSemaphore(Arc<Timeline>);

/// The `VkSemaphore` and its failure.
struct Timeline {
    shared: Arc<DeviceShared>,
    raw: vk::Semaphore,
    failure: OnceLock<Error>,
}

impl VulkanSemaphore {
    pub(crate) fn new(shared: Arc<DeviceShared>, initial_value: u64) -> Result<Arc<Self>> {
        let raw = create_timeline(&shared.raw, initial_value)?;
        Ok(Arc::new(VulkanSemaphore(Arc::new(Timeline {
            shared,
            raw,
            failure: OnceLock::new(),
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

    /// The failure, if the semaphore failed.
    pub(crate) fn failure(&self) -> Option<&Error> {
        self.0.failure.get()
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
        self.0.check_failure()?;
        let current = self.0.counter()?;
        if value <= current {
            return Err(Error::out_of_range(format!(
                "semaphore signal to {value} is not above its current value {current}"
            )));
        }
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.0.raw).value(value);
        // SAFETY: the semaphore is alive and the value rises, as Vulkan requires.
        unsafe { self.0.shared.raw.signal_semaphore(&info) }.or_vk("vkSignalSemaphore")
    }

    fn fail(&self, error: Error) {
        let timeline = &self.0;
        if timeline.failure.set(error).is_err() {
            return;
        }
        // Release every waiter: raise the timeline as far as Vulkan allows from where it is.
        if let Ok(current) = timeline.counter() {
            let top = current.saturating_add(timeline.shared.max_timeline_difference);
            if top > current {
                let info = vk::SemaphoreSignalInfo::default().semaphore(timeline.raw).value(top);
                // SAFETY: as in `signal`. If it fails, waiters are left to their timeouts, which is
                // all that can be done.
                let _ = unsafe { timeline.shared.raw.signal_semaphore(&info) };
            }
        }
    }

    fn wait(&self, value: u64, timeout: Timeout) -> Result<()> {
        let timeline = &self.0;
        timeline.check_failure()?;
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
        if let Some(error) = self.failure() {
            return callback(Err(error.clone()));
        }
        if self.0.counter().is_ok_and(|current| current >= value) {
            return callback(Ok(()));
        }
        let timeline = self.0.clone();
        self.0.shared.waiter.when_reached(
            self.0.raw,
            value,
            Box::new(move |reached| callback(reached.and_then(|()| timeline.check_failure()))),
        );
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
