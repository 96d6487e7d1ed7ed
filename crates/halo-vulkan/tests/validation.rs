//! Strict validation really is on in the Vulkan tests: misuse that halo passes straight to Vulkan
//! comes back as an error naming the validation layer's message.

use halo_hal::{BufferParams, Device, DriverRegistry, Fence, QueueAffinity, Result, Timeout};
use halo_vulkan::Validation;
use std::sync::Arc;
use std::time::Duration;

fn create_device() -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_vulkan::register_driver_with(&mut registry, Validation::Strict);
    registry.create_device("vulkan://")
}

#[test]
fn strict_validation_reports_misuse() {
    let _alone = halo_cts::run_alone();
    let device = match create_device() {
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED strict_validation_reports_misuse: device unavailable: {error}");
            return;
        }
        other => other.expect("creating the Vulkan device"),
    };
    // A timeline may only be signalled upwards; the HAL leaves that to the driver's API, so a
    // submission that signals 3 on a semaphore at 5 reaches vkQueueSubmit and the layer reports it.
    let semaphore = device.create_semaphore(5).unwrap();
    let buffer = device
        .allocator()
        .allocate_buffer(BufferParams::host_mappable(), 16)
        .unwrap();
    let error = device
        .queue_fill(
            QueueAffinity::ANY,
            &Fence::new(),
            &Fence::at(semaphore, 3),
            &buffer,
            0,
            16,
            &[1],
        )
        .unwrap_err();
    assert!(error.message().contains("validation layer reported"), "{error}");
    assert!(error.message().contains("VUID"), "{error}");
    // Executing the bad signal can make lavapipe fail the batch, and failing its semaphore then
    // makes the layer report once more, from the waiter thread. Collect those reports here so that
    // dropping the device (which panics on unreported messages) does not.
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(50));
        let _ = device.wait_idle(Timeout::from(Duration::from_secs(5)));
    }
}
