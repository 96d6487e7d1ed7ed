//! Waiting for long GPU work leaves the CPU to other threads: over `halo-cuda-fake`, a fill of
//! its slow pattern keeps the device busy, and the driver's completion thread must sleep
//! through it rather than spin. The CPU time measured is the whole process's, so this test has
//! its binary to itself.

mod common;

use halo_cuda_fake::{SLOW_FILL, SLOW_WORK};
use halo_hal::{BufferParams, BufferRef, Driver, Fence, QueueAffinity, Timeout};
use std::time::{Duration, Instant};

/// The process's user and system CPU time so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name, which is in parentheses; utime and stime are the
    // stat's 14th and 15th, counted in clock ticks of 1/100 s.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .expect("a command name")
        .1
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|field| field.parse().expect("a tick count"))
        .collect();
    Duration::from_millis(10 * fields.iter().sum::<u64>())
}

#[test]
fn waiting_for_long_gpu_work_sleeps_instead_of_spinning() {
    let driver = common::fake_driver().expect("loading the fake CUDA library");
    let device = driver.create_device("", &Default::default()).unwrap();
    let target = device.allocator().allocate_buffer(BufferParams::default(), 64).unwrap();
    let command_buffer = device.transfer_command_buffer(QueueAffinity::ANY).unwrap();
    command_buffer
        .fill_buffer(BufferRef::whole(&target), &SLOW_FILL.to_le_bytes())
        .unwrap();
    command_buffer.end().unwrap();
    let done = device.create_semaphore(0).unwrap();

    let (started, cpu_before) = (Instant::now(), cpu_time());
    device
        .queue_execute(
            QueueAffinity::ANY,
            &Fence::new(),
            &Fence::at(done.clone(), 1),
            Some(&command_buffer),
            &[],
        )
        .unwrap();
    done.wait(1, Timeout::from(Duration::from_secs(60))).unwrap();
    let (wall, cpu) = (started.elapsed(), cpu_time() - cpu_before);

    assert!(wall >= SLOW_WORK, "the wait ended after {wall:?}, before the work did");
    assert!(cpu < wall / 4, "waiting {wall:?} for the GPU took {cpu:?} of CPU");
}
