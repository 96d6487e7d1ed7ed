//! Device loss without a GPU: over `halo-cuda-fake`, a fill of its faulting pattern poisons the
//! context as a faulting kernel does. The submission fails with the driver's error, later ones
//! fail at once naming the loss, and waiting for the device ends. The poison is the whole
//! process's, so this test has its binary to itself.

mod common;

use halo_hal::{BufferParams, BufferRef, Device, Driver, Fence, QueueAffinity, StatusCode, Timeout};
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(60);

fn fill_and_wait(device: &dyn Device, target: &halo_hal::Buffer, pattern: u32) -> halo_hal::Result<()> {
    let command_buffer = device.transfer_command_buffer(QueueAffinity::ANY)?;
    command_buffer.fill_buffer(BufferRef::whole(target), &pattern.to_le_bytes())?;
    command_buffer.end()?;
    let done = device.create_semaphore(0)?;
    device.queue_execute(
        QueueAffinity::ANY,
        &Fence::new(),
        &Fence::at(done.clone(), 1),
        Some(&command_buffer),
        &[],
    )?;
    done.wait(1, Timeout::from(PATIENCE))
}

#[test]
fn a_fault_loses_the_fake_device_and_later_work_fails_saying_so() {
    let driver = common::fake_driver().expect("loading the fake CUDA library");
    let device = driver.create_device("", &Default::default()).unwrap();
    let target = device.allocator().allocate_buffer(BufferParams::default(), 64).unwrap();
    fill_and_wait(device.as_ref(), &target, 7).expect("the device works before the fault");

    let fault = fill_and_wait(device.as_ref(), &target, halo_cuda_fake::FAULTING_FILL).unwrap_err();
    assert_eq!(fault.code(), StatusCode::DataLoss, "{fault}");
    assert!(fault.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{fault}");

    let lost = fill_and_wait(device.as_ref(), &target, 7).unwrap_err();
    assert_eq!(lost.code(), StatusCode::DataLoss, "{lost}");
    assert!(lost.to_string().contains("device was lost"), "{lost}");
    assert!(lost.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{lost}");
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
}
