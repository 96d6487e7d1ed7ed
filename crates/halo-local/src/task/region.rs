//! A region: the commands between two barriers of one submission, as tiles for the executor.
//!
//! Every workgroup of every dispatch in the region is one tile, every transfer another; all may
//! run at once, since only barriers order commands.

use super::executor::{TileWork, WorkerContext};
use crate::command_buffer::{execute_command, HostOp, HostProgram};
use crate::dispatch::PreparedDispatch;
use halo_hal::{Binding, Command, CommandBuffer, Result, ResultExt};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

enum Item {
    /// A dispatch; tiles are its workgroups.
    Dispatch(Arc<PreparedDispatch>),
    /// A transfer command: one tile, run by the host.
    Transfer(usize),
}

/// The tiles of one region, ready to run on any thread.
pub struct Region {
    command_buffer: Arc<CommandBuffer>,
    table: Arc<[Binding]>,
    items: Vec<Item>,
    /// First tile of each item; the last entry is the tile count.
    starts: Vec<u64>,
    max_concurrency: u8,
}

impl Region {
    /// Builds the region covering `ops` of `program`, resolving slot-bound dispatches now.
    pub fn build(
        command_buffer: Arc<CommandBuffer>,
        program: &HostProgram,
        ops: Range<usize>,
        table: Arc<[Binding]>,
        max_concurrency: u8,
    ) -> Result<Self> {
        let mut items = Vec::with_capacity(ops.len());
        let mut starts = vec![0];
        for index in ops {
            let item = match &program.ops[index] {
                HostOp::Dispatch(dispatch) => Item::Dispatch(dispatch.clone()),
                HostOp::Command(Command::Dispatch(dispatch)) => Item::Dispatch(Arc::new(
                    PreparedDispatch::prepare(dispatch, &table).with_context(|| format!("command {index}"))?,
                )),
                HostOp::Command(Command::Barrier) => continue,
                HostOp::Command(_) => Item::Transfer(index),
            };
            let tiles = match &item {
                Item::Dispatch(dispatch) => dispatch.workgroup_total(),
                Item::Transfer(_) => 1,
            };
            starts.push(starts.last().copied().unwrap_or(0) + tiles);
            items.push(item);
        }
        Ok(Region {
            command_buffer,
            table,
            items,
            starts,
            max_concurrency,
        })
    }

    /// Number of tiles.
    pub fn tile_count(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Estimated cost in nanoseconds, `None` when some dispatch has never been timed.
    pub fn estimated_ns(&self) -> Option<u64> {
        self.items.iter().try_fold(0u64, |total, item| match item {
            Item::Dispatch(dispatch) => dispatch
                .workgroup_ns()
                .map(|ns| total + ns * dispatch.workgroup_total()),
            // Transfers in command buffers are at most 64 KiB updates or buffer-sized fills and
            // copies; count them as cheap and let large ones be split by the caller if ever needed.
            Item::Transfer(_) => Some(total + 1_000),
        })
    }

    fn program(&self) -> Result<&HostProgram> {
        self.command_buffer.driver_cache(HostProgram::build)
    }
}

impl TileWork for Region {
    fn run_tiles(&self, tiles: Range<u64>, context: &mut WorkerContext) -> Result<()> {
        let first_item = self.starts.partition_point(|start| *start <= tiles.start) - 1;
        for (index, item) in self.items.iter().enumerate().skip(first_item) {
            let item_tiles = self.starts[index]..self.starts[index + 1];
            if item_tiles.start >= tiles.end {
                break;
            }
            let first = tiles.start.max(item_tiles.start);
            let last = tiles.end.min(item_tiles.end);
            match item {
                Item::Dispatch(dispatch) => {
                    let processor_id = context.processor_id;
                    let scratch = context.scratch(dispatch.local_memory_size() as usize);
                    let state = dispatch.state(self.max_concurrency);
                    let started = Instant::now();
                    dispatch.run_workgroups(&state, first - item_tiles.start, last - first, processor_id, scratch)?;
                    dispatch.record_time(last - first, started.elapsed().as_nanos() as u64);
                }
                Item::Transfer(op) => match &self.program()?.ops[*op] {
                    HostOp::Command(command) => {
                        execute_command(command, &self.table).with_context(|| format!("command {op}"))?
                    }
                    HostOp::Dispatch(_) => unreachable!("transfers index transfer ops"),
                },
            }
        }
        Ok(())
    }
}
