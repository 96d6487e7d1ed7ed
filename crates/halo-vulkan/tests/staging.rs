//! Device-local memory the host cannot map, as on a discrete GPU (`device_local_mappable=false`
//! makes lavapipe behave so): buffers report no host visibility, refuse mappings, and are still
//! filled and read back through `halo_hal::transfer` with the queue doing the copies.

use halo_hal::{
    transfer, BufferParams, BufferView, Device, DriverRegistry, ElementType, HostTensor, MemoryType, Result,
};
use halo_vulkan::Validation;
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_vulkan::register_driver_with(&mut registry, Validation::Strict);
    registry.create_device(uri)
}

/// The device at `uri`, or `None` (with a line saying the test skipped) without a Vulkan device.
fn device_or_skip(test: &str, uri: &str) -> Option<Arc<dyn Device>> {
    match create_device(uri) {
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED {test}: device unavailable: {error}");
            None
        }
        other => Some(other.expect("creating the Vulkan device")),
    }
}

const UNMAPPED: &str = "vulkan://?device_local_mappable=false";

#[test]
fn unmapped_device_memory_is_reached_through_the_queue() {
    let _alone = halo_cts::run_alone();
    let Some(device) = device_or_skip("unmapped_device_memory_is_reached_through_the_queue", UNMAPPED) else {
        return;
    };
    let buffer = device
        .allocator()
        .allocate_buffer(BufferParams::device_local(), 13)
        .unwrap();
    assert!(!buffer.memory_type().contains(MemoryType::HOST_VISIBLE));
    assert!(!transfer::host_mappable(&buffer));
    let error = buffer.map_read(0, &mut [0u8; 4]).unwrap_err();
    assert!(error.message().contains("HOST_VISIBLE"), "{error}");

    // New buffers are zeroed even without a mapping (a fill on the queue).
    let mut bytes = [0xAAu8; 13];
    transfer::read(device.as_ref(), &buffer, 0, &mut bytes).unwrap();
    assert_eq!(bytes, [0; 13]);
    // Odd offsets and lengths, which Vulkan's copy and update rules do not allow directly.
    transfer::write(device.as_ref(), &buffer, 3, &[1, 2, 3, 4, 5, 6, 7]).unwrap();
    let mut middle = [0u8; 9];
    transfer::read(device.as_ref(), &buffer, 2, &mut middle).unwrap();
    assert_eq!(middle, [0, 1, 2, 3, 4, 5, 6, 7, 0]);

    let error = transfer::read(device.as_ref(), &buffer, 10, &mut [0u8; 4]).unwrap_err();
    assert!(error.message().contains("[10, 14)"), "{error}");
}

#[test]
fn buffer_views_round_trip_through_unmapped_memory() {
    let _alone = halo_cts::run_alone();
    let Some(device) = device_or_skip("buffer_views_round_trip_through_unmapped_memory", UNMAPPED) else {
        return;
    };
    let tensor = HostTensor::parse("2x3xi16=1 -2 3 -4 5 -6").unwrap();
    let view = BufferView::from_host(device.as_ref(), BufferParams::device_local(), &tensor).unwrap();
    assert!(!transfer::host_mappable(view.buffer()));
    let back = view.to_host(device.as_ref()).unwrap();
    assert_eq!(back.element_type, ElementType::INT_16);
    assert_eq!(back.format(100), tensor.format(100));
}

#[test]
fn heaps_list_unmapped_device_memory_only_when_asked() {
    let _alone = halo_cts::run_alone();
    let Some(device) = device_or_skip("heaps_list_unmapped_device_memory_only_when_asked", UNMAPPED) else {
        return;
    };
    let unmapped = |device: &Arc<dyn Device>| {
        device.allocator().memory_heaps().iter().any(|heap| {
            heap.memory_type.contains(MemoryType::DEVICE_LOCAL) && !heap.memory_type.contains(MemoryType::HOST_VISIBLE)
        })
    };
    assert!(unmapped(&device));
    let default = create_device("vulkan://").unwrap();
    let lavapipe = default.info().name.contains("llvmpipe");
    // lavapipe's only memory type is host-visible; real GPUs may have device-only memory.
    if lavapipe {
        assert!(!unmapped(&default));
        let buffer = default
            .allocator()
            .allocate_buffer(BufferParams::device_local(), 8)
            .unwrap();
        assert!(transfer::host_mappable(&buffer));
    }
}

#[test]
fn unknown_device_parameters_are_named() {
    let _alone = halo_cts::run_alone();
    let error = match create_device("vulkan://?device_local_mappable=maybe") {
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED unknown_device_parameters_are_named: device unavailable: {error}");
            return;
        }
        other => other.err().expect("a bad value is refused"),
    };
    assert!(error.message().contains("device_local_mappable=maybe"), "{error}");
    let error = create_device("vulkan://?fast=true")
        .err()
        .expect("an unknown key is refused");
    assert!(error.message().contains("'fast'"), "{error}");
    let error = create_device("vulkan://?spin_us=-1")
        .err()
        .expect("a negative spin is refused");
    assert!(error.message().contains("microseconds"), "{error}");
    create_device("vulkan://?spin_us=0&poll_us=0").expect("spinning and polling can be turned off");
    create_device("vulkan://?spin_us=1000000&poll_us=1000000").expect("a second of watching is taken");
    for uri in ["vulkan://?spin_us=1000001", "vulkan://?poll_us=18446744073709551615"] {
        let error = create_device(uri).err().expect("more than a second is refused");
        assert!(error.message().contains("from 0 to 1000000"), "{error}");
    }
    let error = create_device("vulkan://?poll_us=soon")
        .err()
        .expect("a poll time must be a number");
    assert!(error.message().contains("poll_us=soon"), "{error}");
}
