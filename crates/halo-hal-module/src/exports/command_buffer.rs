//! `hal.command_buffer.*`: recording transfers, barriers and dispatches.
//!
//! Buffers in commands are direct (a non-null `!hal.buffer`) or indirect (null, and a
//! binding-table slot resolved when the command buffer is submitted).

use super::{object, Row};
use crate::objects::{HalBuffer, HalCommandBuffer, HalDevice, HalExecutable};
use crate::{Args, HalArgs, HalModuleState};
use halo_hal::{
    BufferRef, CommandBufferMode, CommandCategory, DispatchCommand, Error, QueueAffinity, Result, WorkgroupCount,
};
use halo_vm::ref_types::Buffer as VmBuffer;
use halo_vm::Results;

pub(crate) const EXPORTS: &[Row] = &[
    ("command_buffer.advise_buffer", "0rrIIIi_v", ignore),
    ("command_buffer.begin_debug_group", "0rr_v", ignore),
    ("command_buffer.copy_buffer", "0riirIrIII_v", copy_buffer),
    ("command_buffer.create", "0riiIi_r", create),
    ("command_buffer.dispatch", "0rrIiiiICiDCiirIID_v", dispatch),
    (
        "command_buffer.dispatch.indirect",
        "0rrIirIICiDCiirIID_v",
        dispatch_indirect,
    ),
    ("command_buffer.end_debug_group", "0r_v", ignore),
    ("command_buffer.execution_barrier", "0riiI_v", execution_barrier),
    ("command_buffer.fill_buffer", "0rrIIiIiI_v", fill_buffer),
    ("command_buffer.finalize", "0r_v", finalize),
    ("command_buffer.update_buffer", "0rrIrIIiI_v", update_buffer),
];

/// Hints and debug labels: nothing to do on halo's drivers.
fn ignore(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    args.object::<HalCommandBuffer>(0)?;
    Ok(Results::new())
}

/// A direct reference when the buffer argument at `buffer` is non-null, else the `slot`.
fn buffer_ref(args: &Args<'_>, buffer: usize, slot: u32, offset: u64, length: u64) -> Result<BufferRef> {
    Ok(match args.optional_object::<HalBuffer>(buffer)? {
        Some(buffer) => BufferRef::direct(&buffer.0, offset, length),
        None => BufferRef::slot(slot, offset, length),
    })
}

/// `(device, modes, categories, affinity, binding_capacity) -> command_buffer`, begun.
fn create(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let command_buffer = device.create_command_buffer(
        CommandBufferMode::from_bits_retain(args.i32(1)? as u32),
        CommandCategory::from_bits_retain(args.i32(2)? as u32),
        QueueAffinity(args.i64(3)? as u64),
        args.i32(4)? as u32,
    )?;
    command_buffer.begin()?;
    Ok(object(HalCommandBuffer(command_buffer)))
}

/// `(command_buffer)`: ends recording.
fn finalize(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    args.object::<HalCommandBuffer>(0)?.0.end()?;
    Ok(Results::new())
}

/// `(command_buffer, source_stages, target_stages, flags)`: a full barrier.
fn execution_barrier(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    args.object::<HalCommandBuffer>(0)?.0.execution_barrier()?;
    Ok(Results::new())
}

/// `(command_buffer, target, offset, length, slot, pattern, pattern_length, flags)`
fn fill_buffer(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let command_buffer = &args.object::<HalCommandBuffer>(0)?.0;
    let target = buffer_ref(args, 1, args.i32(4)? as u32, args.size(2)?, args.size(3)?)?;
    let pattern = args.i64(5)?.to_le_bytes();
    let width = pattern_width(args.i32(6)?)?;
    command_buffer.fill_buffer(target, &pattern[..width])?;
    Ok(Results::new())
}

/// A fill pattern's byte count: 1, 2 or 4 (anything else is the command buffer's error to
/// report, so it is passed through as long as it fits the 8 pattern bytes).
pub(crate) fn pattern_width(width: i32) -> Result<usize> {
    match width {
        0..=8 => Ok(width as usize),
        _ => Err(Error::invalid_argument(format!("fill pattern length {width}"))),
    }
}

