//! Running a recorded command list (halo-hal's `CommandBuffer`, validated at record and submit)
//! on the device's in-order OpenCL queue: fills, updates and copies as buffer commands,
//! dispatches as kernel launches; the list's barriers are the queue's order. Reusable command
//! buffers may instead run from a `cl_khr_command_buffer` recording of the same commands
//! (`replay`).

use crate::api::{cl_error, Argument, Batch, InFlight};
use crate::buffer::ClAllocation;
use crate::device::DeviceShared;
use crate::executable::OpenClExecutable;
use halo_hal::{downcast, Binding, BufferRef, Command, CommandBuffer, DispatchCommand, Error, Result, WorkgroupCount};
use opencl3::kernel::Kernel;
use opencl3::types::cl_mem;
use std::sync::Arc;

/// Where a command list's commands go: onto the queue now ([`Batch`]) or into a recording.
pub(crate) trait Sink {
    /// Repeats `pattern` over `[offset, offset + length)` of `buffer`.
    fn fill(&mut self, buffer: cl_mem, pattern: &[u8], offset: u64, length: u64) -> Result<()>;
    /// Writes `data` at `offset` of `buffer`.
    fn write(&mut self, buffer: cl_mem, offset: u64, data: &[u8]) -> Result<()>;
    /// Copies `length` bytes between two buffer ranges.
    fn copy(&mut self, source: (cl_mem, u64), target: (cl_mem, u64), length: u64) -> Result<()>;
    /// Runs `kernel` over `workgroups` of `local` work-items with `arguments`.
    fn dispatch(
        &mut self,
        kernel: &Kernel,
        arguments: &[Argument<'_>],
        workgroups: [u32; 3],
        local: [u32; 3],
    ) -> Result<()>;
    /// Reads `target.len()` bytes at `offset` of `buffer` now (indirect workgroup counts).
    fn read_now(&mut self, buffer: cl_mem, offset: u64, target: &mut [u8]) -> Result<()>;
}

impl Sink for Batch<'_> {
    fn fill(&mut self, buffer: cl_mem, pattern: &[u8], offset: u64, length: u64) -> Result<()> {
        Batch::fill(self, buffer, pattern, offset, length)
    }
    fn write(&mut self, buffer: cl_mem, offset: u64, data: &[u8]) -> Result<()> {
        Batch::write(self, buffer, offset, data)
    }
    fn copy(&mut self, source: (cl_mem, u64), target: (cl_mem, u64), length: u64) -> Result<()> {
        Batch::copy(self, source, target, length)
    }
    fn dispatch(
        &mut self,
        kernel: &Kernel,
        arguments: &[Argument<'_>],
        workgroups: [u32; 3],
        local: [u32; 3],
    ) -> Result<()> {
        Batch::dispatch(self, kernel, arguments, workgroups, local)
    }
    fn read_now(&mut self, buffer: cl_mem, offset: u64, target: &mut [u8]) -> Result<()> {
        Batch::read_now(self, buffer, offset, target)
    }
}

/// Issues `command_buffer` with `table` for its slots onto the queue; what it uses is kept until
/// its commands have run.
pub(crate) fn execute(
    shared: &DeviceShared,
    command_buffer: &Arc<CommandBuffer>,
    table: Vec<Binding<'static>>,
) -> Result<InFlight> {
    let mut batch = Batch::new(&shared.queue);
    match crate::replay::recording_for(shared, command_buffer, &table)? {
        Some(recorded) => {
            if recorded.enqueue(&shared.queue).is_err() {
                // The recording may still be running for the previous submission, and devices
                // without simultaneous use refuse to queue it again until it has finished.
                shared.queue.finish().map_err(|e| cl_error("clFinish", e))?;
                recorded.enqueue(&shared.queue)?;
            }
        }
        None => issue(shared, &mut batch, command_buffer.commands()?, &table)?,
    }
    batch.finish_later(Box::new((command_buffer.clone(), table)))
}

/// Sends `commands`, with `table` for their slots, to `sink`.
pub(crate) fn issue(
    shared: &DeviceShared,
    sink: &mut impl Sink,
    commands: &[Command],
    table: &[Binding<'_>],
) -> Result<()> {
    for (index, command) in commands.iter().enumerate() {
        run(shared, sink, command, table).map_err(|e| e.context(format!("running command {index}")))?;
    }
    Ok(())
}

fn run(shared: &DeviceShared, batch: &mut impl Sink, command: &Command, table: &[Binding<'_>]) -> Result<()> {
    match command {
        Command::Barrier => Ok(()),
        Command::Fill { target, pattern } => {
            let (mem, offset, length) = resolve(shared, target, table)?;
            if length == 0 {
                return Ok(());
            }
            batch.fill(mem, pattern, offset, length)
        }
        Command::Update { data, target } => {
            let (mem, offset, _) = resolve(shared, target, table)?;
            if data.is_empty() {
                return Ok(());
            }
            batch.write(mem, offset, data)
        }
        Command::Copy { source, target } => {
            let (source_mem, source_offset, length) = resolve(shared, source, table)?;
            let (target_mem, target_offset, _) = resolve(shared, target, table)?;
            if length == 0 {
                return Ok(());
            }
            batch.copy((source_mem, source_offset), (target_mem, target_offset), length)
        }
        Command::Dispatch(dispatch) => run_dispatch(shared, batch, dispatch, table),
    }
}

/// The buffer object, byte offset in it and length of a reference.
fn resolve(shared: &DeviceShared, reference: &BufferRef, table: &[Binding<'_>]) -> Result<(cl_mem, u64, u64)> {
    let resolved = reference.resolve(table)?;
    let allocation: &ClAllocation = downcast(resolved.buffer.allocation().as_any(), "an OpenCL buffer")?;
    Ok((
        allocation.mem_on(shared)?,
        resolved.buffer.byte_offset() + resolved.offset,
        resolved.length,
    ))
}

fn run_dispatch(
    shared: &DeviceShared,
    batch: &mut impl Sink,
    dispatch: &DispatchCommand,
    table: &[Binding<'_>],
) -> Result<()> {
    let executable: &OpenClExecutable = downcast(dispatch.executable.as_any(), "an OpenCL executable")?;
    let export = executable.export(dispatch.export, shared)?;
    let workgroups = match &dispatch.workgroup_count {
        WorkgroupCount::Static(count) => *count,
        WorkgroupCount::Indirect(reference) => {
            let (mem, offset, _) = resolve(shared, reference, table)?;
            let mut bytes = [0u8; 12];
            batch.read_now(mem, offset, &mut bytes)?;
            [0, 1, 2].map(|i| u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]]))
        }
    };
    if workgroups.contains(&0) {
        return Ok(());
    }
    check_grid(workgroups, export.info.workgroup_size)?;
    let mut buffers = Vec::with_capacity(export.arguments.len());
    for &ordinal in &export.arguments {
        let reference = dispatch.bindings.get(ordinal).ok_or_else(|| {
            Error::invalid_argument(format!(
                "the dispatch gives {} bindings; the kernel reads binding {ordinal}",
                dispatch.bindings.len()
            ))
        })?;
        let (mem, offset, length) =
            resolve(shared, reference, table).map_err(|e| e.context(format!("binding {ordinal}")))?;
        buffers.push((mem, offset, length));
    }
    // The push constant struct: the dispatch's constants, zero past them.
    let mut push: Vec<u8> = dispatch.constants.iter().flat_map(|c| c.to_le_bytes()).collect();
    push.resize(export.push_constant_bytes, 0);
    let mut arguments: Vec<Argument<'_>> = buffers
        .iter()
        .flat_map(|&(mem, offset, length)| {
            [
                Argument::Buffer(mem),
                Argument::Offset(offset),
                Argument::Offset(length),
            ]
        })
        .collect();
    if !push.is_empty() {
        arguments.push(Argument::Bytes(&push));
    }
    batch.dispatch(&export.kernel(), &arguments, workgroups, export.info.workgroup_size)
}

/// Refuses a grid the kernels cannot index: translated kernels read their ids as 32-bit signed
/// values, so no dimension may reach 2^31 work-items, and OpenCL runtimes count the workgroups of
/// a launch in 32 bits.
fn check_grid(workgroups: [u32; 3], workgroup_size: [u32; 3]) -> Result<()> {
    const MAX_WORK_ITEMS: u64 = i32::MAX as u64;
    for (dimension, (&count, &size)) in workgroups.iter().zip(&workgroup_size).enumerate() {
        if u64::from(count) * u64::from(size) > MAX_WORK_ITEMS {
            return Err(Error::out_of_range(format!(
                "workgroup count {count} in dimension {dimension} times the workgroup size {size} passes the \
                 {MAX_WORK_ITEMS} work-items a translated kernel indexes"
            )));
        }
    }
    let total: u128 = workgroups.iter().map(|&c| u128::from(c)).product();
    if total > u128::from(u32::MAX) {
        return Err(Error::out_of_range(format!(
            "workgroup counts {workgroups:?} make {total} workgroups; an OpenCL launch holds at most {}",
            u32::MAX
        )));
    }
    Ok(())
}
