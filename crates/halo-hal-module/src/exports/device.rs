//! `hal.device.*` and `hal.devices.*`: the device group, queries, and queue operations.
//!
//! Every queue operation takes a wait fence and a signal fence (null is the empty fence) and
//! returns once the work is queued; the program awaits the signal fence when it needs results.

use super::command_buffer::pattern_width;
use super::{object, Row};
use crate::objects::{HalAllocator, HalBuffer, HalCommandBuffer, HalDevice, HalFile};
use crate::{Args, HalArgs, HalModuleState};
use halo_hal::{Binding, BufferParams, BufferUsage, Error, MemoryAccess, MemoryType, QueueAffinity, Result};
use halo_vm::ref_types::{check_range, Buffer as VmBuffer};
use halo_vm::{Results, Value};
use smallvec::{smallvec, SmallVec};

pub(crate) const EXPORTS: &[Row] = &[
    ("device.allocator", "0r_r", allocator),
    ("device.query.i64", "0rrr_iI", query_i64),
    ("devices.count", "0v_i", devices_count),
    ("devices.get", "0i_r", devices_get),
];

/// Queue operations: a device may run them on the calling thread (`local-sync` runs dispatches
/// inline), so they release the caller's module state.
pub(crate) const QUEUE: &[Row] = &[
    ("device.queue.alloca", "0rIrrIiiII_r", queue_alloca),
    ("device.queue.barrier", "0rIrrI_v", queue_barrier),
    ("device.queue.copy", "0rIrrrIrIII_v", queue_copy),
    ("device.queue.dealloca", "0rIrrrI_v", queue_dealloca),
    ("device.queue.execute", "0rIrrrI_v", queue_execute),
    (
        "device.queue.execute.indirect",
        "0rIrrrICrIID_v",
        queue_execute_indirect,
    ),
    ("device.queue.fill", "0rIrrrIIIiI_v", queue_fill),
    ("device.queue.flush", "0rI_v", queue_flush),
    ("device.queue.read", "0rIrrrIrIII_v", queue_read),
    ("device.queue.update", "0rIrrrIrIII_v", queue_update),
];

/// `(device) -> allocator`
fn allocator(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    Ok(object(HalAllocator(args.object::<HalDevice>(0)?.0.clone())))
}

/// `(device, category, key) -> (ok, value)`: an unknown query is `ok = 0`, not an error, so
/// programs can probe for executable formats and device ids.
fn query_i64(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let (category, key) = (args.text(1)?, args.text(2)?);
    Ok(match device.query_i64(&category, &key) {
        Ok(value) => smallvec![Value::I32(1), Value::I64(value)],
        Err(_) => smallvec![Value::I32(0), Value::I64(0)],
    })
}

fn affinity(args: &Args<'_>) -> Result<QueueAffinity> {
    Ok(QueueAffinity(args.i64(1)? as u64))
}

/// `(device, affinity, wait, signal, pool, memory_types, usage, size, flags) -> buffer`
fn queue_alloca(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    if args.i64(4)? != 0 {
        return Err(Error::unimplemented("queue allocation pools are not supported"));
    }
    let params = BufferParams {
        memory_type: MemoryType::from_bits_retain(args.i32(5)? as u32),
        usage: BufferUsage::from_bits_retain(args.i32(6)? as u32),
        access: MemoryAccess::ALL,
        queue_affinity: affinity(args)?,
        min_alignment: 0,
    };
    let size = args.size(7)?;
    let buffer = device
        .queue_alloca(affinity(args)?, args.fence(2)?, args.fence(3)?, params, size)
        .map_err(|e| e.context(format!("queue allocation of {size} bytes")))?;
    Ok(object(HalBuffer(buffer)))
}

/// `(device, affinity, wait, signal, buffer, flags)`
fn queue_dealloca(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let buffer = &args.object::<HalBuffer>(4)?.0;
    device.queue_dealloca(affinity(args)?, args.fence(2)?, args.fence(3)?, buffer)?;
    Ok(Results::new())
}

/// `(device, affinity, wait, signal, flags)`
fn queue_barrier(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    device.queue_barrier(affinity(args)?, args.fence(2)?, args.fence(3)?)?;
    Ok(Results::new())
}

