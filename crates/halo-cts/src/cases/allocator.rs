//! Allocators.

use crate::CtsDevice;
use halo_hal::{BufferParams, BufferUsage, MemoryAccess, MemoryType};

/// New buffers are zeroed and have the requested usage.
pub fn allocates_zeroed_buffers(ctx: &CtsDevice) {
    let buffer = ctx
        .device
        .allocator()
        .allocate_buffer(BufferParams::host_mappable(), 1000)
        .unwrap();
    assert_eq!(buffer.byte_length(), 1000);
    assert!(buffer.allowed_usage().contains(BufferUsage::DEFAULT));
    assert!(buffer
        .memory_type()
        .contains(MemoryType::HOST_VISIBLE | MemoryType::DEVICE_VISIBLE));
    assert_eq!(buffer.read_all().unwrap(), vec![0u8; 1000]);
}

/// A zero-length buffer is valid.
pub fn allocates_empty_buffers(ctx: &CtsDevice) {
    let buffer = ctx
        .device
        .allocator()
        .allocate_buffer(BufferParams::host_mappable(), 0)
        .unwrap();
    assert_eq!(buffer.byte_length(), 0);
    assert!(buffer.read_all().unwrap().is_empty());
}

/// Imported host memory is used in place.
pub fn imports_host_memory(ctx: &CtsDevice) {
    let bytes: Vec<u8> = (0..64).collect();
    let buffer = ctx
        .device
        .allocator()
        .import_host(BufferParams::host_mappable(), Box::new(bytes.clone()))
        .unwrap();
    assert_eq!(buffer.read_all().unwrap(), bytes);
    buffer.map_write(0, &[9, 9]).unwrap();
    let mut head = [0u8; 3];
    buffer.map_read(0, &mut head).unwrap();
    assert_eq!(head, [9, 9, 2]);
    assert!(buffer.allowed_access().contains(MemoryAccess::WRITE));
}

/// Statistics count live bytes and the peak.
pub fn tracks_statistics(ctx: &CtsDevice) {
    let allocator = ctx.device.allocator();
    let before = allocator.statistics();
    let buffer = allocator.allocate_buffer(BufferParams::default(), 4096).unwrap();
    let during = allocator.statistics();
    assert_eq!(during.bytes_allocated, before.bytes_allocated + 4096);
    assert!(during.bytes_peak >= during.bytes_allocated);
    drop(buffer);
    assert_eq!(allocator.statistics().bytes_allocated, before.bytes_allocated);
}
