//! Buffers on an Apple GPU, in the storage mode IREE's Metal HAL picks for each memory type:
//! private storage for device-local memory the host need not see (the host reaches it through
//! the queue's staging copies, `halo_hal::transfer`), shared storage for everything else, which
//! on Apple silicon's unified memory the GPU reads at full speed and the host maps in place.

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

/// Shared storage: device-local and host-visible, coherent.
const SHARED: MemoryType = MemoryType::DEVICE_LOCAL.union(MemoryType::HOST_LOCAL);

/// Private storage: the device's alone.
const PRIVATE: MemoryType = MemoryType::DEVICE_LOCAL;

/// The storage mode for a request, and the memory type it gives: private for device-local
/// memory the host need not see nor map (as IREE's Metal HAL chooses), else shared (unified
/// memory lets a buffer asked to be mapped be shared at no cost on the device's side).
fn storage_for(params: &BufferParams) -> (MTLResourceOptions, MemoryType) {
    let device_only = params.memory_type.contains(MemoryType::DEVICE_LOCAL)
        && !params.memory_type.intersects(MemoryType::HOST_VISIBLE);
    let mapped = params
        .usage
        .intersects(BufferUsage::MAPPING_SCOPED | BufferUsage::MAPPING_PERSISTENT)
        && !params.usage.contains(BufferUsage::MAPPING_OPTIONAL);
    if device_only && !mapped {
        (MTLResourceOptions::StorageModePrivate, PRIVATE)
    } else {
        (MTLResourceOptions::StorageModeShared, SHARED)
    }
}

/// One `MTLBuffer`.
pub struct MetalAllocation {
    buffer: ThreadSafe<ProtocolObject<dyn MTLBuffer>>,
    size: u64,
    memory_type: MemoryType,
    statistics: Arc<Counters>,
}

impl MetalAllocation {
    /// The Metal buffer.
    pub fn buffer(&self) -> &ProtocolObject<dyn MTLBuffer> {
        &self.buffer.0
    }
}

// SAFETY: `contents` of a shared-storage buffer is its memory, `size` bytes (or more: empty
// buffers get one byte), valid while the buffer lives, which this allocation keeps alive;
// private-storage buffers have no host address.
unsafe impl Allocation for MetalAllocation {
    fn size(&self) -> u64 {
        self.size
    }
    fn memory_type(&self) -> MemoryType {
        self.memory_type
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        (self.memory_type == SHARED).then(|| self.buffer.0.contents().cast())
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

/// Allocates private- and shared-storage buffers on one device.
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
        let heap = |memory_type, allowed_usage| MemoryHeap {
            memory_type,
            allowed_usage,
            max_allocation_size: self.device.0.maxBufferLength() as u64,
            min_alignment: 16,
        };
        vec![
            heap(
                PRIVATE,
                BufferUsage::all() - BufferUsage::MAPPING_SCOPED - BufferUsage::MAPPING_PERSISTENT,
            ),
            heap(SHARED, BufferUsage::all()),
        ]
    }

    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
        let params = params.canonicalize();
        let length = usize::try_from(size.max(1))
            .map_err(|_| Error::resource_exhausted(format!("a Metal buffer of {size} bytes does not fit this host")))?;
        let (storage, memory_type) = storage_for(&params);
        let buffer = (self.device.0)
            .newBufferWithLength_options(length, storage)
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
            memory_type,
            statistics: self.statistics.clone(),
        };
        let usage = if memory_type == SHARED {
            params.usage | BufferUsage::MAPPING
        } else {
            params.usage - BufferUsage::MAPPING_SCOPED - BufferUsage::MAPPING_PERSISTENT
        };
        Ok(Buffer::new(Arc::new(allocation), usage, params.access))
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
