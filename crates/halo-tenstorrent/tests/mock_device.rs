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

fn tiled(device: &Arc<dyn Device>, shape: &[u64], element_type: &str) -> Buffer {
    let device = device.as_any().downcast_ref::<TenstorrentDevice>().unwrap();
    let element_type = halo_hal::ElementType::parse(element_type).unwrap();
    device
        .allocate_tiled(BufferParams::default(), shape, element_type)
        .unwrap()
}

/// The bytes the device really stores for `buffer`: its whole allocation, tiles and padding.
fn stored(buffer: &Buffer) -> Vec<u8> {
    let whole = Buffer::new(
        buffer.allocation().clone(),
        BufferUsage::TRANSFER,
        halo_hal::MemoryAccess::ALL,
    );
    let mut bytes = vec![0; whole.byte_length() as usize];
    halo_hal::host_transfer::copy_out(&whole, 0, &mut bytes).unwrap();
    bytes
}

#[test]
fn tiled_buffers_are_stored_as_tiles_and_seen_row_major() {
    let device = mock(&[]);
    for (shape, element_type) in [
        (vec![3u64, 40, 50], "f32"),
        (vec![2, 100, 300], "f32"),
        (vec![33, 17], "f16"),
        (vec![64, 32], "bf16"),
        (vec![5], "i32"),
    ] {
        let element = halo_hal::ElementType::parse(element_type).unwrap();
        let buffer = tiled(&device, &shape, element_type);
        let length = shape.iter().product::<u64>() as usize * element.byte_size();
        assert_eq!(buffer.byte_length() as usize, length);
        let data: Vec<u8> = (0..length).map(|i| (i * 7 % 251) as u8 + 1).collect();
        transfer::write(device.as_ref(), &buffer, 0, &data).unwrap();
        let mut expected = vec![0; halo_tenstorrent::tile_layout::tiled_byte_length(&shape, element).unwrap() as usize];
        halo_tenstorrent::tile_layout::tilize(&shape, element, &data, &mut expected).unwrap();
        assert_eq!(stored(&buffer), expected, "{shape:?} {element_type}");
        let mut back = vec![0; length];
        transfer::read(device.as_ref(), &buffer, 0, &mut back).unwrap();
        assert_eq!(back, data, "{shape:?} {element_type}");
    }
}

#[test]
fn tiled_buffers_convert_on_copies_and_fills_keep_the_padding_zero() {
    let device = mock(&[]);
    let (a, b) = (tiled(&device, &[40, 40], "i32"), tiled(&device, &[1600], "i32"));
    let ones = 1i32.to_le_bytes();
    let done = semaphore(&device);
    device
        .queue_fill(
            QueueAffinity::ANY,
            &Fence::default(),
            &Fence::at(done.clone(), 1),
            &a,
            0,
            6400,
            &ones,
        )
        .unwrap();
    done.wait(1, Timeout::Infinite).unwrap();
    let tiles = stored(&a);
    let nonzero = tiles.chunks(4).filter(|e| *e == ones).count();
    assert_eq!((tiles.len(), nonzero), (64 * 64 * 4, 1600), "padding stays zero");
    // Tiled 40×40 to tiled 1600 (one row): the same row-major bytes, other tiles.
    device
        .queue_copy(
            QueueAffinity::ANY,
            &Fence::default(),
            &Fence::at(done.clone(), 2),
            &a,
            0,
            &b,
            0,
            6400,
        )
        .unwrap();
    done.wait(2, Timeout::Infinite).unwrap();
    let mut back = vec![0; 6400];
    transfer::read(device.as_ref(), &b, 0, &mut back).unwrap();
    assert!(back.chunks(4).all(|e| e == ones));
    assert_eq!(stored(&b).len(), 32 * 1600_u64.next_multiple_of(32) as usize * 4);
}

