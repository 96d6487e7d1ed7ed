//! The allocator: every buffer is host memory the device addresses in place (see `buffer`), so
//! every buffer is mappable and device-visible, as on `local-task`.

use crate::buffer::ClAllocation;
use crate::device::DeviceShared;
use halo_hal::{
    Allocator, AllocatorStatistics, Buffer, BufferParams, BufferUsage, Error, HostBytes, MemoryHeap, MemoryType, Result,
};
use std::sync::Arc;

/// Alignment of every allocation (halo-hal's host alignment).
const MIN_ALIGNMENT: u64 = halo_hal::host_memory::HOST_ALIGNMENT as u64;

/// Allocates buffers for one OpenCL device.
pub struct OpenClAllocator {
    shared: Arc<DeviceShared>,
}

impl OpenClAllocator {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        OpenClAllocator { shared }
    }

    /// What every buffer is: host memory the device sees.
    const MEMORY_TYPE: MemoryType = MemoryType::HOST_LOCAL
        .union(MemoryType::DEVICE_VISIBLE)
        .union(MemoryType::HOST_VISIBLE)
        .union(MemoryType::HOST_COHERENT);
}

impl Allocator for OpenClAllocator {
    fn memory_heaps(&self) -> Vec<MemoryHeap> {
        vec![MemoryHeap {
            memory_type: Self::MEMORY_TYPE | MemoryType::DEVICE_LOCAL,
            allowed_usage: BufferUsage::all(),
            max_allocation_size: self.shared.max_allocation,
            min_alignment: MIN_ALIGNMENT,
        }]
    }

    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
        let params = params.canonicalize();
        if params.min_alignment > MIN_ALIGNMENT {
            return Err(Error::invalid_argument(format!(
                "an alignment of {} bytes was asked for; OpenCL allocations are aligned to {MIN_ALIGNMENT}",
                params.min_alignment
            )));
        }
        if size > self.shared.max_allocation {
            return Err(Error::resource_exhausted(format!(
                "a buffer of {size} bytes is larger than the device's largest allocation, {} bytes",
                self.shared.max_allocation
            )));
        }
        let memory_type = Self::MEMORY_TYPE | (params.memory_type & MemoryType::DEVICE_LOCAL);
        let allocation = ClAllocation::new(&self.shared, size, memory_type)
            .map_err(|e| e.context(format!("allocating an OpenCL buffer of {size} bytes")))?;
        Ok(Buffer::new(
            Arc::new(allocation),
            params.usage | BufferUsage::MAPPING,
            params.access,
        ))
    }

    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer> {
        // Imported bytes may be read-only and unaligned: the device gets its own copy.
        halo_hal::allocator::import_by_copy(self, params, bytes)
    }

    fn statistics(&self) -> AllocatorStatistics {
        self.shared.statistics()
    }
}
