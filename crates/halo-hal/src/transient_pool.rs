//! A pool for queue-ordered allocations (`queue_alloca`): the blocks one call releases serve the
//! next, so a program's steady-state calls neither fault in fresh pages nor zero them.
//!
//! Compiled programs allocate their transient memory afresh on every call and release it when the
//! call's work is done. A block comes back to the pool when the last [`Buffer`] over it drops, on
//! whatever thread that happens, so a call that fails returns its memory like one that succeeds.
//! What the pool keeps is bounded: by a byte budget for released blocks; by an age after which a
//! block nobody reused is freed; by freeing, when a request of a kind needs a fresh block, the
//! kept blocks of that kind that are smaller than it or never served a second request (an
//! initializer's scratch, which would otherwise stay resident until it ages out); and by an
//! optional limit on all the bytes the pool hands out.

use crate::allocator::Allocator;
use crate::buffer::{Allocation, Buffer};
use crate::memory::{BufferParams, BufferUsage, MemoryAccess, MemoryType};
use crate::{Error, ParamReader, Result};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Bounds of a [`TransientPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransientPoolOptions {
    /// Most bytes kept in released blocks; past it the longest-idle blocks are freed. 0 turns
    /// reuse off.
    pub max_retained_bytes: u64,
    /// Most bytes in blocks handed out and kept together; an allocation past it first frees the
    /// kept blocks, then fails with `ResourceExhausted`.
    pub max_total_bytes: u64,
    /// A released block not reused while this many allocations were served is freed.
    pub max_idle_allocations: u64,
}

impl Default for TransientPoolOptions {
    fn default() -> Self {
        TransientPoolOptions {
            max_retained_bytes: 1 << 30,
            max_total_bytes: u64::MAX,
            max_idle_allocations: 64,
        }
    }
}

impl TransientPoolOptions {
    /// Reads the pool's device URI parameters, `transient_retain_bytes` and
    /// `transient_limit_bytes`, from `params`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the parameter whose value is not a byte count.
    pub fn read(params: &mut ParamReader) -> Result<Self> {
        let defaults = TransientPoolOptions::default();
        Ok(TransientPoolOptions {
            max_retained_bytes: params
                .number("transient_retain_bytes", 0..=u64::MAX)?
                .unwrap_or(defaults.max_retained_bytes),
            max_total_bytes: params
                .number("transient_limit_bytes", 0..=u64::MAX)?
                .unwrap_or(defaults.max_total_bytes),
            ..defaults
        })
    }

    /// These options, keeping no released block when `unpooled`: with guard pages, a block
    /// reused for a smaller request would leave the request's end short of the guard.
    pub fn unpooled_if(self, unpooled: bool) -> Self {
        TransientPoolOptions {
            max_retained_bytes: if unpooled { 0 } else { self.max_retained_bytes },
            ..self
        }
    }
}

/// What a pool has done and holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransientPoolStatistics {
    /// Allocations served by a fresh block from the allocator.
    pub fresh_blocks: u64,
    /// Allocations served by a kept block.
    pub reused_blocks: u64,
    /// Kept blocks given back to the allocator (budget, age, trim or limit).
    pub freed_blocks: u64,
    /// Bytes in blocks handed out and not yet released.
    pub live_bytes: u64,
    /// Bytes in released blocks kept for reuse.
    pub retained_bytes: u64,
}

/// Whether a kept block of `block` bytes may serve a request for `size`: it must hold it, and not
/// waste more than the request's own size (or 64 KiB), so that a small result a caller keeps for
/// long does not pin a large block.
fn serves(block: u64, size: u64) -> bool {
    block >= size && block - size <= size.max(64 << 10)
}

/// Blocks are only reused for allocations that ask for the same kind of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BlockKind {
    memory_type: MemoryType,
    usage: BufferUsage,
}

/// A block and what a buffer over it may do.
struct Block {
    allocation: Arc<dyn Allocation>,
    kind: BlockKind,
    usage: BufferUsage,
    access: MemoryAccess,
    /// Whether it has served more than the request it was made for.
    reused: bool,
}

struct Kept {
    block: Block,
    /// The allocation count when the block came back.
    released_at: u64,
    /// Which release it was: later ones are preferred for reuse (their pages are warmer).
    release: u64,
}

#[derive(Default)]
struct PoolState {
    kept: Vec<Kept>,
    /// Allocations served so far: the clock that blocks age by.
    clock: u64,
    /// Blocks released so far.
    releases: u64,
    stats: TransientPoolStatistics,
}

struct PoolShared {
    options: TransientPoolOptions,
    state: Mutex<PoolState>,
}

/// Reuses released transient blocks; cheap to clone (clones share the blocks).
///
/// Threading: any thread; blocks may come back on any thread, also after the pool is dropped
/// (they are then freed).
#[derive(Clone)]
pub struct TransientPool {
    shared: Arc<PoolShared>,
}

impl TransientPool {
    /// The device query category whose keys [`Self::query_i64`] answers.
    pub const QUERY_CATEGORY: &'static str = "halo.transient_pool";

    /// An empty pool with `options`.
    pub fn new(options: TransientPoolOptions) -> Self {
        TransientPool {
            shared: Arc::new(PoolShared {
                options,
                state: Mutex::new(PoolState::default()),
            }),
        }
    }

    /// A buffer of `size` bytes as `params` asks, from a kept block of the same kind when one
    /// fits it (the smallest such, most recently released first), else fresh from `allocator`.
    /// A reused block's bytes are whatever its last user left.
    ///
    /// # Errors
    /// `ResourceExhausted` past the pool's byte limit, naming the size, the bytes in use and the
    /// limit; the allocator's errors for a fresh block.
    pub fn allocate(&self, allocator: &dyn Allocator, params: BufferParams, size: u64) -> Result<Buffer> {
        let params = params.canonicalize();
        let kind = BlockKind {
            memory_type: params.memory_type,
            usage: params.usage,
        };
        let mut freed = Vec::new();
        let reused = {
            let mut state = self.shared.lock();
            state.clock += 1;
            let reused = state.take_best_fit(kind, size);
            state.age_out(self.shared.options.max_idle_allocations, &mut freed);
            if reused.is_none() {
                // Kept blocks of this kind that could not serve it would only hold memory when
                // they are too small for what the program now asks for (an earlier, smaller
                // shape), or never served a second request (an initializer's scratch).
                let stale = |kept: &Kept| {
                    kept.block.kind == kind && (kept.block.allocation.size() < size || !kept.block.reused)
                };
                state.free_where(stale, &mut freed);
                state.reserve(size, self.shared.options.max_total_bytes, &mut freed)?;
            }
            reused
        };
        // Kept blocks are freed outside the lock: unmapping them can take a while.
        drop(freed);
        let block = match reused {
            Some(block) => block,
            None => match self.fresh_block(allocator, params, kind, size) {
                Ok(block) => block,
                Err(error) => {
                    self.shared.lock().stats.live_bytes -= size;
                    return Err(error);
                }
            },
        };
        let (usage, access) = (block.usage, block.access);
        let pooled = PooledAllocation {
            block: Some(block),
            size,
            pool: Arc::downgrade(&self.shared),
        };
        Ok(Buffer::new(Arc::new(pooled), usage, access))
    }

    fn fresh_block(
        &self,
        allocator: &dyn Allocator,
        params: BufferParams,
        kind: BlockKind,
        size: u64,
    ) -> Result<Block> {
        let buffer = allocator.allocate_buffer(params, size)?;
        let mut state = self.shared.lock();
        state.stats.fresh_blocks += 1;
        // An allocator may round the size up: the block's own size is what it gives back.
        state.stats.live_bytes = state.stats.live_bytes - size + buffer.allocation().size();
        drop(state);
        Ok(Block {
            allocation: buffer.allocation().clone(),
            kind,
            usage: buffer.allowed_usage(),
            access: buffer.allowed_access(),
            reused: false,
        })
    }

    /// Frees every kept block.
    pub fn trim(&self) {
        let kept = {
            let mut state = self.shared.lock();
            state.stats.freed_blocks += state.kept.len() as u64;
            state.stats.retained_bytes = 0;
            std::mem::take(&mut state.kept)
        };
        drop(kept);
    }

    /// Current counters.
    pub fn statistics(&self) -> TransientPoolStatistics {
        self.shared.lock().stats
    }

    /// One counter by name (`fresh_blocks`, `reused_blocks`, `freed_blocks`, `live_bytes`,
    /// `retained_bytes`), for device queries.
    ///
    /// # Errors
    /// `NotFound` naming an unknown key.
    pub fn query_i64(&self, key: &str) -> Result<i64> {
        let stats = self.statistics();
        let value = match key {
            "fresh_blocks" => stats.fresh_blocks,
            "reused_blocks" => stats.reused_blocks,
            "freed_blocks" => stats.freed_blocks,
            "live_bytes" => stats.live_bytes,
            "retained_bytes" => stats.retained_bytes,
            _ => return Err(Error::not_found(format!("unknown transient pool query '{key}'"))),
        };
        Ok(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl PoolShared {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // The state is counters and a list, each left whole by every update: a panic elsewhere
        // while it was held leaves nothing to repair.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl PoolState {
    fn take_best_fit(&mut self, kind: BlockKind, size: u64) -> Option<Block> {
        let index = self
            .kept
            .iter()
            .enumerate()
            .filter(|(_, kept)| kept.block.kind == kind && serves(kept.block.allocation.size(), size))
            .min_by_key(|(_, kept)| (kept.block.allocation.size(), std::cmp::Reverse(kept.release)))
            .map(|(index, _)| index)?;
        let mut block = self.kept.swap_remove(index).block;
        let bytes = block.allocation.size();
        self.stats.retained_bytes -= bytes;
        self.stats.live_bytes += bytes;
        self.stats.reused_blocks += 1;
        block.reused = true;
        Some(block)
    }

    fn age_out(&mut self, max_idle: u64, freed: &mut Vec<Kept>) {
        let clock = self.clock;
        self.free_where(|kept| clock - kept.released_at > max_idle, freed);
    }

    /// Counts `bytes` as handed out, freeing kept blocks first if the limit needs it.
    fn reserve(&mut self, bytes: u64, limit: u64, freed: &mut Vec<Kept>) -> Result<()> {
        let total = |stats: &TransientPoolStatistics| {
            stats
                .live_bytes
                .saturating_add(stats.retained_bytes)
                .saturating_add(bytes)
        };
        if total(&self.stats) > limit {
            self.free_where(|_| true, freed);
        }
        if total(&self.stats) > limit {
            return Err(Error::resource_exhausted(format!(
                "transient memory: cannot allocate {bytes} bytes with {} bytes in use; the limit is {limit} bytes \
                 (device parameter transient_limit_bytes)",
                self.stats.live_bytes
            )));
        }
        self.stats.live_bytes += bytes;
        Ok(())
    }

    /// Keeps a released block, freeing the longest-idle ones past the byte budget.
    fn keep(&mut self, block: Block, options: &TransientPoolOptions, freed: &mut Vec<Kept>) {
        let bytes = block.allocation.size();
        self.stats.live_bytes -= bytes;
        self.stats.retained_bytes += bytes;
        self.releases += 1;
        self.kept.push(Kept {
            block,
            released_at: self.clock,
            release: self.releases,
        });
        while self.stats.retained_bytes > options.max_retained_bytes {
            let oldest = self
                .kept
                .iter()
                .enumerate()
                .min_by_key(|(_, kept)| kept.release)
                .map(|(index, _)| index);
            let Some(oldest) = oldest else { break };
            let kept = self.kept.swap_remove(oldest);
            self.forget(&kept);
            freed.push(kept);
        }
    }

    fn free_where(&mut self, mut condition: impl FnMut(&Kept) -> bool, freed: &mut Vec<Kept>) {
        let mut index = 0;
        while index < self.kept.len() {
            if condition(&self.kept[index]) {
                let kept = self.kept.swap_remove(index);
                self.forget(&kept);
                freed.push(kept);
            } else {
                index += 1;
            }
        }
    }

    fn forget(&mut self, kept: &Kept) {
        self.stats.retained_bytes -= kept.block.allocation.size();
        self.stats.freed_blocks += 1;
    }
}

/// A buffer's view of a pool block: `size` bytes of it, returned to the pool on drop.
struct PooledAllocation {
    /// Always `Some` until dropped.
    block: Option<Block>,
    size: u64,
    pool: Weak<PoolShared>,
}

impl PooledAllocation {
    fn inner(&self) -> &dyn Allocation {
        self.block
            .as_ref()
            .map(|block| &*block.allocation)
            .expect("a pooled block is present until drop")
    }
}

impl Drop for PooledAllocation {
    fn drop(&mut self) {
        let (Some(block), Some(pool)) = (self.block.take(), self.pool.upgrade()) else {
            return;
        };
        let mut freed = Vec::new();
        pool.lock().keep(block, &pool.options, &mut freed);
        drop(freed);
    }
}

// SAFETY: forwards to the block's allocation, which keeps the promises for all its bytes; this
// view covers its first `size` bytes only, and the block is held until the view is dropped.
unsafe impl Allocation for PooledAllocation {
    fn size(&self) -> u64 {
        self.size
    }
    fn memory_type(&self) -> MemoryType {
        self.inner().memory_type()
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.inner().host_ptr()
    }
    fn flush(&self, offset: u64, length: u64) -> Result<()> {
        self.inner().flush(offset, length)
    }
    fn invalidate(&self, offset: u64, length: u64) -> Result<()> {
        self.inner().invalidate(offset, length)
    }
    fn as_any(&self) -> &dyn Any {
        // Drivers recover their own allocation type (and its handles) through this.
        self.inner().as_any()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceParams;
    use crate::{HeapAllocator, StatusCode};

    fn bounded(max_retained_bytes: u64, max_total_bytes: u64, max_idle_allocations: u64) -> TransientPool {
        TransientPool::new(TransientPoolOptions {
            max_retained_bytes,
            max_total_bytes,
            max_idle_allocations,
        })
    }

    fn address(buffer: &Buffer) -> usize {
        buffer.allocation().host_ptr().unwrap().as_ptr() as usize
    }

    fn host() -> BufferParams {
        BufferParams::host_mappable()
    }

    #[test]
    fn a_released_block_serves_the_next_allocation_that_fits() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        let first = pool.allocate(&heap, host(), 1000).unwrap();
        first.map_write(0, &[7; 1000]).unwrap();
        let at = address(&first);
        drop(first);
        let second = pool.allocate(&heap, host(), 900).unwrap();
        assert_eq!(address(&second), at);
        assert_eq!(second.byte_length(), 900);
        let stats = pool.statistics();
        assert_eq!(
            (stats.fresh_blocks, stats.reused_blocks, stats.live_bytes),
            (1, 1, 1000)
        );
        // A larger request does not fit the kept block (the allocator may hand the same memory
        // back, as a fresh block).
        drop(second);
        let larger = pool.allocate(&heap, host(), 1001).unwrap();
        assert_eq!(larger.byte_length(), 1001);
        assert_eq!(pool.statistics().fresh_blocks, 2);
    }

    #[test]
    fn a_much_larger_block_does_not_serve_a_small_request() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        for _ in 0..2 {
            drop(pool.allocate(&heap, host(), 1 << 20).unwrap());
        }
        let small = pool.allocate(&heap, host(), 4000).unwrap();
        let stats = pool.statistics();
        assert_eq!(
            (stats.fresh_blocks, stats.reused_blocks, stats.retained_bytes),
            (2, 1, 1 << 20)
        );
        drop(small);
        // Up to twice the request is fine.
        drop(pool.allocate(&heap, host(), 600 << 10).unwrap());
        assert_eq!(pool.statistics().reused_blocks, 2);
    }

    #[test]
    fn a_block_that_never_served_again_goes_when_a_request_needs_a_fresh_one() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        // An initializer's scratch, then a call whose small result cannot use it.
        drop(pool.allocate(&heap, host(), 1 << 20).unwrap());
        let result = pool.allocate(&heap, host(), 4000).unwrap();
        let stats = pool.statistics();
        assert_eq!((stats.freed_blocks, stats.retained_bytes), (1, 0));
        assert_eq!(heap.statistics().bytes_allocated, 4000);
        drop(result);
    }

    #[test]
    fn a_fresh_block_replaces_smaller_kept_ones_of_its_kind() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        let device_local = BufferParams {
            memory_type: MemoryType::DEVICE_LOCAL,
            ..host()
        };
        let held: Vec<_> = [(host(), 100), (host(), 200), (host(), 9000), (device_local, 50)]
            .into_iter()
            .map(|(params, size)| pool.allocate(&heap, params, size).unwrap())
            .collect();
        drop(held);
        // 9000 bytes were kept when the 5000-byte request came: it fits, nothing is freed.
        drop(pool.allocate(&heap, host(), 5000).unwrap());
        assert_eq!(pool.statistics().freed_blocks, 0);
        let larger = pool.allocate(&heap, host(), 20000).unwrap();
        let stats = pool.statistics();
        assert_eq!(
            (stats.freed_blocks, stats.retained_bytes),
            (3, 50),
            "the other kind stays"
        );
        drop(larger);
        assert_eq!(heap.statistics().bytes_allocated, 20050);
    }

    #[test]
    fn blocks_serve_only_the_same_kind_of_memory() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        drop(pool.allocate(&heap, host(), 64).unwrap());
        let device_local = BufferParams {
            memory_type: MemoryType::DEVICE_LOCAL,
            ..host()
        };
        drop(pool.allocate(&heap, device_local, 64).unwrap());
        assert_eq!(pool.statistics().reused_blocks, 0);
    }

    #[test]
    fn the_smallest_fitting_block_is_taken_and_the_newest_of_equals() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        let blocks: Vec<_> = [4096, 2048, 2048, 8192]
            .iter()
            .map(|&s| pool.allocate(&heap, host(), s).unwrap())
            .collect();
        let addresses: Vec<_> = blocks.iter().map(address).collect();
        drop(blocks);
        // Released in order, so the second 2048-byte block is the newest of the two.
        assert_eq!(address(&pool.allocate(&heap, host(), 1500).unwrap()), addresses[2]);
    }

    #[test]
    fn kept_bytes_stay_within_the_budget() {
        let (heap, pool) = (HeapAllocator::new(), bounded(1500, u64::MAX, 64));
        let (a, b) = (
            pool.allocate(&heap, host(), 1000).unwrap(),
            pool.allocate(&heap, host(), 1000).unwrap(),
        );
        let newer = address(&b);
        drop(a);
        drop(b);
        let stats = pool.statistics();
        assert_eq!((stats.retained_bytes, stats.freed_blocks), (1000, 1));
        assert_eq!(address(&pool.allocate(&heap, host(), 1000).unwrap()), newer);
        assert_eq!(heap.statistics().bytes_allocated, 1000);
        // A budget of 0 keeps nothing.
        let none = bounded(0, u64::MAX, 64);
        drop(none.allocate(&heap, host(), 64).unwrap());
        assert_eq!(none.statistics().retained_bytes, 0);
    }

    #[test]
    fn a_block_nobody_reuses_is_freed_after_the_idle_count() {
        let (heap, pool) = (HeapAllocator::new(), bounded(u64::MAX, u64::MAX, 3));
        let device_local = BufferParams {
            memory_type: MemoryType::DEVICE_LOCAL,
            ..host()
        };
        drop(pool.allocate(&heap, device_local, 100).unwrap());
        let mut cycling = pool.allocate(&heap, host(), 5000).unwrap();
        for _ in 0..3 {
            assert_eq!(pool.statistics().retained_bytes, 100);
            drop(cycling);
            cycling = pool.allocate(&heap, host(), 5000).unwrap();
        }
        let stats = pool.statistics();
        assert_eq!((stats.retained_bytes, stats.freed_blocks), (0, 1));
        assert_eq!(heap.statistics().bytes_allocated, 5000);
    }

    #[test]
    fn the_limit_frees_kept_blocks_first_then_refuses() {
        let (heap, pool) = (HeapAllocator::new(), bounded(u64::MAX, 4096, 64));
        drop(pool.allocate(&heap, host(), 3000).unwrap());
        let device_local = BufferParams {
            memory_type: MemoryType::DEVICE_LOCAL,
            ..host()
        };
        // The kept 3000 bytes cannot serve another kind: they are freed to make room.
        let held = pool.allocate(&heap, device_local, 3000).unwrap();
        assert_eq!(pool.statistics().freed_blocks, 1);
        let error = pool.allocate(&heap, host(), 2000).unwrap_err();
        assert_eq!(error.code(), StatusCode::ResourceExhausted);
        let message = error.to_string();
        for part in ["2000 bytes", "3000 bytes in use", "4096", "transient_limit_bytes"] {
            assert!(message.contains(part), "{message}");
        }
        // The refusal reserved nothing.
        drop(held);
        assert_eq!(pool.statistics().live_bytes, 0);
        pool.allocate(&heap, host(), 4096).unwrap();
    }

    #[test]
    fn a_failed_fresh_allocation_reserves_nothing() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        let error = pool.allocate(&heap, host(), u64::MAX).unwrap_err();
        assert_eq!(error.code(), StatusCode::ResourceExhausted);
        assert_eq!(pool.statistics().live_bytes, 0);
    }

    #[test]
    fn trim_gives_every_kept_block_back() {
        let (heap, pool) = (
            HeapAllocator::new(),
            TransientPool::new(TransientPoolOptions::default()),
        );
        let held = pool.allocate(&heap, host(), 64).unwrap();
        drop(pool.allocate(&heap, host(), 128).unwrap());
        drop(pool.allocate(&heap, host(), 256).unwrap());
        pool.trim();
        let stats = pool.statistics();
        assert_eq!((stats.retained_bytes, stats.live_bytes, stats.freed_blocks), (0, 64, 2));
        assert_eq!(heap.statistics().bytes_allocated, 64);
        drop(held);
        assert_eq!(
            heap.statistics().bytes_allocated,
            64,
            "released after the trim, so kept"
        );
    }

    #[test]
    fn concurrent_users_never_share_a_block() {
        let (heap, pool) = (
            Arc::new(HeapAllocator::new()),
            TransientPool::new(TransientPoolOptions::default()),
        );
        let threads: Vec<_> = (0..4u8)
            .map(|id| {
                let (heap, pool) = (heap.clone(), pool.clone());
                std::thread::spawn(move || {
                    for round in 0..300u64 {
                        let size = 256 + (round % 5) * 512;
                        let buffer = pool.allocate(&*heap, host(), size).unwrap();
                        buffer.map_write(0, &vec![id; size as usize]).unwrap();
                        std::thread::yield_now();
                        assert!(buffer.read_all().unwrap().iter().all(|&b| b == id));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let stats = pool.statistics();
        assert_eq!(stats.live_bytes, 0);
        assert_eq!(stats.fresh_blocks + stats.reused_blocks, 1200);
        assert!(stats.reused_blocks > 1000, "{stats:?}");
        assert_eq!(heap.statistics().bytes_allocated, stats.retained_bytes);
    }

    #[test]
    fn buffers_outliving_the_pool_free_their_blocks() {
        let heap = HeapAllocator::new();
        let pool = TransientPool::new(TransientPoolOptions::default());
        let buffer = pool.allocate(&heap, host(), 512).unwrap();
        drop(pool);
        assert_eq!(heap.statistics().bytes_allocated, 512);
        drop(buffer);
        assert_eq!(heap.statistics().bytes_allocated, 0);
    }

    /// An allocator that rounds every size up to a page, as device allocators do.
    struct PageAllocator(HeapAllocator);

    impl Allocator for PageAllocator {
        fn memory_heaps(&self) -> Vec<crate::MemoryHeap> {
            self.0.memory_heaps()
        }
        fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
            self.0.allocate_buffer(params, size.next_multiple_of(4096))
        }
        fn import_host(&self, params: BufferParams, bytes: Box<dyn crate::HostBytes>) -> Result<Buffer> {
            self.0.import_host(params, bytes)
        }
        fn statistics(&self) -> crate::AllocatorStatistics {
            self.0.statistics()
        }
    }

    #[test]
    fn blocks_an_allocator_rounded_up_are_counted_at_their_own_size() {
        let (pages, pool) = (
            PageAllocator(HeapAllocator::new()),
            TransientPool::new(TransientPoolOptions::default()),
        );
        let buffer = pool.allocate(&pages, host(), 1000).unwrap();
        assert_eq!(buffer.byte_length(), 1000);
        assert_eq!(pool.statistics().live_bytes, 4096);
        drop(buffer);
        let stats = pool.statistics();
        assert_eq!((stats.live_bytes, stats.retained_bytes), (0, 4096));
        drop(pool.allocate(&pages, host(), 3000).unwrap());
        assert_eq!(pool.statistics().reused_blocks, 1);
    }

    #[test]
    fn options_come_from_device_parameters() {
        let mut params = DeviceParams::new();
        params.insert("transient_retain_bytes".into(), "4096".into());
        params.insert("transient_limit_bytes".into(), "65536".into());
        params.insert("workers".into(), "2".into());
        let mut reader = ParamReader::new("local-task", &params);
        let options = TransientPoolOptions::read(&mut reader).unwrap();
        assert_eq!((options.max_retained_bytes, options.max_total_bytes), (4096, 65536));
        let unread = reader.finish().unwrap_err();
        assert!(unread.message().contains("'workers'"), "the rest stays: {unread}");
        params.insert("transient_limit_bytes".into(), "lots".into());
        let error = TransientPoolOptions::read(&mut ParamReader::new("local-task", &params)).unwrap_err();
        assert!(error.to_string().contains("transient_limit_bytes=lots"), "{error}");
        assert_eq!(
            TransientPoolOptions::read(&mut ParamReader::new("local-task", &DeviceParams::new())).unwrap(),
            TransientPoolOptions::default()
        );
    }
}