/// `(command_buffer, source, source_offset, target, target_offset, length, slot, flags)`
fn update_buffer(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let command_buffer = &args.object::<HalCommandBuffer>(0)?.0;
    let source = args.object::<VmBuffer>(1)?;
    let (source_offset, length) = (args.size(2)?, args.size(5)?);
    let target = buffer_ref(args, 3, args.i32(6)? as u32, args.size(4)?, length)?;
    let bytes = source.bytes();
    let range = halo_vm::ref_types::check_range(source_offset, length, bytes.len())?;
    command_buffer.update_buffer(&bytes[range], target)?;
    Ok(Results::new())
}

/// `(command_buffer, source_slot, target_slot, source, source_offset, target, target_offset,
/// length, flags)`
fn copy_buffer(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let command_buffer = &args.object::<HalCommandBuffer>(0)?.0;
    let length = args.size(7)?;
    let source = buffer_ref(args, 3, args.i32(1)? as u32, args.size(4)?, length)?;
    let target = buffer_ref(args, 5, args.i32(2)? as u32, args.size(6)?, length)?;
    command_buffer.copy_buffer(source, target)?;
    Ok(Results::new())
}

/// Number of fixed arguments before the constants of both dispatch forms.
const DISPATCH_FIXED: usize = 7;
/// Values per binding tuple: `(reserved, slot, buffer, offset, length)`.
const BINDING_TUPLE: usize = 5;

/// Splits the two variadic segments after the fixed arguments: i32 constants, then binding
/// tuples. The VM passes them flattened; the first binding is where the first ref sits two
/// values later (constants and the tuples' leading fields are all i32s).
fn constants_and_bindings(args: &Args<'_>) -> Result<(Vec<u32>, Vec<BufferRef>)> {
    let tail = args.len().saturating_sub(DISPATCH_FIXED);
    let first_binding = (0..tail)
        .position(|i| args.kind(DISPATCH_FIXED + i) == Some('r'))
        .map_or(tail, |p| p.saturating_sub(2));
    if !(tail - first_binding).is_multiple_of(BINDING_TUPLE) {
        return Err(Error::invalid_argument(
            "dispatch arguments do not split into constants and binding tuples",
        ));
    }
    let constants = (0..first_binding)
        .map(|i| args.i32(DISPATCH_FIXED + i).map(|c| c as u32))
        .collect::<Result<_>>()?;
    let bindings = (DISPATCH_FIXED + first_binding..args.len())
        .step_by(BINDING_TUPLE)
        .map(|at| {
            buffer_ref(
                args,
                at + 2,
                args.i32(at + 1)? as u32,
                args.size(at + 3)?,
                args.size(at + 4)?,
            )
        })
        .collect::<Result<_>>()?;
    Ok((constants, bindings))
}

/// The export ordinal a function id from `hal.executable.lookup.function` names.
fn export_ordinal(args: &Args<'_>, index: usize) -> Result<u32> {
    let id = args.i64(index)?;
    u32::try_from(id).map_err(|_| Error::out_of_range(format!("executable function id {id}")))
}

/// `(command_buffer, executable, function, x, y, z, flags, constants..., bindings...)`
fn dispatch(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let command_buffer = &args.object::<HalCommandBuffer>(0)?.0;
    let (constants, bindings) = constants_and_bindings(args)?;
    let count = [args.i32(3)?, args.i32(4)?, args.i32(5)?].map(|c| c as u32);
    command_buffer.dispatch(DispatchCommand {
        executable: args.object::<HalExecutable>(1)?.0.clone(),
        export: export_ordinal(args, 2)?,
        workgroup_count: WorkgroupCount::Static(count),
        constants,
        bindings,
    })?;
    Ok(Results::new())
}

/// `(command_buffer, executable, function, count_slot, count_buffer, count_offset, flags,
/// constants..., bindings...)`: the workgroup count is read from the buffer at execution.
fn dispatch_indirect(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let command_buffer = &args.object::<HalCommandBuffer>(0)?.0;
    let (constants, bindings) = constants_and_bindings(args)?;
    let count = buffer_ref(args, 4, args.i32(3)? as u32, args.size(5)?, 12)?;
    command_buffer.dispatch(DispatchCommand {
        executable: args.object::<HalExecutable>(1)?.0.clone(),
        export: export_ordinal(args, 2)?,
        workgroup_count: WorkgroupCount::Indirect(count),
        constants,
        bindings,
    })?;
    Ok(Results::new())
}
