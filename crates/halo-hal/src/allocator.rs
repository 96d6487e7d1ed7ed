//! Allocators create buffers in a device's memory; the heap allocator serves CPU drivers.

use crate::buffer::{Allocation, Buffer};
use crate::host_memory::{HostAllocation, HostBytes};
use crate::memory::{BufferParams, BufferUsage, MemoryAccess, MemoryType};
use crate::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One memory heap of a device (`iree_hal_allocator_memory_heap_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryHeap {
    /// Memory type of the heap.
    pub memory_type: MemoryType,
    /// Usages buffers in it may have.
    pub allowed_usage: BufferUsage,
    /// Largest single allocation.
    pub max_allocation_size: u64,
    /// Alignment of every allocation.
    pub min_alignment: u64,
}

/// Bytes currently and at most allocated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStatistics {
    /// Bytes allocated and not yet freed.
    pub bytes_allocated: u64,
    /// Highest `bytes_allocated` seen.
    pub bytes_peak: u64,
}

/// Creates buffers in a device's memory (`iree_hal_allocator_t`).
///
/// Threading: any thread.
pub trait Allocator: Send + Sync {
    /// The heaps buffers can come from.
    fn memory_heaps(&self) -> Vec<MemoryHeap>;

    /// Allocates a zeroed buffer of `size` bytes satisfying `params`.
    ///
    /// # Errors
    /// `InvalidArgument` when no heap has the memory type or usage; `ResourceExhausted` when the
    /// memory runs out.
    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer>;

    /// Wraps host bytes as a buffer without copying where the device can address host memory.
    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer>;

    /// Current statistics.
    fn statistics(&self) -> AllocatorStatistics;
}

/// Imports host bytes by copying them into a new buffer of `allocator` with `params` (which must
/// ask for host-visible memory). The buffer then owns its bytes, so nobody else can change them
/// and a copy behaves as an alias would; bytes lent read-only give a buffer that cannot be
/// written. For devices that cannot address the host's memory in place.
pub fn import_by_copy(
    allocator: &dyn Allocator,
    params: BufferParams,
    mut bytes: Box<dyn HostBytes>,
) -> Result<Buffer> {
    let length = bytes.byte_len();
    let writable = bytes.writable();
    // SAFETY: `HostBytes` promises `byte_len` readable bytes at `host_ptr` while it is alive.
    let source = unsafe { std::slice::from_raw_parts(bytes.host_ptr().cast_const(), length) };
    let buffer = allocator.allocate_buffer(params, length as u64)?;
    buffer.map_write(0, source)?;
    Ok(if writable {
        buffer
    } else {
        let access = buffer.allowed_access() & !MemoryAccess::DISCARD_WRITE;
        buffer.restricted(buffer.allowed_usage(), access)
    })
}

/// An allocator over the host heap: every buffer is host-local and device-visible.
#[derive(Default)]
pub struct HeapAllocator {
    stats: Arc<HeapStats>,
}

#[derive(Default)]
struct HeapStats {
    allocated: AtomicU64,
    peak: AtomicU64,
}

/// A host allocation that reports its size back to the allocator's statistics when dropped.
struct TrackedAllocation {
    inner: HostAllocation,
    stats: Arc<HeapStats>,
}

impl Drop for TrackedAllocation {
    fn drop(&mut self) {
        self.stats.allocated.fetch_sub(self.inner.size(), Ordering::Relaxed);
    }
}

// SAFETY: forwards to the inner `HostAllocation`, which keeps the promises.
unsafe impl Allocation for TrackedAllocation {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn memory_type(&self) -> MemoryType {
        self.inner.memory_type()
    }
    fn host_ptr(&self) -> Option<std::ptr::NonNull<u8>> {
        self.inner.host_ptr()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl HeapAllocator {
    /// Memory type of every heap buffer.
    pub const MEMORY_TYPE: MemoryType = MemoryType::HOST_LOCAL.union(MemoryType::DEVICE_VISIBLE);

    /// A new allocator with zeroed statistics.
    pub fn new() -> Self {
        Self::default()
    }

    fn check_params(params: &BufferParams) -> Result<()> {
        // Host memory satisfies every memory type a CPU device can ask for except an explicit
        // demand for memory the host cannot see, which no CPU driver can honour meaningfully.
        let supported = Self::MEMORY_TYPE | MemoryType::DEVICE_LOCAL | MemoryType::OPTIMAL | MemoryType::HOST_CACHED;
        if !supported.contains(params.memory_type) {
            return Err(Error::invalid_argument(format!(
                "heap allocator cannot provide memory type {:?}",
                params.memory_type
            )));
        }
        Ok(())
    }
}

impl Allocator for HeapAllocator {
    fn memory_heaps(&self) -> Vec<MemoryHeap> {
        vec![MemoryHeap {
            memory_type: Self::MEMORY_TYPE,
            allowed_usage: BufferUsage::all(),
            max_allocation_size: isize::MAX as u64,
            min_alignment: crate::host_memory::HOST_ALIGNMENT as u64,
        }]
    }

    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
        let params = params.canonicalize();
        let _span = tracing::info_span!("allocate", size, memory_type = ?params.memory_type).entered();
        Self::check_params(&params)?;
        let memory_type = Self::MEMORY_TYPE | (params.memory_type & MemoryType::DEVICE_LOCAL);
        let inner = HostAllocation::new(size, memory_type)?;
        let now = self.stats.allocated.fetch_add(size, Ordering::Relaxed) + size;
        // A plain load first: the peak rarely moves, and a locked update costs more than the rest.
        if now > self.stats.peak.load(Ordering::Relaxed) {
            self.stats.peak.fetch_max(now, Ordering::Relaxed);
        }
        let allocation = Arc::new(TrackedAllocation {
            inner,
            stats: self.stats.clone(),
        });
        Ok(Buffer::new(
            allocation,
            params.usage | BufferUsage::MAPPING,
            params.access,
        ))
    }

    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer> {
        let params = params.canonicalize();
        Self::check_params(&params)?;
        let allocation = HostAllocation::import(bytes, Self::MEMORY_TYPE);
        let access = if allocation.writable() {
            params.access
        } else {
            params.access & !MemoryAccess::DISCARD_WRITE
        };
        Ok(Buffer::new(
            Arc::new(allocation),
            params.usage | BufferUsage::MAPPING,
            access,
        ))
    }

    fn statistics(&self) -> AllocatorStatistics {
        AllocatorStatistics {
            bytes_allocated: self.stats.allocated.load(Ordering::Relaxed),
            bytes_peak: self.stats.peak.load(Ordering::Relaxed),
        }
    }
}
