//! `hal.buffer.*`: checks on buffers passed in, subspans, and small host reads and writes.

use super::{object, Row};
use crate::objects::{HalAllocator, HalBuffer};
use crate::{Args, HalArgs, HalModuleState};
use halo_hal::{BufferUsage, Error, MemoryType, Result};
use halo_vm::ref_types::Buffer as VmBuffer;
use halo_vm::{Results, Value};
use smallvec::smallvec;

pub(crate) const EXPORTS: &[Row] = &[
    ("buffer.assert", "0rrrIii_v", assert),
    ("buffer.length", "0r_I", length),
    ("buffer.load", "0rIi_i", load),
    ("buffer.store", "0irIi_v", store),
    ("buffer.subspan", "0rII_r", subspan),
];

/// `(buffer, message, allocator, minimum_length, memory_types, usage)`: the buffer is large
/// enough and was allocated with every memory type and usage the program needs.
fn assert(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let buffer = &args.object::<HalBuffer>(0)?.0;
    let message_buffer = args.object::<VmBuffer>(1)?;
    // Only failures read the message, so the common path allocates nothing for it.
    let message = || message_buffer.to_text();
    args.object::<HalAllocator>(2)?;
    let minimum = args.size(3)?;
    if buffer.byte_length() < minimum {
        return Err(Error::invalid_argument(format!(
            "{} buffer byte length {} less than expected minimum {minimum}",
            message(),
            buffer.byte_length()
        )));
    }
    let required_type = MemoryType::from_bits_retain(args.i32(4)? as u32);
    if !buffer.memory_type().contains(required_type) {
        return Err(Error::permission_denied(format!(
            "{} buffer memory type is not compatible; buffer has {:?}, operation requires {required_type:?}",
            message(),
            buffer.memory_type()
        )));
    }
    let required_usage = BufferUsage::from_bits_retain(args.i32(5)? as u32);
    if !buffer.allowed_usage().contains(required_usage) {
        return Err(Error::permission_denied(format!(
            "{} requested usage was not specified when the buffer was allocated; buffer allows {:?}, operation requires {required_usage:?}",
            message(),
            buffer.allowed_usage()
        )));
    }
    Ok(Results::new())
}

/// `(buffer) -> length`
fn length(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    Ok(smallvec![Value::I64(
        args.object::<HalBuffer>(0)?.0.byte_length() as i64
    )])
}

/// Byte count of a load or store: at most the 4 bytes of an i32.
fn scalar_width(args: &Args<'_>, index: usize, what: &str) -> Result<usize> {
    match args.i32(index)? {
        width @ 0..=4 => Ok(width as usize),
        width => Err(Error::invalid_argument(format!(
            "{what} length byte count {width} exceeds max 4"
        ))),
    }
}

/// `(buffer, offset, length) -> value`: up to 4 bytes, little-endian, zero-extended.
fn load(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let buffer = &args.object::<HalBuffer>(0)?.0;
    let width = scalar_width(args, 2, "load")?;
    let mut bytes = [0u8; 4];
    buffer.map_read(args.size(1)?, &mut bytes[..width])?;
    Ok(smallvec![Value::I32(i32::from_le_bytes(bytes))])
}

/// `(value, buffer, offset, length)`: writes the low `length` bytes of `value`.
fn store(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let value = args.i32(0)?;
    let buffer = &args.object::<HalBuffer>(1)?.0;
    let width = scalar_width(args, 3, "store")?;
    buffer.map_write(args.size(2)?, &value.to_le_bytes()[..width])?;
    Ok(Results::new())
}

/// `(buffer, offset, length) -> buffer`
fn subspan(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let buffer = &args.object::<HalBuffer>(0)?.0;
    let (offset, length) = (args.size(1)?, args.size(2)?);
    let span = buffer.subspan(offset, length).map_err(|e| {
        e.context(format!(
            "invalid subspan of an existing buffer (source_offset={offset}, length={length})"
        ))
    })?;
    Ok(object(HalBuffer(span)))
}
