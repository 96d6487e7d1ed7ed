//! The allocator: `VkBuffer`s sub-allocated from large `VkDeviceMemory` blocks by the
//! `gpu-allocator` crate, with Vulkan memory types mapped onto HAL memory types.

use crate::buffer::VulkanAllocation;
use crate::device::DeviceShared;
use crate::status::VkResultExt;
use ash::vk;
use gpu_allocator::vulkan::{AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;
use halo_hal::{
    Allocator, AllocatorStatistics, Buffer, BufferParams, BufferUsage, Error, HostBytes, MemoryHeap, MemoryType, Result,
};
use std::sync::Arc;

/// Every usage a HAL buffer may be put to; one `VkBuffer` serves them all.
fn buffer_usage() -> vk::BufferUsageFlags {
    vk::BufferUsageFlags::TRANSFER_SRC
        | vk::BufferUsageFlags::TRANSFER_DST
        | vk::BufferUsageFlags::STORAGE_BUFFER
        | vk::BufferUsageFlags::UNIFORM_BUFFER
        | vk::BufferUsageFlags::INDIRECT_BUFFER
}

/// The HAL memory type of Vulkan memory with `flags`.
pub(crate) fn hal_memory_type(flags: vk::MemoryPropertyFlags) -> MemoryType {
    let mut memory_type = MemoryType::DEVICE_VISIBLE;
    if flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL) {
        memory_type |= MemoryType::DEVICE_LOCAL;
    }
    if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
        memory_type |= MemoryType::HOST_VISIBLE;
    }
    if flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT) {
        memory_type |= MemoryType::HOST_COHERENT;
    }
    if flags.contains(vk::MemoryPropertyFlags::HOST_CACHED) {
        memory_type |= MemoryType::HOST_CACHED;
    }
    memory_type
}

/// Where `gpu-allocator` should look for memory of a HAL memory type.
fn location(memory_type: MemoryType) -> MemoryLocation {
    if !memory_type.contains(MemoryType::HOST_VISIBLE) {
        MemoryLocation::GpuOnly
    } else if memory_type.contains(MemoryType::HOST_CACHED) {
        MemoryLocation::GpuToCpu
    } else {
        MemoryLocation::CpuToGpu
    }
}

/// The allocator of one Vulkan device.
///
/// Threading: any thread (the sub-allocator is behind a lock).
pub struct VulkanAllocator {
    shared: Arc<DeviceShared>,
}

impl VulkanAllocator {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        VulkanAllocator { shared }
    }
}

impl Allocator for VulkanAllocator {
    fn memory_heaps(&self) -> Vec<MemoryHeap> {
        let properties = &self.shared.memory_properties;
        let mut heaps: Vec<MemoryHeap> = Vec::new();
        let offered = properties.memory_types[..properties.memory_type_count as usize]
            .iter()
            .filter(|memory| !memory.property_flags.is_empty())
            .flat_map(|memory| {
                let memory_type = hal_memory_type(memory.property_flags);
                // Requests for device-local memory alone get it without a mapping.
                let unmapped = self.shared.allocated_type(MemoryType::DEVICE_LOCAL, memory_type);
                [(memory, memory_type), (memory, unmapped)]
            });
        for (memory, memory_type) in offered {
            let heap = &properties.memory_heaps[memory.heap_index as usize];
            if heaps.iter().any(|h| h.memory_type == memory_type) {
                continue;
            }
            let mut allowed_usage = BufferUsage::DEFAULT | BufferUsage::DISPATCH;
            if memory_type.contains(MemoryType::HOST_VISIBLE) {
                allowed_usage |= BufferUsage::MAPPING;
            }
            heaps.push(MemoryHeap {
                memory_type,
                allowed_usage,
                max_allocation_size: heap.size.min(self.shared.max_allocation_size),
                min_alignment: self.shared.min_buffer_alignment(),
            });
        }
        heaps
    }

    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
        let params = params.canonicalize();
        let _span = tracing::info_span!("allocate", size, memory_type = ?params.memory_type).entered();
        if params
            .usage
            .intersects(BufferUsage::MAPPING_SCOPED | BufferUsage::MAPPING_PERSISTENT)
            && !params.usage.contains(BufferUsage::MAPPING_OPTIONAL)
            && !params.memory_type.contains(MemoryType::HOST_VISIBLE)
        {
            return Err(Error::invalid_argument(format!(
                "a mappable buffer needs host-visible memory; {:?} was asked for",
                params.memory_type
            )));
        }
        let allocation = self.shared.allocate(size, params.memory_type, params.min_alignment)?;
        let mut usage = params.usage;
        if allocation.host_ptr_available() {
            usage |= BufferUsage::MAPPING;
        } else {
            usage &= !(BufferUsage::MAPPING_SCOPED | BufferUsage::MAPPING_PERSISTENT);
        }
        Ok(Buffer::new(Arc::new(allocation), usage, params.access))
    }

    /// Copies the bytes into a new host-visible buffer. The buffer owns `bytes`, so no one else
    /// can change them afterwards and a copy behaves as an alias would; importing in place
    /// (`VK_EXT_external_memory_host`) needs page-aligned host memory, which callers rarely have.
    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer> {
        let params = BufferParams {
            memory_type: params.memory_type | MemoryType::HOST_VISIBLE,
            ..params
        };
        halo_hal::allocator::import_by_copy(self, params, bytes)
    }

    fn statistics(&self) -> AllocatorStatistics {
        self.shared.statistics()
    }
}

