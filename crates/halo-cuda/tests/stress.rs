//! The CUDA driver under load and under failure: long chains of submissions queued in
//! wait-before-signal order from several threads, a failed submission failing what waits on it
//! while the device keeps working, executables whose PTX does not load, and host memory allocated
//! and freed for every value read back, as programs do in loops. Each test runs on a
//! CUDA GPU (saying that it skipped without one) and, but for the PTX one, on the device of
//! `halo-cuda-fake`, so the submission logic is exercised on every CI run.

mod common;

use halo_hal::{
    Buffer, BufferParams, BufferRef, CommandBuffer, Device, DriverRegistry, Error, ExecutableParams, Fence, MemoryType,
    QueueAffinity, Semaphore, Timeout,
};
use std::sync::Arc;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(60);

fn device_or_skip(test: &str) -> Option<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_cuda::register_drivers(&mut registry);
    match registry.create_device("cuda://") {
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED {test}: device unavailable: {error}");
            None
        }
        other => Some(other.expect("creating the CUDA device")),
    }
}

/// The device of the fake CUDA library.
fn fake_device() -> Arc<dyn Device> {
    let driver = common::fake_driver().unwrap();
    halo_hal::Driver::create_device(&driver, "", &Default::default()).unwrap()
}

/// Runs the test body `$name(device)` on a CUDA GPU (skipping without one) and on the fake.
macro_rules! on_gpu_and_fake {
    ($name:ident) => {
        mod $name {
            #[test]
            fn on_cuda() {
                if let Some(device) = super::device_or_skip(concat!(stringify!($name), "::on_cuda")) {
                    super::$name(device);
                }
            }

            #[test]
            fn on_the_fake() {
                super::$name(super::fake_device());
            }
        }
    };
}

on_gpu_and_fake!(ten_thousand_chained_submissions_from_four_threads_complete_in_order);
on_gpu_and_fake!(a_failed_wait_fails_what_follows_and_the_device_keeps_working);
on_gpu_and_fake!(chains_submitted_in_order_follow_each_other_on_the_stream);
on_gpu_and_fake!(freed_host_memory_is_reused_zeroed_and_readbacks_in_a_loop_see_each_value);

fn buffer(device: &dyn Device, bytes: u64) -> Buffer {
    let params = BufferParams {
        memory_type: MemoryType::DEVICE_LOCAL | MemoryType::HOST_VISIBLE,
        ..BufferParams::default()
    };
    device.allocator().allocate_buffer(params, bytes).unwrap()
}

/// A one-shot command buffer that fills word `slot` of `target` with `value`.
fn fill_word(device: &dyn Device, target: &Buffer, slot: u64, value: u32) -> Arc<CommandBuffer> {
    let command_buffer = device.transfer_command_buffer(QueueAffinity::ANY).unwrap();
    command_buffer
        .fill_buffer(BufferRef::direct(target, slot * 4, 4), &value.to_le_bytes())
        .unwrap();
    command_buffer.end().unwrap();
    command_buffer
}

/// A one-shot command buffer that writes `value` into the first word of `first`, then copies
/// that word to `then`.
fn write_then_copy(device: &dyn Device, first: &Buffer, value: u32, then: BufferRef) -> Arc<CommandBuffer> {
    let command_buffer = device.transfer_command_buffer(QueueAffinity::ANY).unwrap();
    command_buffer
        .fill_buffer(BufferRef::direct(first, 0, 4), &value.to_le_bytes())
        .unwrap();
    command_buffer.execution_barrier().unwrap();
    command_buffer
        .copy_buffer(BufferRef::direct(first, 0, 4), then)
        .unwrap();
    command_buffer.end().unwrap();
    command_buffer
}

