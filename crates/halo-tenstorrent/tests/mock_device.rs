//! The mock device through the HAL: where buffers land, memory the host cannot map, and the two
//! queues ordered by device-side events.

use halo_hal::{
    transfer, Buffer, BufferParams, BufferUsage, Device, DeviceParams, Driver, Fence, MemoryType, QueueAffinity,
    Semaphore, StatusCode, Timeout, WaitMode,
};
use halo_tenstorrent::allocator::memory_kind;
use halo_tenstorrent::memory::MemoryKind;
use halo_tenstorrent::{TenstorrentDevice, TenstorrentDriver};
use std::sync::Arc;
use std::time::Duration;

fn mock(params: &[(&str, &str)]) -> Arc<dyn Device> {
    let params: DeviceParams = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    TenstorrentDriver.create_device("mock", &params).unwrap()
}

fn statistics(device: &Arc<dyn Device>) -> halo_tenstorrent::TenstorrentStatistics {
    device
        .as_any()
        .downcast_ref::<TenstorrentDevice>()
        .unwrap()
        .statistics()
}

fn storage(device: &Arc<dyn Device>, size: u64) -> halo_hal::Result<Buffer> {
    device.allocator().allocate_buffer(BufferParams::default(), size)
}

#[test]
fn buffers_land_in_the_kind_the_rules_give_and_free_restores_capacity() {
    // 2×2 cores: 4 × (1331 - 256) KiB of shards, 4 × 256 KiB interleaved, 16 MiB DRAM.
    let device = mock(&[("grid", "2x2"), ("dram", "16MiB")]);
    let small = storage(&device, 4096).unwrap();
    assert_eq!(memory_kind(&small), Some(MemoryKind::L1Interleaved));
    let sharded = storage(&device, 3 << 20).unwrap();
    assert_eq!(memory_kind(&sharded), Some(MemoryKind::L1Sharded));
    let constants = device
        .allocator()
        .allocate_buffer(
            BufferParams {
                usage: BufferUsage::TRANSFER,
                ..BufferParams::default()
            },
            1 << 20,
        )
        .unwrap();
    assert_eq!(memory_kind(&constants), Some(MemoryKind::Dram));
    let staging = device
        .allocator()
        .allocate_buffer(BufferParams::host_mappable(), 1 << 20)
        .unwrap();
    assert_eq!(memory_kind(&staging), None, "host memory is no memory kind of the chip");

    // The sharded L1 has about 1.2 MiB left: a 4 MiB buffer (1 MiB per core) spills to DRAM, and
    // once DRAM is full too the allocation fails naming both kinds.
    let mut spilled = Vec::new();
    let error = loop {
        match storage(&device, 4 << 20) {
            Ok(buffer) => {
                assert_eq!(memory_kind(&buffer), Some(MemoryKind::Dram));
                spilled.push(buffer);
            }
            Err(error) => break error,
        }
    };
    assert_eq!(spilled.len(), 3, "16 MiB of DRAM less 1 MiB of constants");
    assert_eq!(error.code(), StatusCode::ResourceExhausted);
    let message = error.to_string();
    for what in ["L1 sharded", "DRAM", "4194304"] {
        assert!(message.contains(what), "{message}");
    }
    let dram_in_use = |device: &Arc<dyn Device>| {
        statistics(device)
            .memory
            .iter()
            .find(|u| u.kind == MemoryKind::Dram)
            .unwrap()
            .in_use
    };
    let before = dram_in_use(&device);
    spilled.pop();
    assert_eq!(dram_in_use(&device), before - (4 << 20));
    assert_eq!(memory_kind(&storage(&device, 4 << 20).unwrap()), Some(MemoryKind::Dram));
}

#[test]
fn no_leak_across_ten_thousand_allocations() {
    let device = mock(&[("grid", "2x2"), ("dram", "16MiB")]);
    for round in 0..10_000u64 {
        let size = 1 + (round * 7919) % (6 << 20);
        drop(storage(&device, size).unwrap());
    }
    assert!(statistics(&device).memory.iter().all(|u| u.in_use == 0));
    assert_eq!(device.allocator().statistics().bytes_allocated, 0);
}