impl DeviceShared {
    /// The HAL memory type of an allocation of `requested` type from memory of type `actual`:
    /// `actual`, less the host's access where device-local memory is not to be mapped.
    pub(crate) fn allocated_type(&self, requested: MemoryType, actual: MemoryType) -> MemoryType {
        if self.device_local_mappable
            || requested.contains(MemoryType::HOST_VISIBLE)
            || !actual.contains(MemoryType::DEVICE_LOCAL)
        {
            return actual;
        }
        actual - (MemoryType::HOST_VISIBLE | MemoryType::HOST_COHERENT | MemoryType::HOST_CACHED)
    }

    /// A zeroed allocation of `size` bytes in memory of (at least) `memory_type`.
    pub(crate) fn allocate(
        self: &Arc<Self>,
        size: u64,
        memory_type: MemoryType,
        min_alignment: u64,
    ) -> Result<VulkanAllocation> {
        if size > self.max_allocation_size {
            return Err(Error::resource_exhausted(format!(
                "buffer of {size} bytes exceeds the device's largest allocation ({} bytes)",
                self.max_allocation_size
            )));
        }
        // Vulkan has no empty buffers, and fills work on whole words: the `VkBuffer` is rounded up
        // to a non-empty multiple of 4 bytes, which the HAL buffer never exposes.
        let info = vk::BufferCreateInfo::default()
            .size(size.max(1).div_ceil(4) * 4)
            .usage(buffer_usage())
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: the device is alive and `info` is valid for the call.
        let raw = unsafe { self.raw.create_buffer(&info, None) }.or_vk("vkCreateBuffer")?;
        match self.bind_memory(raw, size, memory_type, min_alignment) {
            Ok(allocation) => Ok(allocation),
            Err(error) => {
                // SAFETY: the buffer was just created and nothing uses it.
                unsafe { self.raw.destroy_buffer(raw, None) };
                Err(error)
            }
        }
    }

    fn bind_memory(
        self: &Arc<Self>,
        raw: vk::Buffer,
        size: u64,
        memory_type: MemoryType,
        min_alignment: u64,
    ) -> Result<VulkanAllocation> {
        // SAFETY: `raw` is a live buffer of this device.
        let mut requirements = unsafe { self.raw.get_buffer_memory_requirements(raw) };
        // Aligned to atoms at both ends so flushes of non-coherent memory stay inside the
        // allocation, and to what storage bindings and the caller need.
        let atom = self.limits.non_coherent_atom_size.max(1);
        requirements.alignment = requirements
            .alignment
            .max(self.min_buffer_alignment())
            .max(min_alignment.next_power_of_two());
        requirements.size = requirements.size.div_ceil(atom) * atom;
        let memory = self.allocate_memory(&AllocationCreateDesc {
            name: "halo buffer",
            requirements,
            location: location(memory_type),
            linear: true,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        });
        let memory = memory.map_err(|e| Error::resource_exhausted(format!("allocating {size} bytes: {e}")))?;
        // SAFETY: the memory was allocated for this buffer's requirements and is not bound yet.
        let bound = unsafe { self.raw.bind_buffer_memory(raw, memory.memory(), memory.offset()) };
        let hal_type = self.allocated_type(memory_type, hal_memory_type(memory.memory_properties()));
        if let Err(result) = bound {
            self.free_memory(memory, 0);
            return Err(crate::status::vk_error(result, "vkBindBufferMemory"));
        }
        self.count_allocated(size);
        let allocation = VulkanAllocation::new(self.clone(), raw, memory, size, hal_type);
        allocation.zero(size)?;
        Ok(allocation)
    }
}
