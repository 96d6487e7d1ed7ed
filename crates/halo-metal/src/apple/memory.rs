//! Buffers on an Apple GPU: `MTLBuffer`s in shared storage, which on Apple silicon's unified
//! memory the GPU reads at full speed and the host maps in place.

use super::ThreadSafe;
use halo_hal::allocator::import_by_copy;
use halo_hal::{
    Allocation, Allocator, AllocatorStatistics, Buffer, BufferParams, BufferUsage, Error, HostBytes, MemoryHeap,
    MemoryType, Result,
};
use objc2::runtime::ProtocolObject;
use objc2_metal::{MTLBuffer, MTLDevice, MTLResourceOptions};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What every buffer is: device-local and host-visible, coherent (shared storage).
const MEMORY_TYPE: MemoryType = MemoryType::DEVICE_LOCAL.union(MemoryType::HOST_LOCAL);

/// One `MTLBuffer`.
pub struct MetalAllocation {
    buffer: ThreadSafe<ProtocolObject<dyn MTLBuffer>>,
    size: u64,
    statistics: Arc<Counters>,
}

impl MetalAllocation {
    /// The Metal buffer.
    pub fn buffer(&self) -> &ProtocolObject<dyn MTLBuffer> {
        &self.buffer.0
    }
}

// SAFETY: `contents` is the buffer's shared-storage memory, `size` bytes (or more: empty
// buffers get one byte), valid while the buffer lives, which this allocation keeps alive.
unsafe impl Allocation for MetalAllocation {
    fn size(&self) -> u64 {
        self.size
    }
    fn memory_type(&self) -> MemoryType {
        MEMORY_TYPE
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        Some(self.buffer.0.contents().cast())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for MetalAllocation {
    fn drop(&mut self) {
        self.statistics.allocated.fetch_sub(self.size, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Counters {
    allocated: AtomicU64,
    peak: AtomicU64,
}

/// Allocates shared-storage buffers on one device.
pub struct AppleAllocator {
    device: ThreadSafe<ProtocolObject<dyn MTLDevice>>,
    statistics: Arc<Counters>,
}

impl AppleAllocator {
    pub(super) fn new(device: ThreadSafe<ProtocolObject<dyn MTLDevice>>) -> Self {
        AppleAllocator {
            device,
            statistics: Arc::default(),
        }
    }
}

impl Allocator for AppleAllocator {
    fn memory_heaps(&self) -> Vec<MemoryHeap> {
        vec![MemoryHeap {
            memory_type: MEMORY_TYPE,
            allowed_usage: BufferUsage::all(),
            max_allocation_size: self.device.0.maxBufferLength() as u64,
            min_alignment: 16,
        }]
    }

    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
        let params = params.canonicalize();
        let length = usize::try_from(size.max(1))
            .map_err(|_| Error::resource_exhausted(format!("a Metal buffer of {size} bytes does not fit this host")))?;
        let buffer = (self.device.0)
            .newBufferWithLength_options(length, MTLResourceOptions::StorageModeShared)
            .ok_or_else(|| {
                Error::resource_exhausted(format!(
                    "the Metal device gave no buffer of {size} bytes (at most {} in one buffer)",
                    self.device.0.maxBufferLength()
                ))
            })?;
        let now = self.statistics.allocated.fetch_add(size, Ordering::Relaxed) + size;
        self.statistics.peak.fetch_max(now, Ordering::Relaxed);
        let allocation = MetalAllocation {
            buffer: ThreadSafe(buffer),
            size,
            statistics: self.statistics.clone(),
        };
        Ok(Buffer::new(
            Arc::new(allocation),
            params.usage | BufferUsage::MAPPING,
            params.access,
        ))
    }

    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer> {
        // Metal wraps host memory only when it is page-aligned and a whole number of pages.
        import_by_copy(self, params, bytes)
    }

    fn statistics(&self) -> AllocatorStatistics {
        AllocatorStatistics {
            bytes_allocated: self.statistics.allocated.load(Ordering::Relaxed),
            bytes_peak: self.statistics.peak.load(Ordering::Relaxed),
        }
    }
}
