//! Transfers into and out of buffers stored in the tile layout: the transfer queue tilizes what
//! it writes and untilizes what it reads, so the host only ever sees row-major tensors.
//!
//! A tiled buffer moves whole: a byte range of the row-major form is scattered over many tiles,
//! and no program needs part of one, so partial ranges are refused with the range named.

use crate::allocator::{tiled_layout, TiledLayout};
use crate::tile_layout::{tilize, untilize};
use halo_hal::host_memory::zeroed_vec;
use halo_hal::{host_transfer, Buffer, BufferUsage, Error, MemoryAccess, ResolvedRef, Result};

/// The tiled storage behind `target` as a buffer of its own, after checking that `target`
/// covers the whole tensor.
fn whole_storage(target: &ResolvedRef, layout: &TiledLayout) -> Result<Buffer> {
    let start = target.buffer.byte_offset() + target.offset;
    let storage = Buffer::new(
        target.buffer.allocation().clone(),
        BufferUsage::TRANSFER,
        MemoryAccess::ALL,
    );
    let row_major = layout.row_major_bytes();
    if start != 0 || target.length != row_major {
        return Err(Error::invalid_argument(format!(
            "bytes [{start}, {}) of a buffer holding a {:?} tensor in the tile layout: tiled \
             buffers are transferred whole ({row_major} bytes)",
            start + target.length,
            layout.shape
        )));
    }
    Ok(storage)
}

fn tiled_bytes(storage: &Buffer) -> Result<Vec<u8>> {
    let mut bytes = zeroed_vec(storage.byte_length() as usize, "a tiled buffer's tiles")?;
    host_transfer::copy_out(storage, 0, &mut bytes)?;
    Ok(bytes)
}

/// Writes the row-major `data` into the tiled buffer `target`.
pub fn write(data: &[u8], target: &ResolvedRef, layout: &TiledLayout) -> Result<()> {
    let storage = whole_storage(target, layout)?;
    let mut tiled = zeroed_vec(storage.byte_length() as usize, "tilizing")?;
    tilize(&layout.shape, layout.element_type, data, &mut tiled)?;
    host_transfer::update(&tiled, &storage, 0)
}

/// The row-major form of the tiled buffer `source`.
pub fn read(source: &ResolvedRef, layout: &TiledLayout) -> Result<Vec<u8>> {
    let storage = whole_storage(source, layout)?;
    let mut row_major = zeroed_vec(source.length as usize, "untilizing")?;
    untilize(
        &layout.shape,
        layout.element_type,
        &tiled_bytes(&storage)?,
        &mut row_major,
    )?;
    Ok(row_major)
}

/// Copies between buffers of which at least one is tiled, converting as needed.
pub fn copy(source: &ResolvedRef, target: &ResolvedRef) -> Result<()> {
    let row_major = match tiled_layout(source.buffer) {
        Some(layout) => read(source, layout)?,
        None => {
            let mut bytes = zeroed_vec(source.length as usize, "a copy into a tiled buffer")?;
            host_transfer::copy_out(source.buffer, source.offset, &mut bytes)?;
            bytes
        }
    };
    match tiled_layout(target.buffer) {
        Some(layout) => write(&row_major, target, layout),
        None => host_transfer::update(&row_major, target.buffer, target.offset),
    }
}

/// Fills the tiled buffer `target` with `pattern` (padding stays zero).
pub fn fill(target: &ResolvedRef, layout: &TiledLayout, pattern: &[u8]) -> Result<()> {
    let mut row_major = zeroed_vec(target.length as usize, "a fill of a tiled buffer")?;
    for chunk in row_major.chunks_mut(pattern.len()) {
        chunk.copy_from_slice(&pattern[..chunk.len()]);
    }
    write(&row_major, target, layout)
}
