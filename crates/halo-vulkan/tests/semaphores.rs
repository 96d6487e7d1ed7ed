//! Vulkan timeline semaphores beyond what the conformance suite can see: failing a semaphore
//! that a submitted batch will still signal (Vulkan forbids raising it past that value), and
//! `on_reached` callbacks released by the batch that signals them. Strict validation is on, so a
//! forbidden raise fails the final `wait_idle`.

use halo_hal::{Device, DriverRegistry, Error, Fence, QueueAffinity, Result, Semaphore, Timeout};
use halo_vulkan::Validation;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(10);

fn device_or_skip(test: &str) -> Option<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_vulkan::register_driver_with(&mut registry, Validation::Strict);
    match registry.create_device("vulkan://") {
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED {test}: device unavailable: {error}");
            None
        }
        other => Some(other.expect("creating the Vulkan device")),
    }
}

/// A batch that waits for `gate` to reach 1 (not yet signalled), then signals `target` to 1.
fn gated_signal(device: &dyn Device, gate: &Arc<dyn Semaphore>, target: &Arc<dyn Semaphore>) {
    device
        .queue_barrier(
            QueueAffinity::ANY,
            &Fence::at(gate.clone(), 1),
            &Fence::at(target.clone(), 1),
        )
        .unwrap();
}

/// `on_reached(value)` on `semaphore`, its outcome delivered to the returned receiver.
fn watch(semaphore: &Arc<dyn Semaphore>, value: u64) -> mpsc::Receiver<Result<()>> {
    let (sender, receiver) = mpsc::channel();
    semaphore.on_reached(
        value,
        Box::new(move |outcome| {
            let _ = sender.send(outcome);
        }),
    );
    receiver
}

#[test]
fn failing_a_semaphore_a_pending_batch_signals_is_valid_and_reported() {
    let _alone = halo_cts::run_alone();
    let Some(device) = device_or_skip("failing_a_semaphore_a_pending_batch_signals_is_valid_and_reported") else {
        return;
    };
    let gate = device.create_semaphore(0).unwrap();
    let target = device.create_semaphore(0).unwrap();
    gated_signal(device.as_ref(), &gate, &target);
    let watcher = watch(&target, 5);

    target.fail(Error::aborted("producer gave up"));
    let outcome = watcher
        .recv_timeout(PATIENCE)
        .expect("the callback runs at the failure");
    assert!(outcome.unwrap_err().message().contains("producer gave up"));

    // Let the pending batch run: its signal of 1 completes, then the held-back raise happens.
    gate.signal(1).unwrap();
    let error = target.wait(10, Timeout::from(PATIENCE)).unwrap_err();
    assert!(error.message().contains("producer gave up"), "{error}");
    let error = target.query().unwrap_err();
    assert!(error.message().contains("producer gave up"), "{error}");
    // Strict validation: any report of an invalid raise fails here.
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
}

#[test]
fn batches_release_on_reached_callbacks_of_what_they_signal() {
    let _alone = halo_cts::run_alone();
    let Some(device) = device_or_skip("batches_release_on_reached_callbacks_of_what_they_signal") else {
        return;
    };
    let gate = device.create_semaphore(0).unwrap();
    let target = device.create_semaphore(0).unwrap();
    gated_signal(device.as_ref(), &gate, &target);
    let reached = watch(&target, 1);
    let beyond = watch(&target, 2);
    assert!(reached.try_recv().is_err(), "nothing signalled the semaphore yet");

    gate.signal(1).unwrap();
    reached
        .recv_timeout(PATIENCE)
        .expect("the batch's completion runs the callback")
        .unwrap();
    assert!(beyond.try_recv().is_err(), "value 2 is not reached");
    target.signal(2).unwrap();
    beyond.recv_timeout(PATIENCE).expect("a host signal runs it").unwrap();
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
}
