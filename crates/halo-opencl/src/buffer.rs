//! An allocation: host memory with an OpenCL buffer object over it (`CL_MEM_USE_HOST_PTR`), which
//! kernels of a device sharing the host's memory read and write in place and the host maps with
//! no copies; or a buffer object of the device's own memory, which the host cannot map (what
//! device-local memory is on a discrete GPU: the runtime reaches it through queue copies).
//!
//! Host memory of a device with memory of its own is not coherent: it is host memory beside a
//! buffer object of the device's own, and mappings flush and invalidate their range through the
//! queue. The two never alias: over its own host pointer, an implementation that keeps a copy of
//! a `CL_MEM_USE_HOST_PTR` buffer may write that copy back behind the host's writes (PoCL lost a
//! mapped fill that way once in a full test run).

use crate::api;
use crate::device::DeviceShared;
use halo_hal::host_memory::HostAllocation;
use halo_hal::{Allocation, Error, MemoryType, Result};
use opencl3::memory::{Buffer, ClMem};
use opencl3::types::cl_mem;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// Where an allocation's bytes are.
enum Memory {
    /// Host memory, kept alive as long as the buffer object over it.
    Host(HostAllocation),
    /// The device's own memory, of this many bytes and this memory type.
    Device(u64, MemoryType),
}

/// A buffer object, over host memory or of the device's own.
///
/// Ownership: keeps its device's context alive; the buffer object is released before the memory
/// it wraps is freed (field order). Threading: any thread.
pub struct ClAllocation {
    mem: Buffer<u8>,
    memory: Memory,
    shared: Arc<DeviceShared>,
}

impl ClAllocation {
    /// `size` zeroed bytes of host memory of `memory_type`: with a buffer object over them when
    /// the memory is coherent, else beside a zeroed buffer object of the device's own that
    /// mappings sync with.
    pub(crate) fn on_host(shared: &Arc<DeviceShared>, size: u64, memory_type: MemoryType) -> Result<Self> {
        let host = HostAllocation::new(size, memory_type)?;
        let mem = if memory_type.contains(MemoryType::HOST_COHERENT) {
            let pointer = host
                .host_ptr()
                .ok_or_else(|| Error::internal("host allocation without a pointer"))?;
            // SAFETY: `host` holds `size` bytes (at least one) at `pointer`; it lives in the same
            // struct as the buffer object and is dropped after it.
            unsafe { api::host_buffer(&shared.context, pointer, size) }?
        } else {
            api::device_buffer(&shared.context, &shared.queue, size)?
        };
        Ok(Self::counted(shared, mem, Memory::Host(host)))
    }

    /// `size` zeroed bytes of the device's own memory, of `memory_type` (not host-visible).
    pub(crate) fn on_device(shared: &Arc<DeviceShared>, size: u64, memory_type: MemoryType) -> Result<Self> {
        let mem = api::device_buffer(&shared.context, &shared.queue, size)?;
        Ok(Self::counted(shared, mem, Memory::Device(size, memory_type)))
    }

    fn counted(shared: &Arc<DeviceShared>, mem: Buffer<u8>, memory: Memory) -> Self {
        let allocation = ClAllocation {
            mem,
            memory,
            shared: shared.clone(),
        };
        shared.count_allocated(allocation.size() as i64);
        allocation
    }

    /// The buffer object, checking that it belongs to the device `shared`.
    pub(crate) fn mem_on(&self, shared: &DeviceShared) -> Result<cl_mem> {
        if std::ptr::eq(&*self.shared, shared) {
            Ok(self.mem.get())
        } else {
            Err(Error::invalid_argument("the buffer belongs to another OpenCL device"))
        }
    }
}

impl Drop for ClAllocation {
    fn drop(&mut self) {
        self.shared.count_allocated(-(self.size() as i64));
    }
}

// SAFETY: host memory is the host allocation's, which owns its bytes until it drops and never
// moves them (the buffer object only aliases them for the device); device memory has no pointer.
unsafe impl Allocation for ClAllocation {
    fn size(&self) -> u64 {
        match &self.memory {
            Memory::Host(host) => host.size(),
            Memory::Device(size, _) => *size,
        }
    }
    fn memory_type(&self) -> MemoryType {
        match &self.memory {
            Memory::Host(host) => host.memory_type(),
            Memory::Device(_, memory_type) => *memory_type,
        }
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        match &self.memory {
            Memory::Host(host) => host.host_ptr(),
            Memory::Device(..) => None,
        }
    }
    fn flush(&self, offset: u64, length: u64) -> Result<()> {
        self.sync(offset, length, api::SyncDirection::ToDevice)
    }
    fn invalidate(&self, offset: u64, length: u64) -> Result<()> {
        self.sync(offset, length, api::SyncDirection::ToHost)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl ClAllocation {
    /// Syncs host memory that is not coherent with the device's copy of it.
    fn sync(&self, offset: u64, length: u64, direction: api::SyncDirection) -> Result<()> {
        let Memory::Host(host) = &self.memory else {
            return Ok(());
        };
        if length == 0 || host.memory_type().contains(MemoryType::HOST_COHERENT) {
            return Ok(());
        }
        if offset.checked_add(length).is_none_or(|end| end > host.size()) {
            return Err(Error::out_of_range(format!(
                "syncing [{offset}, {}) of an allocation of {} bytes",
                offset.saturating_add(length),
                host.size()
            )));
        }
        let pointer = host
            .host_ptr()
            .ok_or_else(|| Error::internal("host allocation without a pointer"))?;
        // SAFETY: `mem` and the host memory at `pointer` are both `host.size()` bytes, and the
        // range was checked against that.
        unsafe { api::sync_host_range(&self.shared.queue, self.mem.get(), pointer, offset, length, direction) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::{BufferParams, DriverRegistry};
    use opencl3::memory::CL_MEM_USE_HOST_PTR;

    /// Whether a host-mappable buffer of the device at `uri` is a buffer object over its host
    /// bytes; `None` without an OpenCL device.
    fn over_host_bytes(uri: &str) -> Option<bool> {
        let mut registry = DriverRegistry::new();
        crate::register_driver(&mut registry);
        let device = registry
            .create_device(uri)
            .map_err(|error| println!("SKIPPED only_coherent_host_memory_is_used_in_place: {error}"))
            .ok()?;
        let buffer = device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), 64)
            .unwrap();
        let allocation: &ClAllocation = buffer.allocation().as_any().downcast_ref().unwrap();
        Some(allocation.mem.flags().unwrap() & CL_MEM_USE_HOST_PTR != 0)
    }

    #[test]
    fn only_coherent_host_memory_is_used_in_place() {
        let Some(coherent) = over_host_bytes("opencl://") else {
            return;
        };
        assert!(coherent, "PoCL shares the host's memory: buffers use it in place");
        let cached = over_host_bytes("opencl://?device_local_mappable=false").unwrap();
        assert!(
            !cached,
            "non-coherent host memory must not alias the buffer object's storage"
        );
    }
}
