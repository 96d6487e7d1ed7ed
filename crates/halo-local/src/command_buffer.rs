//! Executing recorded command buffers on the host, shared by the CPU drivers.

use crate::dispatch::PreparedDispatch;
use halo_hal::{host_transfer, Binding, Command, CommandBuffer, Result, ResultExt};

/// Runs every command of `command_buffer` in order on the calling thread.
///
/// The command buffer was validated when recorded and the binding table at submit; what can still
/// fail here is a kernel reporting an error.
pub fn execute_inline(command_buffer: &CommandBuffer, table: &[Binding]) -> Result<()> {
    for (index, command) in command_buffer.commands()?.iter().enumerate() {
        execute_command(command, table).with_context(|| format!("executing command {index}"))?;
    }
    Ok(())
}

/// Runs one command on the calling thread.
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
