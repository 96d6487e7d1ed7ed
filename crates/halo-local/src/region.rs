//! Regions: the commands between two barriers, as tiles any thread may run.
//!
//! Every workgroup of every dispatch in a region is one tile, and every 64 KiB piece of a fill or
//! copy another; all may run at once, since only barriers order commands. `local-sync` runs a
//! region's tiles in order on the submitting thread; `local-task` spreads them over its workers.

use crate::tile::{TileWork, WorkerContext};
use halo_cpu_executable::dispatch::PreparedDispatch;
use halo_hal::{host_transfer, Binding, Command, Overlap, Result, ResultExt};
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Timing every run would cost as much as a tiny kernel; once a cost is known, sample 1 in this.
const TIMING_SAMPLE_PERIOD: u32 = 32;

/// Fills and copies are cut into pieces of this many bytes, each a tile of its own, so that the
/// workers share a large transfer instead of one running it while the others wait at the next
/// barrier (DenseNet's concatenations copy 40 MB a call). IREE's local-task cuts at this length.
pub const TRANSFER_TILE_BYTES: u64 = 64 << 10;

/// Bytes a thread fills or copies per nanosecond, for estimating what a transfer costs: a
/// region of small transfers runs where it is, a large one goes to the workers.
const TRANSFER_BYTES_PER_NS: u64 = 8;

enum Item {
    /// A dispatch; its tiles are its workgroups.
    Dispatch {
        dispatch: Box<PreparedDispatch<'static>>,
        runs: AtomicU32,
    },
    /// A fill, update or copy of `bytes` bytes, run as `pieces` tiles.
    Transfer { command: Command, bytes: u64, pieces: u64 },
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
                transfer => {
                    let (bytes, pieces) =
                        transfer_tiles(transfer, &table).with_context(|| format!("command {index}"))?;
                    let command = transfer.clone();
                    (Item::Transfer { command, bytes, pieces }, pieces)
                }
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
            Item::Transfer { bytes, .. } => Some(total.saturating_add(1_000 + bytes / TRANSFER_BYTES_PER_NS)),
        })
    }

    fn run_item(&self, index: usize, tiles: Range<u64>, context: &mut WorkerContext) -> Result<()> {
        match &self.items[index] {
            Item::Dispatch { dispatch, runs } => run_dispatch(dispatch, runs, tiles, context),
            // A transfer that is not cut is one tile standing for all of it.
            Item::Transfer { command, pieces, .. } => {
                execute_transfer(command, &self.table, (*pieces > 1).then_some(tiles))
            }
        }
    }
}

