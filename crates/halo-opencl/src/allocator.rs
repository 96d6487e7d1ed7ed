//! The allocator. On a device sharing the host's memory every buffer is host memory the device
//! addresses in place (see `buffer`), so every buffer is mappable and device-visible, as on
//! `local-task`. Where device-local memory is not to be mapped (a device with memory of its own,
//! or `device_local_mappable=false`), buffers asking for device-local memory without host
//! visibility get the device's own memory, and the rest host memory, as Vulkan's allocator does.

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

    /// Host memory as this device has it: host-local (which includes coherent) where the device
    /// uses it in place, else only host-visible and synced through the queue when mapped (see
    /// `buffer`).
    fn host_memory(&self) -> MemoryType {
        let coherence = if self.shared.host_coherent {
            MemoryType::HOST_LOCAL
        } else {
            MemoryType::HOST_VISIBLE
        };
        coherence | MemoryType::DEVICE_VISIBLE
    }

    /// The device's own memory, which the host cannot map.
    const DEVICE_MEMORY: MemoryType = MemoryType::DEVICE_LOCAL.union(MemoryType::DEVICE_VISIBLE);

    fn heap(&self, memory_type: MemoryType, allowed_usage: BufferUsage) -> MemoryHeap {
        MemoryHeap {
            memory_type,
            allowed_usage,
            max_allocation_size: self.shared.max_allocation,
            min_alignment: MIN_ALIGNMENT,
        }
    }

    /// Whether a buffer of `params` gets the device's own memory.
    fn on_device(&self, params: &BufferParams) -> Result<bool> {
        let wanted = params.memory_type.contains(MemoryType::DEVICE_LOCAL)
            && !params.memory_type.contains(MemoryType::HOST_VISIBLE);
        if self.shared.device_local_mappable || !wanted {
            return Ok(false);
        }
        let mapping = params
            .usage
            .intersects(BufferUsage::MAPPING_SCOPED | BufferUsage::MAPPING_PERSISTENT);
        if mapping && !params.usage.contains(BufferUsage::MAPPING_OPTIONAL) {
            return Err(Error::invalid_argument(format!(
                "a mappable buffer needs host-visible memory; {:?} was asked for",
                params.memory_type
            )));
        }
        Ok(true)
    }
}

impl Allocator for OpenClAllocator {
    fn memory_heaps(&self) -> Vec<MemoryHeap> {
        if self.shared.device_local_mappable {
            return vec![self.heap(self.host_memory() | MemoryType::DEVICE_LOCAL, BufferUsage::all())];
        }
        let unmapped = BufferUsage::all() - BufferUsage::MAPPING_SCOPED - BufferUsage::MAPPING_PERSISTENT;
        vec![
            self.heap(Self::DEVICE_MEMORY, unmapped),
            self.heap(self.host_memory(), BufferUsage::all()),
        ]
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
        let (allocation, usage) = if self.on_device(&params)? {
            let usage = params.usage - BufferUsage::MAPPING_SCOPED - BufferUsage::MAPPING_PERSISTENT;
            (ClAllocation::on_device(&self.shared, size, Self::DEVICE_MEMORY), usage)
        } else {
            let memory_type = self.host_memory() | (params.memory_type & MemoryType::DEVICE_LOCAL);
            let allocation = ClAllocation::on_host(&self.shared, size, memory_type);
            (allocation, params.usage | BufferUsage::MAPPING)
        };
        let allocation = allocation.map_err(|e| e.context(format!("allocating an OpenCL buffer of {size} bytes")))?;
        Ok(Buffer::new(Arc::new(allocation), usage, params.access))
    }

    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer> {
        // Imported bytes may be read-only and unaligned: the device gets its own copy.
        halo_hal::allocator::import_by_copy(self, params, bytes)
    }

    fn statistics(&self) -> AllocatorStatistics {
        self.shared.statistics()
    }
}
