//! Buffers: mapping, subspans, ranges, usage and access.

use crate::CtsDevice;
use halo_hal::{BufferUsage, MemoryAccess, StatusCode, WHOLE_BUFFER};

/// `map_write` then `map_read` round-trips bytes at offsets.
pub fn maps_read_and_write(ctx: &CtsDevice) {
    let buffer = ctx.buffer(16);
    buffer.map_write(3, &[1, 2, 3, 4]).unwrap();
    let mut out = [0u8; 6];
    buffer.map_read(2, &mut out).unwrap();
    assert_eq!(out, [0, 1, 2, 3, 4, 0]);
}

/// 1-, 2- and 4-byte fill patterns, with misaligned fills rejected.
pub fn map_fill_patterns(ctx: &CtsDevice) {
    let buffer = ctx.buffer(16);
    buffer.map_fill(0, WHOLE_BUFFER, &[0xAB]).unwrap();
    buffer.map_fill(4, 8, &[1, 2]).unwrap();
    buffer.map_fill(8, 4, &[5, 6, 7, 8]).unwrap();
    assert_eq!(
        buffer.read_all().unwrap(),
        [0xAB, 0xAB, 0xAB, 0xAB, 1, 2, 1, 2, 5, 6, 7, 8, 0xAB, 0xAB, 0xAB, 0xAB]
    );
    assert_eq!(
        buffer.map_fill(1, 4, &[1, 2]).unwrap_err().code(),
        StatusCode::InvalidArgument
    );
    assert_eq!(
        buffer.map_fill(0, 4, &[1, 2, 3]).unwrap_err().code(),
        StatusCode::InvalidArgument
    );
    buffer.map_zero(0, WHOLE_BUFFER).unwrap();
    assert_eq!(buffer.read_all().unwrap(), vec![0u8; 16]);
}

/// A scoped mapping reads and writes within its range only.
pub fn scoped_mapping_flushes(ctx: &CtsDevice) {
    let buffer = ctx.buffer(32);
    {
        let mapping = buffer.map_range(MemoryAccess::WRITE, 8, 16).unwrap();
        assert_eq!(mapping.len(), 16);
        mapping.write(0, &[7; 16]).unwrap();
        assert_eq!(mapping.write(10, &[1; 8]).unwrap_err().code(), StatusCode::OutOfRange);
    }
    let mapping = buffer.map_range(MemoryAccess::READ, 0, WHOLE_BUFFER).unwrap();
    let mut all = [0u8; 32];
    mapping.read(0, &mut all).unwrap();
    assert_eq!(&all[..8], &[0; 8]);
    assert_eq!(&all[8..24], &[7; 16]);
    assert_eq!(mapping.write(0, &[1]).unwrap_err().code(), StatusCode::PermissionDenied);
}

/// Subspans view the same memory at an offset.
pub fn subspans_share_memory(ctx: &CtsDevice) {
    let buffer = ctx.buffer(16);
    let span = buffer.subspan(4, 8).unwrap();
    assert_eq!((span.byte_offset(), span.byte_length()), (4, 8));
    span.map_write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let nested = span.subspan(2, WHOLE_BUFFER).unwrap();
    assert_eq!(nested.read_all().unwrap(), [3, 4, 5, 6, 7, 8]);
    assert_eq!(buffer.read_all().unwrap()[4..12], [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(span.subspan(4, 8).unwrap_err().code(), StatusCode::OutOfRange);
}

/// Reads and writes past the end are `OutOfRange`, naming the range.
pub fn rejects_out_of_range_access(ctx: &CtsDevice) {
    let buffer = ctx.buffer(8);
    let error = buffer.map_write(6, &[0; 4]).unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange);
    assert!(error.to_string().contains("[6, 10)"), "{error}");
    assert!(buffer.map_read(u64::MAX, &mut [0; 2]).is_err());
    assert!(buffer.subspan(9, 0).is_err());
}

/// Restricted usage and access are enforced.
pub fn enforces_usage_and_access(ctx: &CtsDevice) {
    let buffer = ctx.buffer(8);
    let read_only = buffer.restricted(BufferUsage::all(), MemoryAccess::READ);
    assert_eq!(
        read_only.map_write(0, &[1]).unwrap_err().code(),
        StatusCode::PermissionDenied
    );
    read_only.map_read(0, &mut [0; 8]).unwrap();
    let unmappable = buffer.restricted(BufferUsage::DEFAULT, MemoryAccess::ALL);
    assert_eq!(
        unmappable.map_read(0, &mut [0; 1]).unwrap_err().code(),
        StatusCode::PermissionDenied
    );
}
