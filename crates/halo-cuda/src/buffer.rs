//! Allocations: device memory, pinned host memory or managed memory, each one CUDA allocation
//! addressed by one unified (UVA) pointer.

use crate::device::DeviceShared;
use halo_hal::{Allocation, Error, MemoryType, Result};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// Which CUDA allocator a buffer came from, which decides how it is freed and whether the host
/// can address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// `cuMemAlloc`: device-local, invisible to the host.
    Device,
    /// `cuMemAllocHost`: pinned host memory the device reaches over the bus.
    PinnedHost,
    /// `cuMemAllocManaged`: device-local memory the host may also touch (pages migrate).
    Managed,
}

impl MemoryKind {
    /// The HAL memory type of memory of this kind.
    pub fn memory_type(self) -> MemoryType {
        match self {
            MemoryKind::Device => MemoryType::DEVICE_LOCAL,
            MemoryKind::PinnedHost => MemoryType::HOST_LOCAL | MemoryType::DEVICE_VISIBLE,
            MemoryKind::Managed => MemoryType::DEVICE_LOCAL | MemoryType::HOST_VISIBLE | MemoryType::HOST_COHERENT,
        }
    }
}

/// One CUDA allocation.
///
/// Ownership: keeps its device (and so the driver library and context) alive; freed when the
/// last buffer and the last submission using it let go. Threading: any thread.
pub struct CudaAllocation {
    shared: Arc<DeviceShared>,
    pointer: u64,
    size: u64,
    kind: MemoryKind,
}

impl CudaAllocation {
    /// Allocates `size` zeroed bytes of `kind` (at least one byte: CUDA has no empty allocations).
    pub(crate) fn new(shared: &Arc<DeviceShared>, size: u64, kind: MemoryKind) -> Result<Self> {
        let bytes = usize::try_from(size.max(1))
            .map_err(|_| Error::resource_exhausted(format!("a buffer of {size} bytes does not fit this host")))?;
        shared.bind()?;
        let api = &shared.api;
        let mut pointer = 0u64;
        // SAFETY: the out-pointers are valid for the calls; the context is current.
        unsafe {
            match kind {
                MemoryKind::Device => api.mem_alloc(&mut pointer, bytes)?,
                MemoryKind::Managed => api.mem_alloc_managed(&mut pointer, bytes, crate::api::MEM_ATTACH_GLOBAL)?,
                MemoryKind::PinnedHost => {
                    let mut host = std::ptr::null_mut();
                    api.mem_alloc_host(&mut host, bytes)?;
                    pointer = host as u64;
                }
            }
        }
        let allocation = CudaAllocation {
            shared: shared.clone(),
            pointer,
            size,
            kind,
        };
        // SAFETY: `pointer` addresses `bytes` bytes just allocated and not yet shared.
        unsafe { api.memset_d8(pointer, 0, bytes) }
            .map_err(|e| e.context(format!("zeroing a new buffer of {size} bytes")))?;
        shared.count_allocated(size as i64);
        Ok(allocation)
    }

    /// The unified address of byte 0.
    pub fn device_pointer(&self) -> u64 {
        self.pointer
    }

    /// Whether this allocation belongs to the device `shared`.
    pub(crate) fn is_on(&self, shared: &Arc<DeviceShared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }
}

impl Drop for CudaAllocation {
    fn drop(&mut self) {
        // Errors cannot be reported from a drop; a failure here means the context is already
        // lost, and the memory goes with it.
        if self.shared.bind().is_ok() {
            // SAFETY: the pointer came from the matching allocator and nothing uses it any more:
            // submissions hold the allocation until the device has finished with it.
            let _ = unsafe {
                match self.kind {
                    MemoryKind::PinnedHost => self.shared.api.mem_free_host(self.pointer as *mut std::ffi::c_void),
                    MemoryKind::Device | MemoryKind::Managed => self.shared.api.mem_free(self.pointer),
                }
            };
        }
        self.shared.count_allocated(-(self.size as i64));
    }
}

impl Allocation for CudaAllocation {
    fn size(&self) -> u64 {
        self.size
    }

    fn memory_type(&self) -> MemoryType {
        self.kind.memory_type()
    }

    fn host_ptr(&self) -> Option<NonNull<u8>> {
        match self.kind {
            MemoryKind::Device => None,
            // Pinned and managed memory have one address for host and device.
            MemoryKind::PinnedHost | MemoryKind::Managed => NonNull::new(self.pointer as *mut u8),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
