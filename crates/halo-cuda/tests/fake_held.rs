//! A device is held while long work runs on its stream: over `halo-cuda-fake`, a fill of its
//! slow pattern keeps the stream busy, and nothing behind it can start meanwhile. The fake's
//! busy state is the process's, so this test has its binary to itself.

mod common;

use halo_cuda_fake::{SLOW_FILL, SLOW_WORK};
use halo_hal::{BufferParams, BufferRef, Driver, Fence, QueueAffinity, Timeout};
use std::time::{Duration, Instant};

#[test]
fn the_device_is_held_from_when_long_work_starts_until_it_completes() {
    let driver = common::fake_driver().expect("loading the fake CUDA library");
    let device = driver.create_device("", &Default::default()).unwrap();
    let target = device.allocator().allocate_buffer(BufferParams::default(), 64).unwrap();
    let command_buffer = device.transfer_command_buffer(QueueAffinity::ANY).unwrap();
    command_buffer
        .fill_buffer(BufferRef::whole(&target), &SLOW_FILL.to_le_bytes())
        .unwrap();
    command_buffer.end().unwrap();
    let done = device.create_semaphore(0).unwrap();
    let idle = device.all_held_for();

    let submitted = Instant::now();
    device
        .queue_execute(
            QueueAffinity::ANY,
            &Fence::new(),
            &Fence::at(done.clone(), 1),
            Some(&command_buffer),
            &[],
        )
        .unwrap();
    std::thread::sleep(SLOW_WORK / 2);
    let (held, at_most) = (device.all_held_for(), submitted.elapsed());
    done.wait(1, Timeout::from(Duration::from_secs(60))).unwrap();

    assert_eq!(idle, Duration::ZERO, "nothing was on the stream");
    // The hold starts when the work goes onto the stream, a little after the submission (more
    // on a loaded machine: once 0.7 ms, which an exact half failed by), so half the sleep is
    // the bound that says the work was held while it ran.
    assert!(
        held >= SLOW_WORK / 4 && held <= at_most,
        "held for {held:?} after {at_most:?} of slow work"
    );
    assert_eq!(device.all_held_for(), Duration::ZERO, "the work completed");
}
