//! One thread per device that runs host work once submitted batches complete: releasing what a
//! batch used, signalling semaphores of other drivers, and running the `on_reached` callbacks of
//! the semaphores a batch signalled.
//!
//! The thread waits on the device's progress timeline alone, which every batch signals in
//! submission order. Waiting on many semaphores at once (`VK_SEMAPHORE_WAIT_ANY`) would be the
//! general design, but Mesa implements that by polling each semaphore in a loop for as long as
//! the wait lasts, which is a core lost for every idle device.
//!
//! While a batch is in flight the thread first polls the timeline for a while (`poll_us`, a
//! device option) and only then blocks: on lavapipe a host thread kept busy while the device works
//! made batches of 64 small dispatches 2-3 times faster than a blocked one (the CPU cores never
//! fall idle between the device's own threads), and on real GPUs polling reports completion
//! sooner. Polling is bounded, so a long-running batch costs at most that much host time.

use crate::status::{vk_error, VkResultExt};
use ash::vk;
use halo_hal::held::HeldSince;
use halo_hal::{Error, Result};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Spin-loop hints between two reads of the progress timeline while polling (about a
/// microsecond or two on current x86 cores).
const POLL_PAUSE_SPINS: u32 = 32;

/// Host work run when a batch completes (`Ok`), or when the device is lost or destroyed first.
pub(crate) type Action = Box<dyn FnOnce(Result<()>) + Send>;

struct State {
    /// Actions, the progress value that releases each and when its batch was submitted.
    pending: Vec<(u64, Instant, Action)>,
    shutdown: bool,
}

/// The actions waiting for batches of one device, and the thread that runs them.
pub(crate) struct Waiter {
    device: ash::Device,
    progress: vk::Semaphore,
    /// How long to poll for a batch before blocking.
    poll: Duration,
    state: Mutex<State>,
    /// Wakes the thread when its first action arrives or at shutdown.
    work: Condvar,
    /// Since when the batch the thread waits for has been running: the queue runs batches in
    /// order, so while it runs nothing behind it starts.
    pub(crate) front: HeldSince,
}

impl Waiter {
    /// Creates the waiter and starts its thread.
    ///
    /// Ownership: `device` and `progress` must stay alive until [`Waiter::shutdown`] has returned
    /// and the thread was joined.
    pub(crate) fn start(
        device: ash::Device,
        progress: vk::Semaphore,
        poll: Duration,
    ) -> Result<(Arc<Waiter>, JoinHandle<()>)> {
        let waiter = Arc::new(Waiter {
            device,
            progress,
            poll,
            state: Mutex::new(State {
                pending: Vec::new(),
                shutdown: false,
            }),
            work: Condvar::new(),
            front: HeldSince::default(),
        });
        let thread = {
            let waiter = waiter.clone();
            std::thread::Builder::new()
                .name("halo-vulkan-waiter".into())
                .spawn(move || waiter.run())
        };
        let thread =
            thread.map_err(|e| Error::resource_exhausted(format!("starting the Vulkan waiter thread: {e}")))?;
        Ok((waiter, thread))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `action` once the progress timeline reaches `value` (a batch submitted now).
    pub(crate) fn after_progress(&self, value: u64, action: Action) {
        let submitted = Instant::now();
        let mut state = self.lock();
        if state.shutdown {
            drop(state);
            return action(Err(cancelled()));
        }
        state.pending.push((value, submitted, action));
        if state.pending.len() == 1 {
            self.work.notify_one();
        }
    }

    fn run(&self) {
        let mut last_completed = Instant::now();
        while let Some((target, submitted)) = self.next_target() {
            // It started once it was submitted and the batches before it completed.
            self.front.hold(submitted.max(last_completed));
            self.poll_for(target);
            let semaphores = [self.progress];
            let values = [target];
            let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
            // SAFETY: the progress semaphore outlives this thread (see `start`).
            let completed = match unsafe { self.device.wait_semaphores(&info, u64::MAX) } {
                // SAFETY: as above.
                Ok(()) => unsafe { self.device.get_semaphore_counter_value(self.progress) }
                    .or_vk("vkGetSemaphoreCounterValue"),
                Err(result) => Err(vk_error(result, "waiting for the Vulkan queue")),
            };
            last_completed = Instant::now();
            self.front.release();
            let done: Vec<Action> = {
                let mut state = self.lock();
                let (done, waiting) = std::mem::take(&mut state.pending)
                    .into_iter()
                    .partition(|(value, _, _)| completed.as_ref().map_or(true, |completed| value <= completed));
                state.pending = waiting;
                done.into_iter().map(|(_, _, action)| action).collect()
            };
            // After device loss every action fails with the reason.
            let outcome = completed.map(|_| ());
            for action in done {
                action(outcome.clone());
            }
        }
    }

    /// Polls the progress timeline until it reaches `target` or the polling time is over.
    fn poll_for(&self, target: u64) {
        let until = Instant::now() + self.poll;
        while Instant::now() < until {
            // SAFETY: the progress semaphore outlives this thread (see `start`).
            let completed = unsafe { self.device.get_semaphore_counter_value(self.progress) };
            if completed.map_or(true, |value| value >= target) {
                return;
            }
            // Each read may take the driver's lock on the timeline; reading back to back would
            // contend with the queue thread that signals it.
            for _ in 0..POLL_PAUSE_SPINS {
                std::hint::spin_loop();
            }
        }
    }

    /// The lowest pending progress value and when its batch was submitted, blocking while there
    /// is none; `None` at shutdown.
    fn next_target(&self) -> Option<(u64, Instant)> {
        let mut state = self.lock();
        loop {
            if let Some(target) = state
                .pending
                .iter()
                .map(|&(value, submitted, _)| (value, submitted))
                .min()
            {
                return Some(target);
            }
            if state.shutdown {
                return None;
            }
            state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Stops the thread (the caller joins it) and cancels what is still pending. Called once the
    /// queue has drained, so the thread is not stuck in a wait.
    pub(crate) fn shutdown(&self) {
        let pending = {
            let mut state = self.lock();
            state.shutdown = true;
            self.work.notify_one();
            std::mem::take(&mut state.pending)
        };
        for (_, _, action) in pending {
            action(Err(cancelled()));
        }
    }
}

fn cancelled() -> Error {
    Error::cancelled("the Vulkan device was destroyed before its work completed")
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
