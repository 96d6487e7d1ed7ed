//! Command buffers on the CPU: split at barriers into regions, resolved once where possible.
//!
//! A command buffer is translated once (and cached on it) into a [`HostProgram`]: regions whose
//! commands name no binding-table slot are resolved up front, so resubmitting costs only the
//! kernel calls; the others are resolved against each submission's binding table.

use crate::region::{run_commands_inline, Region};
use crate::tile::{TileWork, WorkerContext};
use halo_cpu_executable::float_mode::FlushDenormals;
use halo_hal::{Binding, BufferRef, BufferSource, Command, CommandBuffer, Result, WorkgroupCount};
use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// One region of a program.
pub enum RegionPlan {
    /// Resolved when the program was built.
    Fixed(Arc<Region>),
    /// Names binding-table slots: resolved per submission from these commands.
    PerSubmission(Range<usize>),
}

/// A command buffer ready to run on the host.
pub struct HostProgram {
    /// The regions, in order; a barrier separates each from the next.
    pub regions: Vec<RegionPlan>,
}

impl HostProgram {
    /// Splits `commands` at barriers and resolves the regions that need no binding table.
    pub fn build(commands: &[Command]) -> Result<Self> {
        let mut regions = Vec::new();
        let mut start = 0;
        for end in commands
            .iter()
            .enumerate()
            .filter_map(|(i, c)| matches!(c, Command::Barrier).then_some(i))
            .chain([commands.len()])
        {
            if end > start {
                let range = start..end;
                regions.push(if commands[range.clone()].iter().all(is_fixed) {
                    RegionPlan::Fixed(Arc::new(Region::build(commands, range, Arc::from([]))?))
                } else {
                    RegionPlan::PerSubmission(range)
                });
            }
            start = end + 1;
        }
        Ok(HostProgram { regions })
    }

    /// Region `index` for a submission with `table`.
    pub fn region(
        &self,
        command_buffer: &CommandBuffer,
        index: usize,
        table: &Arc<[Binding<'static>]>,
    ) -> Result<Arc<Region>> {
        match &self.regions[index] {
            RegionPlan::Fixed(region) => Ok(region.clone()),
            RegionPlan::PerSubmission(range) => Ok(Arc::new(Region::build(
                command_buffer.commands()?,
                range.clone(),
                table.clone(),
            )?)),
        }
    }
}

/// True when a command's buffers and grid are known at record time.
fn is_fixed(command: &Command) -> bool {
    let direct = |r: &BufferRef| matches!(r.source, BufferSource::Direct(_));
    match command {
        Command::Barrier => true,
        Command::Fill { target, .. } | Command::Update { target, .. } => direct(target),
        Command::Copy { source, target } => direct(source) && direct(target),
        Command::Dispatch(dispatch) => {
            matches!(dispatch.workgroup_count, WorkgroupCount::Static(_)) && dispatch.bindings.iter().all(direct)
        }
    }
}

thread_local! {
    /// Scratch memory and processor id for tiles run outside the executor's workers.
    static CONTEXT: RefCell<WorkerContext> = RefCell::new(WorkerContext::new(0, 1));
}

/// Runs `work` on the calling thread with its worker context and denormals flushed.
fn on_this_thread<T>(work: impl FnOnce(&mut WorkerContext) -> Result<T>) -> Result<T> {
    CONTEXT.with(|context| {
        let _flush = FlushDenormals::enter();
        work(&mut context.borrow_mut())
    })
}

/// Runs every tile of `region` in order on the calling thread; returns the nanoseconds it took.
pub fn run_region_inline(region: &Region) -> Result<u64> {
    on_this_thread(|context| {
        let started = Instant::now();
        region.run_tiles(0..region.tile_count(), context)?;
        Ok(started.elapsed().as_nanos() as u64)
    })
}

/// Runs every command of `command_buffer` in order on the calling thread.
///
/// The command buffer was validated when recorded and the binding table at submit; what can still
/// fail here is a kernel reporting an error.
pub fn execute_inline(command_buffer: &CommandBuffer, table: &[Binding]) -> Result<()> {
    let program = command_buffer.driver_cache(HostProgram::build)?;
    // One denormal-mode switch for the whole submission: reading and writing MXCSR around each
    // region made a small dispatch 1.8x slower (elementwise_f32.special in benchmark-executable,
    // barriers between dispatches: 157 ns per dispatch, 89 ns with one switch).
    on_this_thread(|context| {
        for plan in &program.regions {
            match plan {
                RegionPlan::Fixed(region) => region.run_tiles(0..region.tile_count(), context)?,
                RegionPlan::PerSubmission(range) => {
                    run_commands_inline(command_buffer.commands()?, range.clone(), table, context)?
                }
            }
        }
        Ok(())
    })
}