/// Little-endian u32 words of a host-visible buffer.
fn words(buffer: &Buffer) -> Vec<u32> {
    buffer
        .read_all()
        .unwrap()
        .chunks(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect()
}

fn ten_thousand_chained_submissions_from_four_threads_complete_in_order(device: Arc<dyn Device>) {
    const THREADS: u64 = 4;
    const LINKS: u64 = 2500;
    const SLOTS: u64 = 64;
    // Nothing may start before the host opens the gate, so every submission is queued before
    // the one it waits for has run (most before it was even submitted).
    let gate = device.create_semaphore(0).unwrap();
    let chains: Vec<(Arc<dyn Semaphore>, Buffer)> = (0..THREADS)
        .map(|_| (device.create_semaphore(0).unwrap(), buffer(device.as_ref(), SLOTS * 4)))
        .collect();
    std::thread::scope(|scope| {
        for (thread, (timeline, target)) in chains.iter().enumerate() {
            let (device, gate) = (device.clone(), gate.clone());
            scope.spawn(move || {
                // Links are submitted last first: each waits on the previous link's value.
                for link in (1..=LINKS).rev() {
                    let mut wait = Fence::at(timeline.clone(), link - 1);
                    if link % 7 == 1 {
                        wait.insert(gate.clone(), 1);
                    }
                    let value = (thread as u32) << 16 | link as u32;
                    let command_buffer = fill_word(device.as_ref(), target, link % SLOTS, value);
                    device
                        .queue_execute(
                            QueueAffinity::ANY,
                            &wait,
                            &Fence::at(timeline.clone(), link),
                            Some(&command_buffer),
                            &[],
                        )
                        .unwrap();
                }
            });
        }
    });
    for (timeline, _) in &chains {
        assert_eq!(timeline.query().unwrap(), 0, "a link ran before the gate opened");
    }
    gate.signal(1).unwrap();
    for (thread, (timeline, target)) in chains.iter().enumerate() {
        timeline.wait(LINKS, Timeout::from(PATIENCE)).unwrap();
        // Each slot holds the last link that wrote it: the links ran in chain order.
        let expected: Vec<u32> = (0..SLOTS)
            .map(|slot| {
                let last = (1..=LINKS).rev().find(|link| link % SLOTS == slot).unwrap();
                (thread as u32) << 16 | last as u32
            })
            .collect();
        assert_eq!(words(target), expected, "chain {thread}");
    }
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
}

fn a_failed_wait_fails_what_follows_and_the_device_keeps_working(device: Arc<dyn Device>) {
    let upstream = device.create_semaphore(0).unwrap();
    let downstream = device.create_semaphore(0).unwrap();
    let target = buffer(device.as_ref(), 16);
    let command_buffer = fill_word(device.as_ref(), &target, 0, 7);
    device
        .queue_execute(
            QueueAffinity::ANY,
            &Fence::at(upstream.clone(), 1),
            &Fence::at(downstream.clone(), 1),
            Some(&command_buffer),
            &[],
        )
        .unwrap();
    upstream.fail(Error::aborted("the producer failed"));
    let error = downstream.wait(1, Timeout::from(PATIENCE)).unwrap_err();
    assert!(error.message().contains("the producer failed"), "{error}");
    assert_eq!(words(&target)[0], 0, "the failed submission must not run");

    let fresh = device.create_semaphore(0).unwrap();
    let command_buffer = fill_word(device.as_ref(), &target, 1, 9);
    device
        .queue_execute(
            QueueAffinity::ANY,
            &Fence::new(),
            &Fence::at(fresh.clone(), 1),
            Some(&command_buffer),
            &[],
        )
        .unwrap();
    fresh.wait(1, Timeout::from(PATIENCE)).unwrap();
    assert_eq!(words(&target)[..2], [0, 9]);
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
}

#[test]
fn ptx_that_does_not_compile_is_an_error_naming_the_module() {
    let Some(device) = device_or_skip("ptx_that_does_not_compile_is_an_error_naming_the_module") else {
        return;
    };
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables/grid3d.cuda-nvptx-fb.fb");
    let mut data = std::fs::read(path).unwrap();
    // Misspell an instruction inside the PTX text; the FlatBuffer stays well formed.
    let at = data.windows(4).position(|w| w == b"ret;").expect("the kernel returns");
    data[at..at + 4].copy_from_slice(b"rez;");
    let cache = device.create_executable_cache().unwrap();
    let error = match cache.prepare_executable(&ExecutableParams {
        format: "cuda-nvptx-fb",
        data: &data,
        constants: &[],
    }) {
        Ok(_) => panic!("broken PTX loaded"),
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(
        text.contains("cuModuleLoadDataEx") && text.contains("loading module 0"),
        "{text}"
    );
}

fn chains_submitted_in_order_follow_each_other_on_the_stream(device: Arc<dyn Device>) {
    // Each link waits for the one before, which is already on the stream when it is submitted:
    // the stream's order stands in for the wait. Every link writes through a scratch buffer
    // allocated and released on the queue (from the stream's memory pool).
    const LINKS: u64 = 1000;
    const SLOTS: u64 = 64;
    let timeline = device.create_semaphore(0).unwrap();
    let target = buffer(device.as_ref(), 4 * SLOTS);
    for link in 1..=LINKS {
        let after_previous = Fence::at(timeline.clone(), link - 1);
        let scratch = device
            .queue_alloca(
                QueueAffinity::ANY,
                &after_previous,
                &Fence::new(),
                BufferParams::default(),
                4096,
            )
            .unwrap();
        let target_word = BufferRef::direct(&target, (link % SLOTS) * 4, 4);
        let command_buffer = write_then_copy(device.as_ref(), &scratch, link as u32, target_word);
        let done = Fence::at(timeline.clone(), link);
        device
            .queue_execute(QueueAffinity::ANY, &after_previous, &done, Some(&command_buffer), &[])
            .unwrap();
        device
            .queue_dealloca(QueueAffinity::ANY, &done, &Fence::new(), &scratch)
            .unwrap();
    }
    timeline.wait(LINKS, Timeout::from(PATIENCE)).unwrap();
    for (slot, word) in words(&target).into_iter().enumerate() {
        let last = (1..=LINKS).rev().find(|link| link % SLOTS == slot as u64).unwrap();
        assert_eq!(u64::from(word), last, "slot {slot}");
    }
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
}

fn freed_host_memory_is_reused_zeroed_and_readbacks_in_a_loop_see_each_value(device: Arc<dyn Device>) {
    let pinned = MemoryType::HOST_LOCAL | MemoryType::DEVICE_VISIBLE;
    let managed = MemoryType::DEVICE_LOCAL | MemoryType::HOST_VISIBLE;
    for memory_type in [pinned, managed] {
        let params = BufferParams {
            memory_type,
            ..BufferParams::default()
        };
        let first = device.allocator().allocate_buffer(params, 1000).unwrap();
        first.map_write(0, &[0xAB; 1000]).unwrap();
        let address = first.host_range(0, 1000).unwrap().0;
        drop(first);
        let second = device.allocator().allocate_buffer(params, 1000).unwrap();
        assert_eq!(
            second.host_range(0, 1000).unwrap().0,
            address,
            "{memory_type:?}: the freed block serves the next allocation of its size"
        );
        assert!(
            second.read_all().unwrap().iter().all(|&byte| byte == 0),
            "{memory_type:?}: a reused block is zeroed as a new one is"
        );
        drop(second);
        let kept = || device.query_i64("gpu.recycler", "kept_bytes").unwrap();
        assert_eq!(
            kept(),
            1024,
            "{memory_type:?}: the freed block is kept, at its power-of-two size"
        );
        device.trim().unwrap();
        assert_eq!(kept(), 0, "{memory_type:?}: trim frees what is kept");
    }
    // A program that reads a value back every iteration: a host-visible staging buffer
    // allocated on the queue, copied into, read by the host and released, a thousand times.
    const LINKS: u64 = 1000;
    let source = buffer(device.as_ref(), 4);
    let timeline = device.create_semaphore(0).unwrap();
    let before = device.allocator().statistics().bytes_allocated;
    for link in 1..=LINKS {
        let memory_type = if link % 2 == 0 { pinned } else { managed };
        let params = BufferParams {
            memory_type,
            ..BufferParams::default()
        };
        let after_previous = Fence::at(timeline.clone(), link - 1);
        let staging = device
            .queue_alloca(QueueAffinity::ANY, &after_previous, &Fence::new(), params, 4)
            .unwrap();
        let command_buffer = write_then_copy(device.as_ref(), &source, link as u32, BufferRef::direct(&staging, 0, 4));
        let done = Fence::at(timeline.clone(), link);
        device
            .queue_execute(QueueAffinity::ANY, &after_previous, &done, Some(&command_buffer), &[])
            .unwrap();
        timeline.wait(link, Timeout::from(PATIENCE)).unwrap();
        assert_eq!(words(&staging), [link as u32], "link {link} read back");
        device
            .queue_dealloca(QueueAffinity::ANY, &done, &Fence::new(), &staging)
            .unwrap();
    }
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
    assert_eq!(
        device.allocator().statistics().bytes_allocated,
        before,
        "every staging buffer was freed"
    );
}
