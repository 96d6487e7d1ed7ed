//! The narrow interface between the Metal driver and a Metal device: what the driver's device,
//! executable cache and command lists need, in Metal's own terms (buffers from a heap,
//! compute pipelines made from a library, a command buffer that encodes dispatches and blits
//! and is committed). The emulated backend implements it on host threads; an Apple backend over
//! `objc2-metal` implements the same methods with `MTLDevice`, `MTLComputePipelineState` and
//! `MTLCommandBuffer`.

use crate::executable_def::MetalExecutable;
use halo_hal::{Allocator, Buffer, Error, Result};
use std::any::Any;
use std::sync::Arc;

/// A Metal device as the driver uses it.
///
/// Threading: any thread; the driver calls [`Backend::command_buffer`] from one queue at a time.
pub trait Backend: Send + Sync + 'static {
    /// Where buffers come from (`MTLBuffer`s of the device's storage modes).
    fn allocator(&self) -> &dyn Allocator;

    /// One compute pipeline per export of `executable` (`newLibraryWithSource` and
    /// `newComputePipelineStateWithFunction`), prepared before any dispatch needs it.
    ///
    /// # Errors
    /// `InvalidArgument` naming the library or export whose code the device refuses;
    /// `Unimplemented` for what the backend cannot run (a metallib on the emulated device).
    fn make_pipelines(&self, executable: &MetalExecutable) -> Result<Arc<dyn Pipelines>>;

    /// A new command buffer, whose commands run in order once committed.
    fn command_buffer(&self) -> Result<Box<dyn Encoder + '_>>;
}

/// The compute pipelines of one executable, by export ordinal.
pub trait Pipelines: Send + Sync + 'static {
    /// For the backend to recover its own type.
    fn as_any(&self) -> &dyn Any;
}

/// A range of a buffer, as a command names it.
#[derive(Clone, Copy)]
pub struct Span<'a> {
    /// The buffer.
    pub buffer: &'a Buffer,
    /// Byte offset within `buffer`.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// How many threadgroups a dispatch runs.
#[derive(Clone, Copy)]
pub enum Threadgroups<'a> {
    /// Known when encoded.
    Direct([u32; 3]),
    /// Three little-endian u32s read from a buffer when the dispatch runs
    /// (`dispatchThreadgroupsWithIndirectBuffer`).
    Indirect(Span<'a>),
}

/// One dispatch of one export.
pub struct Dispatch<'a> {
    /// The executable's pipelines.
    pub pipelines: &'a dyn Pipelines,
    /// The export ordinal.
    pub export: usize,
    /// One range per HAL binding, in ordinal order: the argument buffer's `[[id(n)]]` members.
    pub bindings: &'a [Span<'a>],
    /// The 32-bit push constants, as many as the export declares.
    pub constants: &'a [u32],
    /// The grid.
    pub threadgroups: Threadgroups<'a>,
}

/// A command buffer being encoded (`MTLCommandBuffer` with its compute and blit encoders).
///
/// Commands between two barriers may run in any order or at once; a barrier orders everything
/// before it ahead of everything after.
pub trait Encoder {
    /// Encodes a dispatch.
    fn dispatch(&mut self, dispatch: &Dispatch<'_>) -> Result<()>;
    /// Repeats a 1-, 2- or 4-byte `pattern` over `target`.
    fn fill(&mut self, target: Span<'_>, pattern: &[u8]) -> Result<()>;
    /// Writes `data` (as long as `target`) into `target`.
    fn update(&mut self, target: Span<'_>, data: &[u8]) -> Result<()>;
    /// Copies `source` into `target`, of the same length.
    fn copy(&mut self, source: Span<'_>, target: Span<'_>) -> Result<()>;
    /// Orders what was encoded before ahead of what comes after.
    fn barrier(&mut self) -> Result<()>;
    /// Commits the command buffer: it runs after every one committed before it
    /// (`MTLCommandQueue` order).
    ///
    /// # Errors
    /// A failure to hand it to the device.
    fn commit(self: Box<Self>) -> Result<Box<dyn Committed>>;
}

/// A committed command buffer, holding what its commands use until they have run.
pub trait Committed: Send {
    /// Waits until all of it has run.
    ///
    /// # Errors
    /// The first failure of any command, naming it.
    fn wait(self: Box<Self>) -> Result<()>;
}

/// The most threadgroups one dispatch runs: Metal counts them in 32 bits.
pub const MAX_THREADGROUPS: u64 = u32::MAX as u64;

/// Refuses a grid a Metal kernel cannot index: its threads' positions in the grid are 32-bit
/// (`uint3 thread_position_in_grid`), and a dispatch runs at most [`MAX_THREADGROUPS`].
///
/// # Errors
/// `OutOfRange` naming the count and the limit it passes.
pub fn check_grid(threadgroups: [u32; 3], threadgroup_size: [u32; 3]) -> Result<()> {
    const MAX_THREADS_PER_DIMENSION: u64 = 1 << 32;
    for (dimension, (&count, &size)) in threadgroups.iter().zip(&threadgroup_size).enumerate() {
        if u64::from(count) * u64::from(size) > MAX_THREADS_PER_DIMENSION {
            return Err(Error::out_of_range(format!(
                "threadgroup count {count} in dimension {dimension} times the threadgroup size {size} passes the \
                 {MAX_THREADS_PER_DIMENSION} threads a Metal grid indexes"
            )));
        }
    }
    let total: u128 = threadgroups.iter().map(|&c| u128::from(c)).product();
    if total > u128::from(MAX_THREADGROUPS) {
        return Err(Error::out_of_range(format!(
            "threadgroup counts {threadgroups:?} make {total} threadgroups; a Metal dispatch runs at most \
             {MAX_THREADGROUPS}"
        )));
    }
    Ok(())
}
