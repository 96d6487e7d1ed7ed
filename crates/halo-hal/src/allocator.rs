//! Allocators create buffers in a device's memory; the heap allocator serves CPU drivers.

use crate::buffer::{Allocation, Buffer};
use crate::guarded_memory::GuardedBytes;
use crate::host_memory::{HostAllocation, HostBytes};
use crate::memory::{BufferParams, BufferUsage, MemoryAccess, MemoryType};
use crate::{Error, ParamReader, Result};
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

/// An allocator over host memory ([`HostAllocation`]): every buffer is host-local and device-visible.
#[derive(Default)]
pub struct HeapAllocator {
    stats: Arc<HeapStats>,
    /// Whether each buffer is mapped on its own between guard pages ([`GuardedBytes`]).
    guard_pages: bool,
}

/// The CPU drivers' `guard_pages` device parameter: whether each buffer is mapped on its own
/// between guard pages, so that a kernel reaching past a buffer faults (and its call ends in an
/// error naming it) instead of writing over other memory. A debugging aid, for damaged modules
/// and mutation campaigns: each buffer costs a mapping and 1 GiB of address space, and queue
/// allocations are not pooled.
///
/// # Errors
/// `InvalidArgument` for a value that is not a boolean.
pub fn read_guard_pages(params: &mut ParamReader) -> Result<bool> {
    Ok(params.flag("guard_pages")?.unwrap_or(false))
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

    /// A new allocator whose every buffer is mapped on its own between guard pages (see
    /// [`read_guard_pages`]).
    pub fn with_guard_pages() -> Self {
        HeapAllocator {
            guard_pages: true,
            ..Self::default()
        }
    }

    fn host_allocation(&self, size: u64, memory_type: MemoryType) -> Result<HostAllocation> {
        if !self.guard_pages {
            return HostAllocation::new(size, memory_type);
        }
        let len = usize::try_from(size)
            .map_err(|_| Error::resource_exhausted(format!("cannot allocate {size} bytes of host memory")))?;
        Ok(HostAllocation::import(Box::new(GuardedBytes::new(len)?), memory_type))
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
        let inner = self.host_allocation(size, memory_type)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_pages_are_a_flag_off_unless_asked() {
        let params = |value: &str| crate::DeviceParams::from([("guard_pages".to_string(), value.to_string())]);
        assert!(read_guard_pages(&mut ParamReader::new("local-sync", &params("true"))).unwrap());
        let none = crate::DeviceParams::new();
        assert!(
            !read_guard_pages(&mut ParamReader::new("local-sync", &none)).unwrap(),
            "off unless asked"
        );
        let error = read_guard_pages(&mut ParamReader::new("local-sync", &params("maybe"))).unwrap_err();
        assert!(error.to_string().contains("guard_pages=maybe"), "{error}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn with_guard_pages_each_buffer_ends_on_a_guard() {
        use crate::guarded_memory::protection_at;
        let allocator = HeapAllocator::with_guard_pages();
        for size in [1u64, 100, 4096, 70_000] {
            let buffer = allocator.allocate_buffer(BufferParams::default(), size).unwrap();
            let start = buffer.allocation().host_ptr().unwrap().as_ptr() as usize;
            let end = start + (size as usize).next_multiple_of(crate::host_memory::HOST_ALIGNMENT);
            assert_eq!(protection_at(end - 1), "rw-p", "{size}: the last byte");
            assert_eq!(protection_at(end), "---p", "{size}: past the end");
            assert_eq!(allocator.statistics().bytes_allocated, size, "counted as any buffer");
        }
        let plain = HeapAllocator::new()
            .allocate_buffer(BufferParams::default(), 100)
            .unwrap();
        let end = plain.allocation().host_ptr().unwrap().as_ptr() as usize + 128;
        assert_ne!(protection_at(end), "---p", "no guard without the flag");
    }
}
