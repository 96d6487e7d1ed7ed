//! An allocation: host memory with an OpenCL buffer object over it (`CL_MEM_USE_HOST_PTR`). The
//! driver runs devices whose memory is the host's, where kernels then read and write the very
//! bytes the host maps, with no copies.

use crate::api;
use crate::device::DeviceShared;
use halo_hal::host_memory::HostAllocation;
use halo_hal::{Allocation, Error, MemoryType, Result};
use opencl3::memory::{Buffer, ClMem};
use opencl3::types::cl_mem;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// Host memory and the buffer object over it.
///
/// Ownership: keeps its device's context alive; the buffer object is released before the memory
/// it wraps is freed (field order). Threading: any thread.
pub struct ClAllocation {
    mem: Buffer<u8>,
    host: HostAllocation,
    shared: Arc<DeviceShared>,
}

impl ClAllocation {
    /// `size` zeroed bytes of host memory of `memory_type`, with a buffer object over them.
    pub(crate) fn new(shared: &Arc<DeviceShared>, size: u64, memory_type: MemoryType) -> Result<Self> {
        let host = HostAllocation::new(size, memory_type)?;
        let pointer = host
            .host_ptr()
            .ok_or_else(|| Error::internal("host allocation without a pointer"))?;
        // SAFETY: `host` holds `size` bytes (at least one) at `pointer`; it lives in the same
        // struct as the buffer object and is dropped after it.
        let mem = unsafe { api::host_buffer(&shared.context, pointer, size) }?;
        shared.count_allocated(size as i64);
        Ok(ClAllocation {
            mem,
            host,
            shared: shared.clone(),
        })
    }

    /// The buffer object, checking that it belongs to the device `shared`.
    pub(crate) fn mem_on(&self, shared: &Arc<DeviceShared>) -> Result<cl_mem> {
        if Arc::ptr_eq(&self.shared, shared) {
            Ok(self.mem.get())
        } else {
            Err(Error::invalid_argument("the buffer belongs to another OpenCL device"))
        }
    }
}

impl Drop for ClAllocation {
    fn drop(&mut self) {
        self.shared.count_allocated(-(self.host.size() as i64));
    }
}

// SAFETY: forwards to the host allocation, which owns its bytes until it drops and never moves
// them; the buffer object only aliases them for the device.
unsafe impl Allocation for ClAllocation {
    fn size(&self) -> u64 {
        self.host.size()
    }
    fn memory_type(&self) -> MemoryType {
        self.host.memory_type()
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.host.host_ptr()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
