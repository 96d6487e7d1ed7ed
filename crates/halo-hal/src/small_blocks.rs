//! Host allocations under [`MAPPED_FROM_BYTES`], carved from mappings of their own instead of the
//! Rust heap.
//!
//! Compiled kernels check no bounds. While small buffers came from the heap, a damaged kernel
//! storing a little past one wrote over the allocator's or halo's own objects, and the process
//! died later in an unrelated `free` (`scripts/mutate-modules --seed 905`: one byte of a matmul
//! kernel made it store 200 bytes past its 48-byte output). Carved from here, such a store lands in
//! another buffer's bytes (the damaged program's results are wrong, as they are anyway) or on the
//! guard regions around each chunk, and halo's own memory is untouched. The `guard_pages` device
//! parameter still maps each buffer alone, to name the kernel at fault.
//!
//! Blocks come in size classes (multiples of 64 bytes up to 256, then four a doubling, so at most
//! a fifth of a block is slack) and a freed block waits in its class for the next request of that
//! class. As with a heap, what the pool keeps is what was once in use at the same time, and it is
//! not given back to the system; the transient pool already serves a program's per-call memory.

use crate::guarded_memory::{GuardedRegion, GUARD_BEFORE};
use crate::host_memory::{HOST_ALIGNMENT, MAPPED_FROM_BYTES};
use crate::{Error, Result};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

/// The classes below 256 bytes: one for each multiple of [`HOST_ALIGNMENT`].
const SMALLEST_CLASSES: usize = 256 / HOST_ALIGNMENT;
/// Classes between two powers of two from 256 bytes up.
const CLASSES_PER_DOUBLING: usize = 4;
/// Enough classes for every size below [`MAPPED_FROM_BYTES`] (1 MiB: twelve doublings past 256).
const CLASS_COUNT: usize = SMALLEST_CLASSES + 12 * CLASSES_PER_DOUBLING;
/// Smallest chunk a class maps at once; larger classes map four blocks at a time.
const CHUNK_BYTES: usize = 256 << 10;
/// Inaccessible address space kept before and after each chunk.
const CHUNK_GUARD: usize = GUARD_BEFORE;

/// Bytes in each block of `class`: always a multiple of [`HOST_ALIGNMENT`].
const fn block_size(class: usize) -> usize {
    if class < SMALLEST_CLASSES {
        return (class + 1) * HOST_ALIGNMENT;
    }
    let past = class - SMALLEST_CLASSES;
    let base = 256 << (past / CLASSES_PER_DOUBLING);
    base + (past % CLASSES_PER_DOUBLING + 1) * (base / CLASSES_PER_DOUBLING)
}

/// The smallest class whose blocks hold `bytes` (at least 1).
fn class_of(bytes: usize) -> usize {
    let bytes = bytes.max(1);
    if bytes <= 256 {
        return (bytes - 1) / HOST_ALIGNMENT;
    }
    // `base` is the power of two below `bytes`; the class is the step above it that reaches it.
    let doubling = (usize::BITS - 1 - (bytes - 1).leading_zeros()) as usize - 8;
    let base = 256usize << doubling;
    let step = (bytes - base).div_ceil(base / CLASSES_PER_DOUBLING);
    SMALLEST_CLASSES + doubling * CLASSES_PER_DOUBLING + step - 1
}

/// The blocks of one size class.
struct Class {
    /// Freed blocks, reused last-freed first while their lines may still be cached.
    free: Vec<NonNull<u8>>,
    /// The addresses of the newest chunk no block was carved from yet.
    fresh: Range<usize>,
    /// Blocks carved so far; `free` always has room for all of them, so giving one back never
    /// allocates.
    carved: usize,
}

/// Size-classed blocks carved from guarded chunks; the process uses one ([`SmallBlock::take`]).
pub(crate) struct BlockPool {
    classes: Mutex<[Class; CLASS_COUNT]>,
}

