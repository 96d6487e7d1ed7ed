//! Freed allocations kept for reuse, for the memory that has no stream-ordered pool: pinned host
//! memory, managed memory, and device memory when `async_allocations=false`.
//!
//! `cuMemAllocHost`, `cuMemAllocManaged` and their frees synchronize with the device and cost far
//! more than the small copies made through them, and IREE programs allocate a host-visible
//! staging buffer for every value they read back in the middle of a call (`tensor.extract` in a
//! loop condition). Keeping freed blocks turns those into a lookup. A block is reused only once
//! its allocation was dropped, which happens after every submission using it completed.

use crate::buffer::MemoryKind;
use std::collections::HashMap;
use std::sync::Mutex;

/// The largest block kept: bigger allocations are rare per call, and rounding them up to a
/// power of two would waste more than it saves.
const MAX_BLOCK: usize = 4 << 20;

/// The most bytes kept in all, so that a program that once read back much holds no more.
const MAX_KEPT: usize = 64 << 20;

/// The smallest block: the drivers align every allocation to 256 bytes anyway.
const MIN_BLOCK: usize = 256;

/// The size an allocation of `bytes` is made at: the next power of two for sizes that may be
/// kept, so that a freed block serves later allocations of about the same size; larger sizes
/// exactly.
pub(crate) fn block_size(bytes: usize) -> usize {
    if bytes > MAX_BLOCK {
        return bytes;
    }
    bytes.max(MIN_BLOCK).next_power_of_two()
}

/// Freed blocks by kind and block size.
///
/// Ownership: the device's shared state owns it and frees what it holds before the context goes
/// (`drain`). Threading: any thread.
#[derive(Default)]
pub(crate) struct Recycler(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    blocks: HashMap<(MemoryKind, usize), Vec<u64>>,
    bytes: usize,
}

impl Recycler {
    /// A kept block of `kind` and size `block`, if there is one.
    pub(crate) fn take(&self, kind: MemoryKind, block: usize) -> Option<u64> {
        let mut kept = self.lock();
        let pointer = kept.blocks.get_mut(&(kind, block))?.pop()?;
        kept.bytes -= block;
        Some(pointer)
    }

    /// Keeps the freed block at `pointer`, or hands it back (`Err`) for the caller to free when
    /// it is too large or the recycler is full.
    pub(crate) fn keep(&self, kind: MemoryKind, block: usize, pointer: u64) -> Result<(), u64> {
        let mut kept = self.lock();
        if block > MAX_BLOCK || !block.is_power_of_two() || kept.bytes + block > MAX_KEPT {
            return Err(pointer);
        }
        kept.bytes += block;
        kept.blocks.entry((kind, block)).or_default().push(pointer);
        Ok(())
    }

    /// The bytes of the blocks kept.
    pub(crate) fn kept_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Every kept block, which the caller frees; the recycler is empty afterwards.
    pub(crate) fn drain(&self) -> Vec<(MemoryKind, u64)> {
        let mut kept = self.lock();
        kept.bytes = 0;
        kept.blocks
            .drain()
            .flat_map(|((kind, _), pointers)| pointers.into_iter().map(move |pointer| (kind, pointer)))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sizes_round_up_to_powers_of_two_and_large_ones_stay() {
        assert_eq!(block_size(0), 256);
        assert_eq!(block_size(4), 256);
        assert_eq!(block_size(257), 512);
        assert_eq!(block_size(4 << 20), 4 << 20);
        assert_eq!(block_size((4 << 20) + 1), (4 << 20) + 1);
    }

    #[test]
    fn a_kept_block_serves_only_its_kind_and_size_once() {
        let recycler = Recycler::default();
        assert_eq!(recycler.keep(MemoryKind::PinnedHost, 512, 0x1000), Ok(()));
        assert_eq!(recycler.take(MemoryKind::Managed, 512), None);
        assert_eq!(recycler.take(MemoryKind::PinnedHost, 256), None);
        assert_eq!(recycler.take(MemoryKind::PinnedHost, 512), Some(0x1000));
        assert_eq!(recycler.take(MemoryKind::PinnedHost, 512), None);
    }

    #[test]
    fn large_blocks_and_blocks_past_the_limit_are_handed_back() {
        let recycler = Recycler::default();
        let large = (4 << 20) + 256;
        assert_eq!(recycler.keep(MemoryKind::Device, large, 0x1000), Err(0x1000));
        let block = 4 << 20;
        for i in 0..(MAX_KEPT / block) as u64 {
            assert_eq!(recycler.keep(MemoryKind::Device, block, 0x1000 + i), Ok(()));
        }
        assert_eq!(recycler.keep(MemoryKind::Device, 256, 0x9000), Err(0x9000), "full");
        assert!(recycler.take(MemoryKind::Device, block).is_some());
        assert_eq!(recycler.keep(MemoryKind::Device, 256, 0x9000), Ok(()), "room again");
    }

    #[test]
    fn drain_hands_back_everything_kept() {
        let recycler = Recycler::default();
        recycler.keep(MemoryKind::PinnedHost, 256, 1).unwrap();
        recycler.keep(MemoryKind::Managed, 1024, 2).unwrap();
        assert_eq!(recycler.kept_bytes(), 1280);
        let mut drained = recycler.drain();
        drained.sort();
        assert_eq!(recycler.kept_bytes(), 0);
        assert_eq!(drained, [(MemoryKind::PinnedHost, 1), (MemoryKind::Managed, 2)]);
        assert_eq!(recycler.take(MemoryKind::PinnedHost, 256), None);
        assert_eq!(
            recycler.keep(MemoryKind::Device, MAX_BLOCK, 3),
            Ok(()),
            "the count is reset"
        );
    }
}
