//! The allocator: HAL memory types onto the vendor's three allocators, as IREE's CUDA and HIP
//! drivers map them.
//!
//! - device-local and not host-visible: `cuMemAlloc` (the host reaches it through queue copies,
//!   as with a discrete GPU under Vulkan);
//! - device-local and host-visible: `cuMemAllocManaged`;
//! - anything else (host-local): `cuMemAllocHost`, pinned and mapped into the device's address
//!   space.

use crate::buffer::{Contents, GpuAllocation, MemoryKind};
use crate::device::DeviceShared;
use halo_hal::{
    Allocator, AllocatorStatistics, Buffer, BufferParams, BufferUsage, Error, HostBytes, MemoryHeap, MemoryType, Result,
};
use std::sync::Arc;

/// Alignment of every GPU allocation (the driver aligns to at least 256 bytes).
const MIN_ALIGNMENT: u64 = 256;

/// The allocator of one GPU device.
///
/// Threading: any thread.
pub struct GpuAllocator {
    shared: Arc<DeviceShared>,
}

impl GpuAllocator {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        GpuAllocator { shared }
    }

    /// A buffer of `size` bytes satisfying `params`, holding `contents`.
    pub(crate) fn allocate(&self, params: BufferParams, size: u64, contents: Contents) -> Result<Buffer> {
        let params = params.canonicalize();
        if params.min_alignment > MIN_ALIGNMENT {
            return Err(Error::invalid_argument(format!(
                "an alignment of {} bytes was asked for; GPU allocations are aligned to {MIN_ALIGNMENT}",
                params.min_alignment
            )));
        }
        let kind = memory_kind(params.memory_type);
        let mapping = BufferUsage::MAPPING_SCOPED | BufferUsage::MAPPING_PERSISTENT;
        if kind == MemoryKind::Device
            && params.usage.intersects(mapping)
            && !params.usage.contains(BufferUsage::MAPPING_OPTIONAL)
        {
            return Err(Error::invalid_argument(format!(
                "a mappable buffer needs host-visible memory; {:?} was asked for",
                params.memory_type
            )));
        }
        let allocation = GpuAllocation::new(&self.shared, size, kind, contents)
            .map_err(|e| e.context(format!("allocating a buffer of {size} bytes ({kind:?} memory)")))?;
        let mut usage = params.usage;
        if kind == MemoryKind::Device {
            usage &= !mapping;
        } else {
            usage |= BufferUsage::MAPPING;
        }
        Ok(Buffer::new(Arc::new(allocation), usage, params.access))
    }
}

/// The vendor allocator that serves `memory_type`.
pub fn memory_kind(memory_type: MemoryType) -> MemoryKind {
    let device_local = memory_type.contains(MemoryType::DEVICE_LOCAL);
    match (device_local, memory_type.contains(MemoryType::HOST_VISIBLE)) {
        (true, false) => MemoryKind::Device,
        (true, true) => MemoryKind::Managed,
        (false, _) => MemoryKind::PinnedHost,
    }
}

impl Allocator for GpuAllocator {
    fn memory_heaps(&self) -> Vec<MemoryHeap> {
        let total = self.shared.total_memory;
        [MemoryKind::Device, MemoryKind::Managed, MemoryKind::PinnedHost]
            .into_iter()
            .map(|kind| {
                let mut allowed_usage = BufferUsage::DEFAULT | BufferUsage::DISPATCH;
                if kind != MemoryKind::Device {
                    allowed_usage |= BufferUsage::MAPPING;
                }
                MemoryHeap {
                    memory_type: kind.memory_type(),
                    allowed_usage,
                    max_allocation_size: total,
                    min_alignment: MIN_ALIGNMENT,
                }
            })
            .collect()
    }

    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
        self.allocate(params, size, Contents::Zeroed)
    }

    /// Copies the bytes into a new pinned buffer (registering pageable memory with the driver
    /// would pin the caller's pages for the buffer's lifetime).
    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer> {
        let params = BufferParams {
            memory_type: MemoryType::HOST_LOCAL | MemoryType::DEVICE_VISIBLE,
            ..params
        };
        halo_hal::allocator::import_by_copy(self, params, bytes)
    }

    fn statistics(&self) -> AllocatorStatistics {
        self.shared.statistics()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_types_choose_cuda_allocators() {
        assert_eq!(memory_kind(MemoryType::DEVICE_LOCAL), MemoryKind::Device);
        assert_eq!(memory_kind(MemoryType::OPTIMAL_FOR_DEVICE), MemoryKind::Device);
        assert_eq!(
            memory_kind(MemoryType::DEVICE_LOCAL | MemoryType::HOST_VISIBLE),
            MemoryKind::Managed
        );
        assert_eq!(memory_kind(MemoryType::HOST_LOCAL), MemoryKind::PinnedHost);
        assert_eq!(
            memory_kind(MemoryType::HOST_VISIBLE | MemoryType::DEVICE_VISIBLE),
            MemoryKind::PinnedHost
        );
    }
}
