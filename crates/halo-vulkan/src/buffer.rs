//! Buffers: a `VkBuffer` over a sub-allocation of device memory.

use crate::device::DeviceShared;
use crate::status::VkResultExt;
use ash::vk;
use gpu_allocator::vulkan::Allocation;
use halo_hal::{Buffer, Error, MemoryType, Result};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// One allocation: the `VkBuffer` that covers it and the memory bound to it.
///
/// Ownership: keeps its device alive; submissions keep the allocation alive until they complete.
pub struct VulkanAllocation {
    shared: Arc<DeviceShared>,
    raw: vk::Buffer,
    /// Taken back by `drop` to return it to the sub-allocator.
    memory: Option<Allocation>,
    size: u64,
    memory_type: MemoryType,
    host_ptr: Option<NonNull<u8>>,
    /// Host writes need flushing and device writes invalidating (memory not host-coherent).
    needs_flush: bool,
}

// SAFETY: the host pointer is a persistent mapping of memory this allocation owns; accesses go
// through copies whose ordering is the HAL's contract (semaphores), as for host allocations.
unsafe impl Send for VulkanAllocation {}
// SAFETY: as above; the struct has no interior mutability.
unsafe impl Sync for VulkanAllocation {}

impl VulkanAllocation {
    pub(crate) fn new(
        shared: Arc<DeviceShared>,
        raw: vk::Buffer,
        memory: Allocation,
        size: u64,
        memory_type: MemoryType,
    ) -> Self {
        let host_ptr = memory
            .mapped_ptr()
            .filter(|_| memory_type.contains(MemoryType::HOST_VISIBLE))
            .and_then(|p| NonNull::new(p.as_ptr().cast::<u8>()));
        let needs_flush = !memory_type.contains(MemoryType::HOST_COHERENT);
        VulkanAllocation {
            shared,
            raw,
            memory: Some(memory),
            size,
            memory_type,
            host_ptr,
            needs_flush,
        }
    }

    /// The `VkBuffer` and the offset of `buffer` within it, checking that it belongs to the
    /// device `shared`.
    pub(crate) fn of<'a>(buffer: &'a Buffer, shared: &Arc<DeviceShared>) -> Result<&'a VulkanAllocation> {
        let allocation = halo_hal::downcast::<VulkanAllocation>(buffer.allocation().as_any(), "buffer")?;
        if !Arc::ptr_eq(&allocation.shared, shared) {
            return Err(Error::invalid_argument(format!(
                "{buffer:?} belongs to another Vulkan device"
            )));
        }
        Ok(allocation)
    }

    /// Whether the host can map it.
    pub(crate) fn host_ptr_available(&self) -> bool {
        self.host_ptr.is_some()
    }

    /// Zeroes the first `size` bytes: through the mapping where there is one, else on the queue.
    pub(crate) fn zero(&self, size: u64) -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        match self.host_ptr {
            Some(ptr) => {
                // SAFETY: the mapping covers the allocation's `size` bytes, and nothing else uses
                // the allocation yet.
                unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, size as usize) };
                halo_hal::Allocation::flush(self, 0, size)
            }
            None => self.shared.fill_now(self.raw),
        }
    }

    /// The `VkBuffer` covering the allocation.
    pub(crate) fn raw(&self) -> vk::Buffer {
        self.raw
    }

    fn mapped_range(&self, offset: u64, length: u64) -> Result<vk::MappedMemoryRange<'static>> {
        let memory = self.memory.as_ref().expect("allocation is alive");
        let atom = self.shared.limits.non_coherent_atom_size.max(1);
        // The sub-allocation starts and ends on atom boundaries (see `allocator.rs`), so widening
        // the range to atoms stays inside it.
        let start = (memory.offset() + offset) / atom * atom;
        let end = (memory.offset() + offset + length).div_ceil(atom) * atom;
        // SAFETY: reading the handle of a live allocation.
        let device_memory = unsafe { memory.memory() };
        Ok(vk::MappedMemoryRange::default()
            .memory(device_memory)
            .offset(start)
            .size(end - start))
    }
}

// SAFETY: the host pointer is the persistent mapping of this allocation's memory, `size` bytes
// long, valid until the allocation frees its memory on drop.
unsafe impl halo_hal::Allocation for VulkanAllocation {
    fn size(&self) -> u64 {
        self.size
    }

    fn memory_type(&self) -> MemoryType {
        self.memory_type
    }

    fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.host_ptr
    }

    fn flush(&self, offset: u64, length: u64) -> Result<()> {
        if !self.needs_flush || length == 0 {
            return Ok(());
        }
        let range = self.mapped_range(offset, length)?;
        // SAFETY: the range lies inside this live, mapped allocation.
        unsafe { self.shared.raw.flush_mapped_memory_ranges(&[range]) }.or_vk("vkFlushMappedMemoryRanges")
    }

    fn invalidate(&self, offset: u64, length: u64) -> Result<()> {
        if !self.needs_flush || length == 0 {
            return Ok(());
        }
        let range = self.mapped_range(offset, length)?;
        // SAFETY: as in `flush`.
        unsafe { self.shared.raw.invalidate_mapped_memory_ranges(&[range]) }.or_vk("vkInvalidateMappedMemoryRanges")
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for VulkanAllocation {
    fn drop(&mut self) {
        // SAFETY: submissions that use this buffer hold an `Arc` of the allocation until they
        // complete, so the device no longer uses the buffer or its memory.
        unsafe { self.shared.raw.destroy_buffer(self.raw, None) };
        if let Some(memory) = self.memory.take() {
            self.shared.free_memory(memory, self.size);
        }
    }
}
