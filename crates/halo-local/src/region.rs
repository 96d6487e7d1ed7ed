//! Regions: the commands between two barriers, as tiles any thread may run.
//!
//! Every workgroup of every dispatch in a region is one tile and every transfer another; all may
//! run at once, since only barriers order commands. `local-sync` runs a region's tiles in order
//! on the submitting thread; `local-task` spreads them over its workers.

use crate::tile::{TileWork, WorkerContext};
use halo_cpu_executable::dispatch::PreparedDispatch;
use halo_hal::{host_transfer, Binding, Command, Result, ResultExt};
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Timing every run would cost as much as a tiny kernel; once a cost is known, sample 1 in this.
const TIMING_SAMPLE_PERIOD: u32 = 32;

enum Item {
    /// A dispatch; its tiles are its workgroups.
    Dispatch {
        dispatch: Box<PreparedDispatch<'static>>,
        runs: AtomicU32,
    },
    /// A transfer command: one tile, run by the host.
    Transfer(Command),
}

/// The tiles of one region, resolved against one binding table.
pub struct Region {
    items: Vec<Item>,
    /// First tile of each item; the last entry is the tile count.
    starts: Vec<u64>,
    /// Index of each item's command in the command buffer, for error messages.
    command_indices: Vec<usize>,
    table: Arc<[Binding<'static>]>,
}

impl Region {
    /// Resolves `commands[range]` against `table` (which only slot references use).
    pub fn build(commands: &[Command], range: Range<usize>, table: Arc<[Binding<'static>]>) -> Result<Self> {
        let mut items = Vec::with_capacity(range.len());
        let mut starts = vec![0];
        let mut command_indices = Vec::with_capacity(range.len());
        for index in range {
            let (item, tiles) = match &commands[index] {
                Command::Barrier => continue,
                Command::Dispatch(dispatch) => {
                    let dispatch =
                        PreparedDispatch::owning(dispatch, &table).with_context(|| format!("command {index}"))?;
                    let tiles = dispatch.workgroup_total();
                    (
                        Item::Dispatch {
                            dispatch: Box::new(dispatch),
                            runs: AtomicU32::new(0),
                        },
                        tiles,
                    )
                }
                transfer => (Item::Transfer(transfer.clone()), 1),
            };
            starts.push(starts.last().copied().unwrap_or(0) + tiles);
            items.push(item);
            command_indices.push(index);
        }
        Ok(Region {
            items,
            starts,
            command_indices,
            table,
        })
    }

    /// Number of tiles.
    pub fn tile_count(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Estimated cost in nanoseconds, `None` while some dispatch has never been timed.
    pub fn estimated_ns(&self) -> Option<u64> {
        self.items.iter().try_fold(0u64, |total, item| match item {
            Item::Dispatch { dispatch, .. } => dispatch
                .workgroup_ns()
                .map(|ns| total.saturating_add(ns.saturating_mul(dispatch.workgroup_total()))),
            // Command buffer transfers are small updates or memory-bandwidth fills and copies.
            Item::Transfer(_) => Some(total + 1_000),
        })
    }

    fn run_item(&self, index: usize, tiles: Range<u64>, context: &mut WorkerContext) -> Result<()> {
        match &self.items[index] {
            Item::Dispatch { dispatch, runs } => run_dispatch(dispatch, runs, tiles, context),
            Item::Transfer(command) => execute_transfer(command, &self.table),
        }
    }
}

/// Runs workgroups `tiles` of `dispatch`, counting the time in the worker's busy time, and
/// recording one run in [`TIMING_SAMPLE_PERIOD`] (counted in `runs`) so the scheduler learns what
/// a workgroup costs.
fn run_dispatch(
    dispatch: &PreparedDispatch<'_>,
    runs: &AtomicU32,
    tiles: Range<u64>,
    context: &mut WorkerContext,
) -> Result<()> {
    let span = tracing::info_span!(
        "dispatch",
        export = tracing::field::Empty,
        workgroup_count = tracing::field::Empty,
        workgroups = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let export = dispatch.export_name();
        span.record("export", export.as_str());
        span.record("workgroup_count", format!("{:?}", dispatch.workgroup_count()));
        span.record("workgroups", format!("{}..{}", tiles.start, tiles.end));
    }
    let _entered = span.enter();
    let run = runs.load(Ordering::Relaxed);
    runs.store(run.wrapping_add(1), Ordering::Relaxed);
    let timed = run.is_multiple_of(TIMING_SAMPLE_PERIOD) || dispatch.workgroup_ns().is_none();
    let started = Instant::now();
    let state = dispatch.state(context.max_concurrency);
    let processor_id = context.processor_id;
    let scratch = context.scratch(dispatch.local_memory_size() as usize);
    let outcome = dispatch.run_workgroups(&state, tiles.start, tiles.end - tiles.start, processor_id, scratch);
    let elapsed = started.elapsed().as_nanos() as u64;
    context.add_busy_ns(elapsed);
    outcome?;
    if timed {
        dispatch.record_time(tiles.end - tiles.start, elapsed);
    }
    Ok(())
}

/// Runs `commands[range]` (no barriers inside) one after another on the calling thread,
/// resolving each against `table` as it goes: what a region does, without building one (the
/// synchronous driver runs each submission once, so there is nothing to keep).
pub fn run_commands_inline(
    commands: &[Command],
    range: Range<usize>,
    table: &[Binding],
    context: &mut WorkerContext,
) -> Result<()> {
    for index in range {
        match &commands[index] {
            Command::Barrier => {}
            Command::Dispatch(dispatch) => {
                let dispatch =
                    PreparedDispatch::borrowing(dispatch, table).with_context(|| format!("command {index}"))?;
                // A run count off the sampling period: time only until a first cost is known.
                run_dispatch(&dispatch, &AtomicU32::new(1), 0..dispatch.workgroup_total(), context)
                    .with_context(|| format!("executing command {index}"))?;
            }
            transfer => execute_transfer(transfer, table).with_context(|| format!("executing command {index}"))?,
        }
    }
    Ok(())
}

impl TileWork for Region {
    fn run_tiles(&self, tiles: Range<u64>, context: &mut WorkerContext) -> Result<()> {
        let first_item = self
            .starts
            .partition_point(|start| *start <= tiles.start)
            .saturating_sub(1);
        for index in first_item..self.items.len() {
            let item_tiles = self.starts[index]..self.starts[index + 1];
            if item_tiles.start >= tiles.end {
                break;
            }
            let first = tiles.start.max(item_tiles.start) - item_tiles.start;
            let last = tiles.end.min(item_tiles.end) - item_tiles.start;
            if first < last {
                self.run_item(index, first..last, context)
                    .with_context(|| format!("executing command {}", self.command_indices[index]))?;
            }
        }
        Ok(())
    }
}

/// Runs a fill, update or copy on the calling thread.
pub fn execute_transfer(command: &Command, table: &[Binding]) -> Result<()> {
    let _span = tracing::info_span!("transfer", command = tracing::field::Empty).entered();
    if !_span.is_disabled() {
        _span.record("command", transfer_name(command));
    }
    match command {
        Command::Fill { target, pattern } => {
            let target = target.resolve(table)?;
            host_transfer::fill(target.buffer, target.offset, target.length, pattern)
        }
        Command::Update { data, target } => {
            let target = target.resolve(table)?;
            host_transfer::update(data, target.buffer, target.offset)
        }
        Command::Copy { source, target } => {
            let source = source.resolve(table)?;
            let target = target.resolve(table)?;
            host_transfer::copy(
                source.buffer,
                source.offset,
                target.buffer,
                target.offset,
                source.length,
            )
        }
        Command::Barrier | Command::Dispatch(_) => unreachable!("regions hold only transfers here"),
    }
}

/// A transfer command's kind, for traces.
fn transfer_name(command: &Command) -> &'static str {
    match command {
        Command::Fill { .. } => "fill",
        Command::Update { .. } => "update",
        Command::Copy { .. } => "copy",
        _ => "other",
    }
}
