//! Allocations: device memory, pinned host memory or managed memory, each one vendor allocation
//! addressed by one unified (UVA) pointer.

use crate::device::DeviceShared;
use crate::recycler::block_size;
use halo_hal::{Allocation, Error, MemoryType, Result};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// Which vendor allocator a buffer came from, which decides how it is freed and whether the host
/// can address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

/// What a new allocation holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// Zeros, as the allocator's buffers promise.
    Zeroed,
    /// Whatever was there: stream-ordered (queue) allocations, which programs write before they
    /// read, as in IREE.
    Undefined,
}

/// One vendor (CUDA or HIP) allocation.
///
/// Ownership: keeps its device (and so the driver library and context) alive; freed when the
/// last buffer and the last submission using it let go. Threading: any thread.
pub struct GpuAllocation {
    shared: Arc<DeviceShared>,
    pointer: u64,
    size: u64,
    kind: MemoryKind,
    /// Allocated (and so freed) in the order of the device's stream, from its memory pool.
    stream_ordered: bool,
    /// The bytes the vendor allocation holds, at least `size`: what the device's recycler keeps
    /// it under once freed.
    block: usize,
}

impl GpuAllocation {
    /// Allocates `size` bytes of `kind` (at least one byte: the vendor APIs have no empty allocations).
    /// Device memory comes from the stream's memory pool when the device allows it: available to
    /// everything issued on the stream from now on, without waiting for the device. Other memory
    /// comes from the device's recycler when it holds a freed block of the size.
    pub(crate) fn new(shared: &Arc<DeviceShared>, size: u64, kind: MemoryKind, contents: Contents) -> Result<Self> {
        let bytes = usize::try_from(size.max(1))
            .map_err(|_| Error::resource_exhausted(format!("a buffer of {size} bytes does not fit this host")))?;
        let stream_ordered = kind == MemoryKind::Device && shared.options.async_allocations;
        let block = if stream_ordered { bytes } else { block_size(bytes) };
        let pointer = if stream_ordered {
            shared.with_stream(|api, stream| {
                let mut pointer = 0u64;
                // SAFETY: the out-pointer is valid; the stream belongs to the current context.
                unsafe { api.mem_alloc_async(&mut pointer, bytes, stream) }?;
                if contents == Contents::Zeroed {
                    // SAFETY: `pointer` addresses `bytes` bytes in the stream's order.
                    if let Err(error) = unsafe { api.memset_d8_async(pointer, 0, bytes, stream) } {
                        // SAFETY: just allocated on this stream and used by nothing.
                        let _ = unsafe { api.mem_free_async(pointer, stream) };
                        return Err(error);
                    }
                }
                Ok(pointer)
            })?
        } else {
            allocate_now(shared, bytes, block, kind, contents)?
        };
        shared.count_allocated(size as i64);
        Ok(GpuAllocation {
            shared: shared.clone(),
            pointer,
            size,
            kind,
            stream_ordered,
            block,
        })
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

/// A block of `block` bytes for `bytes` (pinned, managed, or device memory without memory
/// pools), reused or made, with its first `bytes` zeroed before returning if asked.
fn allocate_now(
    shared: &DeviceShared,
    bytes: usize,
    block: usize,
    kind: MemoryKind,
    contents: Contents,
) -> Result<u64> {
    shared.bind()?;
    let api = &shared.api;
    let pointer = match shared.recycler.take(kind, block) {
        Some(pointer) => pointer,
        None => allocate_block(api, block, kind)?,
    };
    if contents == Contents::Zeroed {
        // SAFETY: `pointer` addresses `block` bytes, at least `bytes`, that nothing else uses.
        if let Err(error) = unsafe { api.memset_d8(pointer, 0, bytes) } {
            free_now(api, pointer, kind);
            return Err(error.context(format!("zeroing a new buffer of {bytes} bytes")));
        }
    }
    Ok(pointer)
}

/// A new vendor allocation of `block` bytes of `kind`; the context is current.
fn allocate_block(api: &crate::api::Api, block: usize, kind: MemoryKind) -> Result<u64> {
    let mut pointer = 0u64;
    // SAFETY: the out-pointers are valid for the calls; the caller made the context current.
    unsafe {
        match kind {
            MemoryKind::Device => api.mem_alloc(&mut pointer, block)?,
            MemoryKind::Managed => api.mem_alloc_managed(&mut pointer, block, crate::api::MEM_ATTACH_GLOBAL)?,
            MemoryKind::PinnedHost => {
                let mut host = std::ptr::null_mut();
                api.mem_alloc_host(&mut host, block)?;
                pointer = host as u64;
            }
        }
    }
    Ok(pointer)
}

/// Frees an allocation made by [`allocate_now`]; errors mean the context is lost, and the memory
/// with it.
pub(crate) fn free_now(api: &crate::api::Api, pointer: u64, kind: MemoryKind) {
    // SAFETY: the pointer came from the matching allocator and nothing uses it any more.
    let _ = unsafe {
        match kind {
            MemoryKind::PinnedHost => api.mem_free_host(pointer as *mut std::ffi::c_void),
            MemoryKind::Device | MemoryKind::Managed => api.mem_free(pointer),
        }
    };
}

impl Drop for GpuAllocation {
    fn drop(&mut self) {
        // Submissions hold the allocation until the device has finished with it, so everything
        // that uses it was issued before this point on the stream.
        if self.stream_ordered {
            // SAFETY: allocated on this stream; errors mean the context is lost, and the memory
            // with it.
            let _ = self
                .shared
                .with_stream(|api, stream| unsafe { api.mem_free_async(self.pointer, stream) });
        } else if let Err(pointer) = self.shared.recycler.keep(self.kind, self.block, self.pointer) {
            if self.shared.bind().is_ok() {
                free_now(&self.shared.api, pointer, self.kind);
            }
        }
        self.shared.count_allocated(-(self.size as i64));
    }
}

// SAFETY: pinned and managed memory are addressable by the host at their unified address for
// their whole size until the allocation frees them on drop; device memory reports no host pointer.
unsafe impl Allocation for GpuAllocation {
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