// SAFETY: the pool's pointers address chunks it mapped and never unmaps; it hands each block to
// one owner at a time, under the lock.
unsafe impl Send for BlockPool {}
// SAFETY: as above; every access to the lists goes through the mutex.
unsafe impl Sync for BlockPool {}

static POOL: BlockPool = BlockPool::new();

impl BlockPool {
    pub(crate) const fn new() -> Self {
        const EMPTY: Class = Class {
            free: Vec::new(),
            fresh: 0..0,
            carved: 0,
        };
        BlockPool {
            classes: Mutex::new([EMPTY; CLASS_COUNT]),
        }
    }

    /// A block of `class`, not yet zeroed.
    fn block(&self, class: usize) -> Result<NonNull<u8>> {
        let mut classes = self.classes.lock().unwrap_or_else(PoisonError::into_inner);
        let class_state = &mut classes[class];
        if let Some(block) = class_state.free.pop() {
            return Ok(block);
        }
        let size = block_size(class);
        let exhausted = |what: String| {
            Error::resource_exhausted(format!("cannot allocate a {size}-byte block of host memory: {what}"))
        };
        // Room to give back every block carved (the list is empty here), reserved before carving
        // one more.
        class_state
            .free
            .try_reserve(class_state.carved + 1)
            .map_err(|_| exhausted("no memory for the free list".into()))?;
        if class_state.fresh.len() < size {
            class_state.fresh = map_chunk((4 * size).max(CHUNK_BYTES)).map_err(exhausted)?;
        }
        let block = class_state.fresh.start;
        class_state.fresh.start += size;
        class_state.carved += 1;
        NonNull::new(block as *mut u8).ok_or_else(|| exhausted("a chunk at address 0".into()))
    }

    fn give_back(&self, class: usize, block: NonNull<u8>) {
        let mut classes = self.classes.lock().unwrap_or_else(PoisonError::into_inner);
        // Never grows: the list has room for every block carved.
        classes[class].free.push(block);
    }
}

/// The addresses of `len` (rounded up to whole pages) fresh, readable, writable bytes between two
/// inaccessible regions of [`CHUNK_GUARD`] bytes, mapped for the rest of the process.
fn map_chunk(len: usize) -> std::result::Result<Range<usize>, String> {
    let chunk = GuardedRegion::map(CHUNK_GUARD, len, CHUNK_GUARD).map_err(|e| format!("mapping a chunk: {e}"))?;
    let addresses = chunk.start() as usize..chunk.end();
    // The pool hands out its blocks for the process's life, so it never unmaps a chunk.
    std::mem::forget(chunk);
    Ok(addresses)
}

/// A zeroed block for a host allocation of fewer than [`MAPPED_FROM_BYTES`] bytes; given back
/// to its pool when dropped.
pub(crate) struct SmallBlock {
    ptr: NonNull<u8>,
    class: usize,
    pool: &'static BlockPool,
}

impl SmallBlock {
    /// `bytes` zeroed bytes (1 when 0) aligned to [`HOST_ALIGNMENT`], from the process's pool.
    ///
    /// # Errors
    /// `ResourceExhausted` when no chunk can be mapped.
    pub(crate) fn take(bytes: usize) -> Result<SmallBlock> {
        Self::take_from(&POOL, bytes)
    }

    fn take_from(pool: &'static BlockPool, bytes: usize) -> Result<SmallBlock> {
        debug_assert!(bytes < MAPPED_FROM_BYTES, "{bytes} bytes is not a small block");
        let class = class_of(bytes);
        let ptr = pool.block(class)?;
        // A reused block holds its last owner's bytes, and a damaged kernel may have written
        // into one never handed out.
        // SAFETY: the block holds `block_size(class) >= bytes` bytes that this owner alone uses.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, bytes) };
        Ok(SmallBlock { ptr, class, pool })
    }

