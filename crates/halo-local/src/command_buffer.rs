//! Executing recorded command buffers on the host, shared by the CPU drivers.
//!
//! A reusable command buffer is translated once into a [`HostProgram`] whose dispatches with
//! direct bindings are already resolved, so resubmitting it costs only the kernel calls.

use crate::dispatch::PreparedDispatch;
use crate::float_mode::FlushDenormals;
use halo_hal::{
    host_transfer, Binding, BufferSource, Command, CommandBuffer, CommandBufferMode, DispatchCommand, Result,
    ResultExt, WorkgroupCount,
};
use std::sync::Arc;

/// One step of a host program.
pub enum HostOp {
    /// A command resolved at execution time (transfers, barriers, slot-bound dispatches).
    Command(Command),
    /// A dispatch resolved when the program was built.
    Dispatch(Arc<PreparedDispatch>),
}

/// Commands ready to run on the host.
pub struct HostProgram {
    /// The steps, in recorded order.
    pub ops: Vec<HostOp>,
    /// Ranges of `ops` between barriers: everything in one range may run concurrently.
    pub regions: Vec<std::ops::Range<usize>>,
}

impl HostProgram {
    /// Translates `commands`, resolving what does not depend on the binding table.
    pub fn build(commands: &[Command]) -> Result<Self> {
        let ops = commands
            .iter()
            .map(|command| match command {
                Command::Dispatch(dispatch) if is_fixed(dispatch) => {
                    PreparedDispatch::prepare(dispatch, &[]).map(|d| HostOp::Dispatch(Arc::new(d)))
                }
                other => Ok(HostOp::Command(other.clone())),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut regions = Vec::new();
        let mut start = 0;
        for (index, command) in commands.iter().enumerate() {
            if matches!(command, Command::Barrier) {
                if index > start {
                    regions.push(start..index);
                }
                start = index + 1;
            }
        }
        if commands.len() > start {
            regions.push(start..commands.len());
        }
        Ok(HostProgram { ops, regions })
    }
}

/// True when a dispatch names no binding-table slot and has a static grid.
pub fn is_fixed(dispatch: &DispatchCommand) -> bool {
    matches!(dispatch.workgroup_count, WorkgroupCount::Static(_))
        && dispatch
            .bindings
            .iter()
            .all(|b| matches!(b.source, BufferSource::Direct(_)))
}

/// Runs every command of `command_buffer` in order on the calling thread.
///
/// The command buffer was validated when recorded and the binding table at submit; what can still
/// fail here is a kernel reporting an error.
pub fn execute_inline(command_buffer: &CommandBuffer, table: &[Binding]) -> Result<()> {
    let _flush = FlushDenormals::enter();
    if command_buffer.mode().contains(CommandBufferMode::ONE_SHOT) {
        for (index, command) in command_buffer.commands()?.iter().enumerate() {
            execute_command(command, table).with_context(|| format!("executing command {index}"))?;
        }
        return Ok(());
    }
    let program = command_buffer.driver_cache(HostProgram::build)?;
    for (index, op) in program.ops.iter().enumerate() {
        match op {
            HostOp::Command(command) => execute_command(command, table),
            HostOp::Dispatch(dispatch) => dispatch.run_inline(),
        }
        .with_context(|| format!("executing command {index}"))?;
    }
    Ok(())
}

/// Runs one command on the calling thread (with denormal flushing already on).
pub fn execute_command(command: &Command, table: &[Binding]) -> Result<()> {
    match command {
        Command::Barrier => Ok(()),
        Command::Fill { target, pattern } => {
            let target = target.resolve(table)?;
            host_transfer::fill(&target.buffer, target.offset, target.length, pattern)
        }
        Command::Update { data, target } => {
            let target = target.resolve(table)?;
            host_transfer::update(data, &target.buffer, target.offset)
        }
        Command::Copy { source, target } => {
            let source = source.resolve(table)?;
            let target = target.resolve(table)?;
            host_transfer::copy(
                &source.buffer,
                source.offset,
                &target.buffer,
                target.offset,
                source.length,
            )
        }
        Command::Dispatch(dispatch) => PreparedDispatch::prepare(dispatch, table)?.run_inline(),
    }
}
