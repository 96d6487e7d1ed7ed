//! Committing a recorded command list (halo-hal's `CommandBuffer`, validated at record and
//! submit) as one Metal command buffer: each command resolved against the submission's binding
//! table and encoded, the list's barriers kept as barriers.

use crate::backend::{Backend, Committed, Dispatch, Encoder, Span, Threadgroups};
use crate::executable::PreparedExecutable;
use halo_hal::{downcast, Binding, BufferRef, Command, DispatchCommand, Result, ResultExt, WorkgroupCount};
use std::sync::Arc;

/// Encodes `commands`, with `table` for their slots, into one command buffer of `backend` and
/// commits it.
pub(crate) fn commit(
    backend: &Arc<dyn Backend>,
    commands: &[Command],
    table: &[Binding<'_>],
) -> Result<Box<dyn Committed>> {
    let mut encoder = backend.command_buffer()?;
    for (index, command) in commands.iter().enumerate() {
        encode(backend, &mut *encoder, command, table).with_context(|| format!("running command {index}"))?;
    }
    encoder.commit()
}

fn encode(
    backend: &Arc<dyn Backend>,
    encoder: &mut dyn Encoder,
    command: &Command,
    table: &[Binding<'_>],
) -> Result<()> {
    match command {
        Command::Barrier => encoder.barrier(),
        Command::Fill { target, pattern } => encoder.fill(resolve(target, table)?, pattern),
        Command::Update { data, target } => encoder.update(resolve(target, table)?, data),
        Command::Copy { source, target } => encoder.copy(resolve(source, table)?, resolve(target, table)?),
        Command::Dispatch(dispatch) => encode_dispatch(backend, encoder, dispatch, table),
    }
}

fn resolve<'a>(reference: &'a BufferRef, table: &'a [Binding<'_>]) -> Result<Span<'a>> {
    let resolved = reference.resolve(table)?;
    Ok(Span {
        buffer: resolved.buffer,
        offset: resolved.offset,
        length: resolved.length,
    })
}

fn encode_dispatch(
    backend: &Arc<dyn Backend>,
    encoder: &mut dyn Encoder,
    dispatch: &DispatchCommand,
    table: &[Binding<'_>],
) -> Result<()> {
    let executable: &PreparedExecutable = downcast(dispatch.executable.as_any(), "a Metal executable")?;
    let bindings = (dispatch.bindings.iter().enumerate())
        .map(|(ordinal, reference)| resolve(reference, table).with_context(|| format!("binding {ordinal}")))
        .collect::<Result<Vec<_>>>()?;
    let threadgroups = match &dispatch.workgroup_count {
        WorkgroupCount::Static(count) => Threadgroups::Direct(*count),
        WorkgroupCount::Indirect(reference) => Threadgroups::Indirect(resolve(reference, table)?),
    };
    encoder.dispatch(&Dispatch {
        pipelines: executable.pipelines_for(backend)?,
        export: dispatch.export as usize,
        bindings: &bindings,
        constants: &dispatch.constants,
        threadgroups,
    })
}