    /// Address of the block's first byte.
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for SmallBlock {
    fn drop(&mut self) {
        self.pool.give_back(self.class, self.ptr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of the test's own, never freed as the process-wide one is not; kept reachable from
    /// a static so that a leak checker (LeakSanitizer) sees it as held rather than lost.
    fn fresh_pool() -> &'static BlockPool {
        static POOLS: Mutex<Vec<&'static BlockPool>> = Mutex::new(Vec::new());
        let pool = Box::leak(Box::new(BlockPool::new()));
        POOLS.lock().unwrap_or_else(PoisonError::into_inner).push(pool);
        pool
    }

    #[test]
    fn every_size_gets_the_smallest_class_holding_it_with_little_slack() {
        let sizes = (1..=5000)
            .chain((5000..MAPPED_FROM_BYTES).step_by(997))
            .chain([MAPPED_FROM_BYTES - 1]);
        for bytes in sizes {
            let class = class_of(bytes);
            let size = block_size(class);
            assert!(class < CLASS_COUNT, "{bytes} bytes: class {class}");
            assert!(
                size >= bytes && size.is_multiple_of(HOST_ALIGNMENT),
                "{bytes} bytes: block of {size}"
            );
            assert!(
                class == 0 || block_size(class - 1) < bytes,
                "{bytes} bytes: class {class} is not the smallest"
            );
            assert!(
                size - bytes < HOST_ALIGNMENT.max(size / 5),
                "{bytes} bytes: block of {size}"
            );
        }
        assert_eq!(block_size(CLASS_COUNT - 1), MAPPED_FROM_BYTES);
    }

    #[test]
    fn a_reused_block_comes_back_zeroed() {
        let pool = fresh_pool();
        let first = SmallBlock::take_from(pool, 100).unwrap();
        let address = first.ptr();
        // SAFETY: the block holds 128 bytes (its class), all this test's.
        unsafe { std::ptr::write_bytes(address.as_ptr(), 0xab, 128) };
        drop(first);
        let second = SmallBlock::take_from(pool, 120).unwrap();
        assert_eq!(second.ptr(), address, "the freed block is reused");
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(address.as_ptr(), 120) };
        assert!(bytes.iter().all(|&b| b == 0), "{bytes:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn blocks_lie_apart_from_the_heap_between_guards() {
        let pool = fresh_pool();
        let size = block_size(CLASS_COUNT - 1);
        let blocks: Vec<SmallBlock> = (0..4).map(|_| SmallBlock::take_from(pool, size - 5).unwrap()).collect();
        let first = blocks[0].ptr().as_ptr() as usize;
        for (i, block) in blocks.iter().enumerate() {
            assert_eq!(
                block.ptr().as_ptr() as usize,
                first + i * size,
                "one chunk, carved in order"
            );
            assert!((block.ptr().as_ptr() as usize).is_multiple_of(HOST_ALIGNMENT));
        }
        let heap_object = Box::new(0u64);
        let heap_address = &*heap_object as *const u64 as usize;
        assert!(!(first..first + 4 * size).contains(&heap_address));
        let protection = crate::guarded_memory::protection_at;
        assert_eq!(protection(first), "rw-p");
        assert_eq!(protection(first - 1), "---p", "the chunk starts after a guard");
        assert_eq!(protection(first + 4 * size), "---p", "the chunk ends at a guard");
        assert_eq!(protection(first + 4 * size + CHUNK_GUARD - 1), "---p");
    }

    #[test]
    fn threads_taking_and_giving_back_blocks_never_share_one() {
        let pool = fresh_pool();
        let threads: Vec<_> = (0..4u8)
            .map(|id| {
                std::thread::spawn(move || {
                    for round in 0..2000usize {
                        let bytes = 64 + (round * 37 + usize::from(id) * 11) % 700;
                        let block = SmallBlock::take_from(pool, bytes).unwrap();
                        // SAFETY: the block holds at least `bytes` bytes, all this thread's.
                        let view = unsafe { std::slice::from_raw_parts_mut(block.ptr().as_ptr(), bytes) };
                        assert!(view.iter().all(|&b| b == 0), "a taken block is zeroed");
                        view.fill(id + 1);
                        std::thread::yield_now();
                        assert!(view.iter().all(|&b| b == id + 1), "another thread wrote into the block");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }
}