/// Runs workgroups `tiles` of `dispatch`, timing one run in [`TIMING_SAMPLE_PERIOD`] (counted in
/// `runs`) so the scheduler learns what a workgroup costs.
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
    // Reading the clock costs about as much as a tiny dispatch, so only sampled runs do.
    let timed = run.is_multiple_of(TIMING_SAMPLE_PERIOD) || dispatch.workgroup_ns().is_none();
    let started = timed.then(Instant::now);
    let state = dispatch.state(context.max_concurrency);
    let processor_id = context.processor_id;
    let scratch = context.scratch(dispatch.local_memory_size() as usize);
    dispatch.run_workgroups(&state, tiles.start, tiles.end - tiles.start, processor_id, scratch)?;
    if let Some(started) = started {
        dispatch.record_time(tiles.end - tiles.start, started.elapsed().as_nanos() as u64);
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
            transfer => {
                execute_transfer(transfer, table, None).with_context(|| format!("executing command {index}"))?
            }
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

/// The bytes a transfer moves and the tiles it is cut into: one per [`TRANSFER_TILE_BYTES`] of
/// a fill or copy, one for an update, a fill whose pattern does not divide the piece length, or
/// a copy within one range (which must run front to back or back to front as a whole).
fn transfer_tiles(command: &Command, table: &[Binding]) -> Result<(u64, u64)> {
    let (bytes, divisible) = match command {
        Command::Fill { target, pattern } => (
            target.resolve(table)?.length,
            TRANSFER_TILE_BYTES.is_multiple_of(pattern.len().max(1) as u64),
        ),
        Command::Update { data, .. } => (data.len() as u64, false),
        Command::Copy { source, target } => {
            let (source, target) = (source.resolve(table)?, target.resolve(table)?);
            let overlap = source.buffer.overlap(
                source.offset,
                source.length,
                target.buffer,
                target.offset,
                target.length,
            );
            (source.length, overlap == Overlap::Disjoint)
        }
        Command::Barrier | Command::Dispatch(_) => (0, false),
    };
    let tiles = if divisible {
        bytes.div_ceil(TRANSFER_TILE_BYTES).max(1)
    } else {
        1
    };
    Ok((bytes, tiles))
}

/// The byte range of `pieces` of a `length`-byte transfer cut at [`TRANSFER_TILE_BYTES`]; all
/// of it when `None`.
fn piece(pieces: &Option<Range<u64>>, length: u64) -> Range<u64> {
    let at = |tile: u64| tile.saturating_mul(TRANSFER_TILE_BYTES).min(length);
    pieces
        .as_ref()
        .map_or(0..length, |pieces| at(pieces.start)..at(pieces.end))
}

/// Runs `pieces` of a fill or copy (all of it when `None`; an update is always whole) on the
/// calling thread.
pub fn execute_transfer(command: &Command, table: &[Binding], pieces: Option<Range<u64>>) -> Result<()> {
    let _span = tracing::info_span!("transfer", command = tracing::field::Empty).entered();
    if !_span.is_disabled() {
        _span.record("command", transfer_name(command));
    }
    match command {
        Command::Fill { target, pattern } => {
            let target = target.resolve(table)?;
            let bytes = piece(&pieces, target.length);
            host_transfer::fill(
                target.buffer,
                target.offset + bytes.start,
                bytes.end - bytes.start,
                pattern,
            )
        }
        Command::Update { data, target } => {
            let target = target.resolve(table)?;
            host_transfer::update(data, target.buffer, target.offset)
        }
        Command::Copy { source, target } => {
            let source = source.resolve(table)?;
            let target = target.resolve(table)?;
            let bytes = piece(&pieces, source.length);
            host_transfer::copy(
                source.buffer,
                source.offset + bytes.start,
                target.buffer,
                target.offset + bytes.start,
                bytes.end - bytes.start,
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

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::host_memory::HostAllocation;
    use halo_hal::{Buffer, BufferRef, BufferUsage, MemoryAccess, MemoryType};

    fn buffer(size: u64) -> Buffer {
        let allocation = HostAllocation::new(size, MemoryType::HOST_LOCAL).unwrap();
        Buffer::new(
            Arc::new(allocation),
            BufferUsage::DEFAULT | BufferUsage::MAPPING,
            MemoryAccess::ALL,
        )
    }

    fn tiles_of(command: Command, table: &[Binding<'static>]) -> u64 {
        Region::build(&[command], 0..1, Arc::from(table)).unwrap().tile_count()
    }

    #[test]
    fn fills_and_copies_are_cut_at_the_transfer_tile_length() {
        let (a, b) = (buffer(1 << 20), buffer(1 << 20));
        let fill = |length| Command::Fill {
            target: BufferRef::direct(&a, 4, length),
            pattern: vec![1, 2, 3, 4],
        };
        assert_eq!(tiles_of(fill(0), &[]), 1);
        assert_eq!(tiles_of(fill(TRANSFER_TILE_BYTES), &[]), 1);
        assert_eq!(tiles_of(fill(TRANSFER_TILE_BYTES + 4), &[]), 2);
        let copy = Command::Copy {
            source: BufferRef::direct(&a, 0, 300_000),
            target: BufferRef::direct(&b, 7, 300_000),
        };
        assert_eq!(tiles_of(copy, &[]), 5);
        let update = Command::Update {
            data: vec![0; 60_000].into(),
            target: BufferRef::direct(&a, 0, 60_000),
        };
        assert_eq!(tiles_of(update, &[]), 1);
    }

    #[test]
    fn a_copy_whose_slots_overlap_stays_one_piece() {
        let a = buffer(1 << 20);
        let pattern: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        a.map_range(MemoryAccess::WRITE, 0, 1 << 20)
            .unwrap()
            .write(0, &pattern)
            .unwrap();
        let slot = |offset| Binding {
            buffer: std::borrow::Cow::Owned(a.clone()),
            offset,
            length: 600_000,
        };
        let table = [slot(0), slot(100_000)];
        let copy = |target_slot| Command::Copy {
            source: BufferRef::slot(0, 0, 500_000),
            target: BufferRef::slot(target_slot, 0, 500_000),
        };
        assert_eq!(tiles_of(copy(1), &table), 1, "overlapping ranges");
        let region = Region::build(&[copy(1)], 0..1, Arc::from(table.clone())).unwrap();
        let mut context = WorkerContext::new(0, 1);
        region.run_tiles(0..1, &mut context).unwrap();
        let after = a.read_all().unwrap();
        assert!(after[100_000..600_000] == pattern[..500_000], "not copied as one move");
    }
}