/// `(device, affinity, wait, signal, target, offset, length, pattern, pattern_length, flags)`
fn queue_fill(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let target = &args.object::<HalBuffer>(4)?.0;
    let pattern = args.i64(7)?.to_le_bytes();
    let width = pattern_width(args.i32(8)?)?;
    device.queue_fill(
        affinity(args)?,
        args.fence(2)?,
        args.fence(3)?,
        target,
        args.size(5)?,
        args.size(6)?,
        &pattern[..width],
    )?;
    Ok(Results::new())
}

/// `(device, affinity, wait, signal, source, source_offset, target, target_offset, length,
/// flags)` with a `vm.buffer` source, captured now.
fn queue_update(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let source = args.object::<VmBuffer>(4)?.bytes();
    let range = check_range(args.size(5)?, args.size(8)?, source.len())?;
    let target = &args.object::<HalBuffer>(6)?.0;
    device.queue_update(
        affinity(args)?,
        args.fence(2)?,
        args.fence(3)?,
        &source[range],
        target,
        args.size(7)?,
    )?;
    Ok(Results::new())
}

/// `(device, affinity, wait, signal, source, source_offset, target, target_offset, length,
/// flags)` between two buffers.
fn queue_copy(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    device.queue_copy(
        affinity(args)?,
        args.fence(2)?,
        args.fence(3)?,
        &args.object::<HalBuffer>(4)?.0,
        args.size(5)?,
        &args.object::<HalBuffer>(6)?.0,
        args.size(7)?,
        args.size(8)?,
    )?;
    Ok(Results::new())
}

/// `(device, affinity, wait, signal, file, file_offset, target, target_offset, length, flags)`:
/// files are host memory here, so a read is an update from the file's bytes.
fn queue_read(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let file = &args.object::<HalFile>(4)?.0;
    let source = file.source.expect::<VmBuffer>("file source")?.bytes();
    let bytes = &source[file.range.clone()];
    let range =
        check_range(args.size(5)?, args.size(8)?, bytes.len()).map_err(|e| e.context("reading from a hal.file"))?;
    let target = &args.object::<HalBuffer>(6)?.0;
    device.queue_update(
        affinity(args)?,
        args.fence(2)?,
        args.fence(3)?,
        &bytes[range],
        target,
        args.size(7)?,
    )?;
    Ok(Results::new())
}

/// `(device, affinity, wait, signal, command_buffer, flags)`
fn queue_execute(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let command_buffer = &args.object::<HalCommandBuffer>(4)?.0;
    device.queue_execute(
        affinity(args)?,
        args.fence(2)?,
        args.fence(3)?,
        Some(command_buffer),
        &[],
    )?;
    Ok(Results::new())
}

/// `(device, affinity, wait, signal, command_buffer, flags, (buffer, offset, length)...)`: the
/// tuples form the binding table the command buffer's slots resolve against.
fn queue_execute_indirect(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    const FIXED: usize = 6;
    let device = &args.object::<HalDevice>(0)?.0;
    let command_buffer = &args.object::<HalCommandBuffer>(4)?.0;
    let mut table = SmallVec::<[Binding; 8]>::new();
    for at in (FIXED..args.len()).step_by(3) {
        let slot = (at - FIXED) / 3;
        let buffer = args
            .optional_object::<HalBuffer>(at)?
            .ok_or_else(|| Error::invalid_argument(format!("binding table slot {slot} is null")))?;
        table.push(Binding::new(&buffer.0, args.size(at + 1)?, args.size(at + 2)?));
    }
    device.queue_execute(
        affinity(args)?,
        args.fence(2)?,
        args.fence(3)?,
        Some(command_buffer),
        &table,
    )?;
    Ok(Results::new())
}

/// `(device, affinity)`
fn queue_flush(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    args.object::<HalDevice>(0)?.0.queue_flush(affinity(args)?)?;
    Ok(Results::new())
}

/// `() -> count`
fn devices_count(state: &HalModuleState, _: &Args<'_>) -> Result<Results> {
    Ok(smallvec![Value::I32(state.devices().len() as i32)])
}

/// `(index) -> device or null`
fn devices_get(state: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let index = args.i32(0)?;
    let device = usize::try_from(index).ok().and_then(|i| state.devices().get(i));
    Ok(match device {
        Some(device) => object(HalDevice(device.clone())),
        None => smallvec![Value::Ref(None)],
    })
}
