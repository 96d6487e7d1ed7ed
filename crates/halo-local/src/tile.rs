//! Work split into tiles, and what a thread running tiles carries: the seam between the code that
//! runs workgroups (`region`, `command_buffer`) and the code that spreads them over threads (the
//! `task` executor, or the caller's thread for `local-sync`), so the first never depends on the
//! second.

use halo_cpu_executable::library::LocalMemory;
use halo_hal::Result;
use std::ops::Range;
use std::sync::Arc;

/// Per-thread state handed to every tile: the processor id and workgroup scratch memory.
pub struct WorkerContext {
    /// Logical processor id (worker index).
    pub processor_id: u32,
    /// How many threads may run workgroups of one dispatch at once (the ABI's `max_concurrency`).
    pub max_concurrency: u8,
    scratch: LocalMemory,
    /// Nanoseconds spent running commands (workgroups and transfers) since
    /// [`WorkerContext::take_busy_ns`] last ran.
    busy_ns: u64,
}

impl WorkerContext {
    /// A context for processor `processor_id` of `max_concurrency`.
    pub fn new(processor_id: u32, max_concurrency: u8) -> Self {
        WorkerContext {
            processor_id,
            max_concurrency,
            scratch: LocalMemory::default(),
            busy_ns: 0,
        }
    }

    /// Counts `ns` more nanoseconds of running workgroups.
    pub fn add_busy_ns(&mut self, ns: u64) {
        self.busy_ns = self.busy_ns.saturating_add(ns);
    }

    /// The nanoseconds counted since the last call, which resets the count.
    pub fn take_busy_ns(&mut self) -> u64 {
        std::mem::take(&mut self.busy_ns)
    }

    /// Workgroup local memory of `bytes` bytes, 64-byte aligned, zeroed on first use and reused
    /// across tiles.
    pub fn scratch(&mut self, bytes: usize) -> &mut [u8] {
        self.scratch.bytes(bytes)
    }
}

/// Work split into independent tiles.
pub trait TileWork: Send + Sync {
    /// Runs tiles `[tiles.start, tiles.end)`; tiles of one job may run concurrently on different
    /// threads.
    fn run_tiles(&self, tiles: Range<u64>, context: &mut WorkerContext) -> Result<()>;
}

impl<T: TileWork + ?Sized> TileWork for Arc<T> {
    fn run_tiles(&self, tiles: Range<u64>, context: &mut WorkerContext) -> Result<()> {
        (**self).run_tiles(tiles, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workgroup_local_memory_is_64_byte_aligned_at_every_size() {
        let mut context = WorkerContext::new(0, 1);
        for bytes in [8usize, 4096, 10_000, 65_536] {
            let scratch = context.scratch(bytes);
            assert_eq!(
                (scratch.len(), scratch.as_ptr() as usize % 64),
                (bytes, 0),
                "{bytes} bytes"
            );
        }
    }
}