#[test]
fn device_memory_is_not_mappable_and_bytes_travel_through_the_queues() {
    let device = mock(&[]);
    let buffer = storage(&device, 1024).unwrap();
    assert!(!buffer.memory_type().contains(MemoryType::HOST_VISIBLE));
    let error = buffer.map_read(0, &mut [0; 4]).unwrap_err();
    assert_eq!(error.code(), StatusCode::PermissionDenied, "{error}");
    assert!(buffer.map_write(0, &[1; 4]).is_err());

    let bytes: Vec<u8> = (0..=255).cycle().take(1000).collect();
    transfer::write(device.as_ref(), &buffer, 24, &bytes).unwrap();
    let mut back = vec![0; 1000];
    transfer::read(device.as_ref(), &buffer, 24, &mut back).unwrap();
    assert_eq!(back, bytes);
    let traffic = statistics(&device).traffic;
    assert_eq!(traffic.host_to_device_bytes, 1000);
    assert_eq!(traffic.device_to_host_bytes, 1000);
}

fn semaphore(device: &Arc<dyn Device>) -> Arc<dyn Semaphore> {
    device.create_semaphore(0).unwrap()
}

#[test]
fn compute_waits_for_transfer_through_a_device_event_even_before_the_signal_exists() {
    let device = mock(&[]);
    let (host, uploaded, computed) = (semaphore(&device), semaphore(&device), semaphore(&device));
    let buffer = storage(&device, 64).unwrap();
    // The upload waits on the host; the compute barrier is submitted after it and waits on the
    // upload: a device-side event on the transfer queue, no semaphore wait.
    device
        .queue_fill(
            QueueAffinity::ANY,
            &Fence::at(host.clone(), 1),
            &Fence::at(uploaded.clone(), 1),
            &buffer,
            0,
            64,
            &[7],
        )
        .unwrap();
    device
        .queue_barrier(
            QueueAffinity::ANY,
            &Fence::at(uploaded.clone(), 1),
            &Fence::at(computed.clone(), 1),
        )
        .unwrap();
    let counts = statistics(&device).queues;
    assert_eq!(
        (counts.cross_queue_events, counts.semaphore_waits),
        (1, 1),
        "{counts:?}"
    );
    assert!(computed
        .wait(1, Timeout::from(Duration::from_millis(50)))
        .is_err_and(|e| e.code() == StatusCode::DeadlineExceeded));
    host.signal(1).unwrap();
    device
        .wait_semaphores(WaitMode::All, &Fence::at(computed, 1), Timeout::Infinite)
        .unwrap();
    let mut bytes = [0; 64];
    transfer::read(device.as_ref(), &buffer, 0, &mut bytes).unwrap();
    assert_eq!(bytes, [7; 64]);
}

#[test]
fn a_failed_transfer_fails_the_compute_work_waiting_on_it() {
    let device = mock(&[]);
    let (host, uploaded, computed) = (semaphore(&device), semaphore(&device), semaphore(&device));
    let buffer = storage(&device, 64).unwrap();
    device
        .queue_fill(
            QueueAffinity::ANY,
            &Fence::at(host.clone(), 1),
            &Fence::at(uploaded.clone(), 1),
            &buffer,
            0,
            64,
            &[7],
        )
        .unwrap();
    device
        .queue_barrier(
            QueueAffinity::ANY,
            &Fence::at(uploaded.clone(), 1),
            &Fence::at(computed.clone(), 1),
        )
        .unwrap();
    host.fail(halo_hal::Error::data_loss("the host's source went away"));
    let error = computed.wait(1, Timeout::Infinite).unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    assert!(uploaded.query().is_err());
    device.wait_idle(Timeout::Infinite).unwrap();
}

#[test]
fn destroying_the_device_cancels_work_still_waiting() {
    let device = mock(&[]);
    let (host, done) = (semaphore(&device), semaphore(&device));
    device
        .queue_barrier(QueueAffinity::ANY, &Fence::at(host, 1), &Fence::at(done.clone(), 1))
        .unwrap();
    drop(device);
    let error = done.wait(1, Timeout::Infinite).unwrap_err();
    assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
}