#[test]
fn tiled_buffers_refuse_partial_transfers_naming_the_range() {
    let device = mock(&[]);
    let buffer = tiled(&device, &[8, 8], "f32");
    let error = transfer::write(device.as_ref(), &buffer, 16, &[0; 32]).unwrap_err();
    assert!(error.to_string().contains("bytes [16, 48)"), "{error}");
    assert!(error.to_string().contains("transferred whole"), "{error}");
    let element = halo_hal::ElementType::parse("i8").unwrap();
    let tenstorrent = device.as_any().downcast_ref::<TenstorrentDevice>().unwrap();
    let error = tenstorrent
        .allocate_tiled(BufferParams::default(), &[4], element)
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::Unimplemented, "{error}");
}

/// Work on the two queues runs at the same time when nothing orders it: measured from when each
/// operation ran, as the queues recorded it. The copy waits (by a device event) for a first short
/// compute operation, so it starts while the long one after it runs. On a loaded machine the
/// compute thread can be descheduled between its two operations for longer than the copy takes,
/// so the scenario runs up to five times; queues that never overlap fail every time.
#[test]
fn transfers_overlap_compute_when_nothing_orders_them() {
    let mut attempts = Vec::new();
    for _ in 0..5 {
        let (compute, copy) = compute_and_copy_activity();
        let overlap = compute
            .finished
            .min(copy.finished)
            .saturating_duration_since(compute.started.max(copy.started));
        println!(
            "compute {:?}, transfer {:?}, overlapping {overlap:?}",
            compute.finished - compute.started,
            copy.finished - copy.started,
        );
        if copy.started < compute.finished && compute.started < copy.finished {
            return;
        }
        attempts.push((compute, copy));
    }
    panic!("the copy ran outside the compute work in every attempt: {attempts:?}");
}

/// Runs a long compute operation and a copy that waits only for a short compute operation before
/// it; returns when each of the two ran.
fn compute_and_copy_activity() -> (halo_tenstorrent::queue::Activity, halo_tenstorrent::queue::Activity) {
    use halo_hal::{BufferRef, CommandBufferMode, CommandCategory};
    use halo_tenstorrent::queue::QueueKind;
    let device = mock(&[]);
    let big = storage(&device, 64 << 20).unwrap();
    let fills = |count: u8| {
        let command_buffer = device
            .create_command_buffer(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, QueueAffinity::ANY, 0)
            .unwrap();
        command_buffer.begin().unwrap();
        for value in 1..=count {
            command_buffer.fill_buffer(BufferRef::whole(&big), &[value]).unwrap();
        }
        command_buffer.end().unwrap();
        command_buffer
    };
    // Nothing runs until everything is submitted: the host releases the first operation.
    let (go, started, copied, done) = (
        semaphore(&device),
        semaphore(&device),
        semaphore(&device),
        semaphore(&device),
    );
    for (command_buffer, signal) in [(fills(1), &started), (fills(6), &done)] {
        device
            .queue_execute(
                QueueAffinity::ANY,
                &Fence::at(go.clone(), 1),
                &Fence::at(signal.clone(), 1),
                Some(&command_buffer),
                &[],
            )
            .unwrap();
    }
    let (source, target) = (storage(&device, 16 << 20).unwrap(), storage(&device, 16 << 20).unwrap());
    device
        .queue_copy(
            QueueAffinity::ANY,
            &Fence::at(started, 1),
            &Fence::at(copied, 1),
            &source,
            0,
            &target,
            0,
            16 << 20,
        )
        .unwrap();
    go.signal(1).unwrap();
    device.wait_idle(Timeout::Infinite).unwrap();
    done.query().unwrap();
    let tenstorrent = device.as_any().downcast_ref::<TenstorrentDevice>().unwrap();
    assert_eq!(tenstorrent.statistics().queues.cross_queue_events, 1);
    let activity = tenstorrent.activity();
    let find = |queue, sequence| {
        *activity
            .iter()
            .find(|a| a.queue == queue && a.sequence == sequence)
            .unwrap()
    };
    (find(QueueKind::Compute, 2), find(QueueKind::Transfer, 1))
}
