//! Queue submissions: waits, work and signals, with what the work uses kept alive until the
//! device finishes it.
//!
//! Waits on this device's semaphores and all signals of them go to Vulkan as timeline values
//! (wait-before-signal included). Semaphores of other drivers are host timelines: a submission
//! whose foreign waits are not yet reached is handed to a thread that waits for them and then
//! submits; foreign signals are raised by the device's waiter thread when the batch completes.

use crate::command_buffer::{record, Recorded};
use crate::device::DeviceShared;
use crate::semaphore::VulkanSemaphore;
use halo_hal::{Binding, Buffer, CommandBuffer, Error, Fence, Result, Semaphore, Timeout};
use std::sync::Arc;

/// What a submission executes or holds.
pub(crate) enum Work {
    /// Only waits and signals.
    Nothing,
    /// A command buffer and its binding table.
    Commands(Arc<CommandBuffer>, Vec<Binding<'static>>),
    /// A buffer released once the waits are met (queue dealloca).
    Keep(#[expect(dead_code, reason = "held, never read: dropping it releases the buffer")] Buffer),
}

/// This device's semaphore behind `semaphore`, if it is one.
fn native<'a>(semaphore: &'a Arc<dyn Semaphore>, shared: &Arc<DeviceShared>) -> Option<&'a VulkanSemaphore> {
    semaphore
        .as_any()
        .downcast_ref::<VulkanSemaphore>()
        .filter(|s| s.is_on(shared))
}

/// Fails every semaphore of `fence` with `error`.
fn fail_all(fence: &Fence, error: &Error) {
    for (semaphore, _) in fence.timepoints() {
        semaphore.fail(error.clone());
    }
}

/// Submits `work` after `wait`, signalling `signal` when it completes.
///
/// # Errors
/// What recording or submitting reports; the signal fence's semaphores are failed with it too. A
/// wait semaphore that already failed fails the signals instead of running the work.
pub(crate) fn submit(shared: &Arc<DeviceShared>, wait: &Fence, signal: &Fence, work: Work) -> Result<()> {
    let mut foreign_pending = false;
    for (semaphore, value) in wait.timepoints() {
        match semaphore.query() {
            Err(error) => {
                fail_all(signal, &error);
                return Ok(());
            }
            Ok(current) => foreign_pending |= current < *value && native(semaphore, shared).is_none(),
        }
    }
    if !foreign_pending {
        if matches!(work, Work::Nothing | Work::Keep(_)) && all_reached(wait) {
            // Nothing for the device to do: a trip through the queue would only add its latency.
            return signal_on_host(signal);
        }
        return submit_now(shared, wait, signal, work);
    }
    let (shared, wait, signal) = (shared.clone(), wait.clone(), signal.clone());
    std::thread::Builder::new()
        .name("halo-vulkan-deferred".into())
        .spawn(move || {
            let waited = wait
                .timepoints()
                .iter()
                .filter(|(semaphore, _)| native(semaphore, &shared).is_none())
                .try_for_each(|(semaphore, value)| semaphore.wait(*value, Timeout::Infinite));
            match waited {
                Ok(()) => {
                    // Errors reach the signal semaphores inside `submit_now`.
                    let _ = submit_now(&shared, &wait, &signal, work);
                }
                Err(error) => fail_all(&signal, &error),
            }
        })
        .map_err(|e| Error::resource_exhausted(format!("starting a thread for a deferred submission: {e}")))?;
    Ok(())
}

/// Whether every timepoint of `fence` is reached now.
fn all_reached(fence: &Fence) -> bool {
    fence
        .timepoints()
        .iter()
        .all(|(semaphore, value)| semaphore.query().is_ok_and(|current| current >= *value))
}

/// Signals every timepoint of `fence` from the host.
fn signal_on_host(fence: &Fence) -> Result<()> {
    for (semaphore, value) in fence.timepoints() {
        semaphore.signal(*value)?;
    }
    Ok(())
}

/// Records and submits at once: every foreign wait is already reached.
fn submit_now(shared: &Arc<DeviceShared>, wait: &Fence, signal: &Fence, work: Work) -> Result<()> {
    let outcome = record_and_submit(shared, wait, signal, work);
    if let Err(error) = &outcome {
        fail_all(signal, error);
    }
    outcome
}

fn record_and_submit(shared: &Arc<DeviceShared>, wait: &Fence, signal: &Fence, work: Work) -> Result<()> {
    let recorded: Option<Recorded> = match &work {
        Work::Commands(command_buffer, table) => Some(record(shared, command_buffer.commands()?, table)?),
        Work::Nothing | Work::Keep(_) => None,
    };
    let waits: Vec<_> = wait
        .timepoints()
        .iter()
        .filter_map(|(semaphore, value)| native(semaphore, shared).map(|s| (s.raw(), *value)))
        .collect();
    // Native signals go to Vulkan (each semaphore told to expect it; one that already failed is
    // left out), foreign ones are raised from the host when the batch completes. So are all
    // signals of a batch with indirect dispatches, whose success the host learns only after it
    // completes.
    let checked_on_host = recorded.as_ref().is_some_and(Recorded::has_indirect_dispatches);
    let mut signals = Vec::new();
    let mut native_signals = Vec::new();
    let mut host_signals = Vec::new();
    for (semaphore, value) in signal.timepoints() {
        match native(semaphore, shared) {
            Some(_) if checked_on_host => host_signals.push((semaphore.clone(), *value)),
            Some(native) if native.expect_signal(*value) => {
                signals.push((native.raw(), *value));
                native_signals.push((semaphore.clone(), *value));
            }
            Some(_) => {}
            None => host_signals.push((semaphore.clone(), *value)),
        }
    }
    let command_buffer = recorded.as_ref().map(Recorded::command_buffer);
    let done = match shared.submit_batch(command_buffer, &waits, &signals) {
        Ok(done) => done,
        Err(error) => {
            // Failed first, so that dropping the noted signals releases waiters with the error
            // instead of reporting values that were never signalled.
            fail_all(signal, &error);
            signals_done(&native_signals);
            return Err(error);
        }
    };
    // Covers the batch from its submission to the host's learning of its completion.
    let span = match &work {
        Work::Commands(command_buffer, _) => shared.track.execute(command_buffer),
        Work::Nothing | Work::Keep(_) => tracing::Span::none(),
    };
    let (wait, signal, device) = (wait.clone(), signal.clone(), shared.clone());
    shared.waiter.after_progress(
        done,
        Box::new(move |outcome| {
            drop(span);
            let guard_outcome = match (&outcome, &recorded) {
                (Ok(()), Some(recorded)) => recorded.check(),
                _ => Ok(()),
            };
            drop((recorded, work));
            device.destroy_retired_semaphores();
            let failed_wait = wait.timepoints().iter().find_map(|(s, _)| s.query().err());
            match outcome.err().or(failed_wait).or(guard_outcome.err()) {
                None => {
                    for (semaphore, value) in host_signals {
                        if let Err(error) = semaphore.signal(value) {
                            semaphore.fail(error);
                        }
                    }
                }
                Some(error) => fail_all(&signal, &error),
            }
            signals_done(&native_signals);
        }),
    );
    Ok(())
}

/// Tells each native semaphore that the batch signalling it is finished.
fn signals_done(signals: &[(Arc<dyn Semaphore>, u64)]) {
    for (semaphore, value) in signals {
        if let Some(native) = semaphore.as_any().downcast_ref::<VulkanSemaphore>() {
            native.signal_done(*value);
        }
    }
}
