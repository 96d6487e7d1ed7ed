//! One thread per device that runs host work when timeline semaphores reach values: releasing
//! what a finished submission used, signalling semaphores of other drivers, and
//! `Semaphore::on_reached` callbacks.
//!
//! The thread blocks in `vkWaitSemaphores` on every pending timepoint at once, plus a private
//! "wake" timeline that is signalled whenever a timepoint is added, so it never polls.

use crate::status::VkResultExt;
use ash::vk;
use halo_hal::{Error, Result};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Host work run when a timepoint is reached (`Ok`) or when the device shuts down first (`Err`).
pub(crate) type Action = Box<dyn FnOnce(Result<()>) + Send>;

struct Pending {
    semaphore: vk::Semaphore,
    value: u64,
    action: Action,
}

struct State {
    pending: Vec<Pending>,
    /// Last value signalled on the wake timeline.
    wake_value: u64,
    shutdown: bool,
}

/// The pending timepoints of one device and the thread that waits on them.
pub(crate) struct Waiter {
    device: ash::Device,
    wake: vk::Semaphore,
    state: Mutex<State>,
}

impl Waiter {
    /// Creates the waiter and starts its thread.
    ///
    /// Ownership: `device` must stay alive until [`Waiter::shutdown`] has returned.
    pub(crate) fn start(device: ash::Device) -> Result<(Arc<Waiter>, JoinHandle<()>)> {
        let wake = create_timeline(&device, 0)?;
        let waiter = Arc::new(Waiter {
            device,
            wake,
            state: Mutex::new(State {
                pending: Vec::new(),
                wake_value: 0,
                shutdown: false,
            }),
        });
        let thread = {
            let waiter = waiter.clone();
            std::thread::Builder::new()
                .name("halo-vulkan-waiter".into())
                .spawn(move || waiter.run())
        };
        match thread {
            Ok(thread) => Ok((waiter, thread)),
            Err(e) => {
                waiter.destroy();
                Err(Error::resource_exhausted(format!(
                    "starting the Vulkan waiter thread: {e}"
                )))
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `action` once `semaphore` reaches `value`.
    pub(crate) fn when_reached(&self, semaphore: vk::Semaphore, value: u64, action: Action) {
        let mut state = self.lock();
        if state.shutdown {
            drop(state);
            action(Err(Error::cancelled(
                "the Vulkan device was destroyed before the timepoint",
            )));
            return;
        }
        state.pending.push(Pending {
            semaphore,
            value,
            action,
        });
        self.wake_locked(&mut state);
    }

    /// Signals the wake timeline; under the state lock so values rise in order.
    fn wake_locked(&self, state: &mut State) {
        state.wake_value += 1;
        let info = vk::SemaphoreSignalInfo::default()
            .semaphore(self.wake)
            .value(state.wake_value);
        // SAFETY: the wake semaphore lives as long as the waiter; values only rise (under lock).
        // A failure has no one to report to: the thread then wakes on the other timepoints only.
        let _ = unsafe { self.device.signal_semaphore(&info) };
    }

    fn run(&self) {
        loop {
            let (mut semaphores, mut values) = (vec![self.wake], Vec::new());
            {
                let state = self.lock();
                if state.shutdown {
                    return;
                }
                values.push(state.wake_value + 1);
                for pending in &state.pending {
                    semaphores.push(pending.semaphore);
                    values.push(pending.value);
                }
            }
            let info = vk::SemaphoreWaitInfo::default()
                .flags(vk::SemaphoreWaitFlags::ANY)
                .semaphores(&semaphores)
                .values(&values);
            // SAFETY: every semaphore is alive: pending ones are owned by whoever registered them
            // until their action runs, and the wake semaphore by this waiter.
            let waited = unsafe { self.device.wait_semaphores(&info, u64::MAX) };
            if waited.is_err() {
                // Device loss: fail everything still pending.
                let pending = std::mem::take(&mut self.lock().pending);
                for p in pending {
                    (p.action)(Err(Error::internal(
                        "waiting on the Vulkan device failed (device lost?)",
                    )));
                }
                continue;
            }
            self.run_reached();
        }
    }

    fn run_reached(&self) {
        let reached: Vec<Pending> = {
            let mut state = self.lock();
            let (reached, waiting) = std::mem::take(&mut state.pending).into_iter().partition(|p| {
                // SAFETY: the semaphore is alive while its timepoint is pending.
                unsafe { self.device.get_semaphore_counter_value(p.semaphore) }.is_ok_and(|value| value >= p.value)
            });
            state.pending = waiting;
            reached
        };
        for pending in reached {
            (pending.action)(Ok(()));
        }
    }

    /// Stops the thread (the caller joins it) and cancels what is still pending.
    pub(crate) fn shutdown(&self) {
        let pending = {
            let mut state = self.lock();
            state.shutdown = true;
            self.wake_locked(&mut state);
            std::mem::take(&mut state.pending)
        };
        for p in pending {
            (p.action)(Err(Error::cancelled(
                "the Vulkan device was destroyed before the timepoint",
            )));
        }
    }
}

impl Waiter {
    /// Destroys the wake semaphore: called by the device's owner once, after [`Waiter::shutdown`]
    /// and joining the thread, before the `VkDevice` is destroyed.
    pub(crate) fn destroy(&self) {
        // SAFETY: the thread has stopped, so nothing waits on or signals the semaphore, and the
        // device is still alive (see the doc).
        unsafe { self.device.destroy_semaphore(self.wake, None) };
    }
}

/// A new timeline semaphore at `initial`.
pub(crate) fn create_timeline(device: &ash::Device, initial: u64) -> Result<vk::Semaphore> {
    let mut kind = vk::SemaphoreTypeCreateInfo::default()
        .semaphore_type(vk::SemaphoreType::TIMELINE)
        .initial_value(initial);
    let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
    // SAFETY: the device is alive and the create info chain lives for the call.
    unsafe { device.create_semaphore(&info, None) }.or_vk("vkCreateSemaphore (timeline)")
}
