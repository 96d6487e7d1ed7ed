//! The device's allocator: device memory the host cannot map, and host memory for staging.
//!
//! Device buffers take an address range in one of the chip's memory kinds ([`crate::memory`]);
//! in mock mode their bytes live in host memory that only the device's queues touch. Their
//! memory type lacks `HOST_VISIBLE`, so the HAL refuses to map them and every host↔device byte
//! goes through a queue transfer, as it would on the card. Buffers asking for host-visible
//! memory (staging, readback) are plain host memory the device can reach, as the card reaches
//! the host's pinned memory over PCIe.
//!
//! A device buffer may be created in the tile layout ([`TenstorrentAllocator::allocate_tiled`]):
//! the host sees it as the row-major tensor it holds, the device stores it as 32×32 tiles (with
//! zero padding), and the transfer queue converts on the way in and out.

use crate::memory::{BufferRole, DeviceAllocation, DeviceMemory, KindUsage, MemoryKind};
use crate::tile_layout::tiled_byte_length;
use halo_hal::allocator::import_by_copy;
use halo_hal::host_memory::{HostAllocation, HOST_ALIGNMENT};
use halo_hal::{
    Allocator, AllocatorStatistics, Buffer, BufferParams, BufferUsage, ElementType, Error, HostBytes, MemoryHeap,
    MemoryType, Result,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Memory type of device buffers: the device's own, invisible to the host.
pub const DEVICE_MEMORY: MemoryType = MemoryType::DEVICE_LOCAL;
/// Memory type of host buffers the device reaches.
pub const HOST_MEMORY: MemoryType = MemoryType::HOST_LOCAL.union(MemoryType::DEVICE_VISIBLE);

/// Creates buffers in the chip's memory kinds or in host memory.
pub struct TenstorrentAllocator {
    memory: Arc<DeviceMemory>,
    host: Arc<HostBytesInUse>,
}

/// The tensor a buffer in the tile layout holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TiledLayout {
    /// Its shape; the last two dimensions are the tiled matrix.
    pub shape: Vec<u64>,
    /// Its element type (`f32`, `f16`, `bf16` or `i32`).
    pub element_type: ElementType,
}

impl TiledLayout {
    /// Bytes of the row-major form (saturating: a layout that was allocated never overflows).
    pub fn row_major_bytes(&self) -> u64 {
        let element = self.element_type.byte_size() as u64;
        self.shape.iter().fold(element, |bytes, &dim| bytes.saturating_mul(dim))
    }
}

/// What the device keeps about one of its buffers, dropped with the buffer's memory.
struct DeviceStorage {
    range: DeviceAllocation,
    layout: Option<TiledLayout>,
}

/// Host bytes allocated through this allocator (device memory is counted by [`DeviceMemory`]),
/// and the peak of host and device bytes together.
#[derive(Default)]
struct HostBytesInUse {
    now: AtomicU64,
    peak: AtomicU64,
}

/// Returns a host buffer's bytes to the count when the buffer's memory is freed.
struct HostCharge {
    bytes: u64,
    count: Arc<HostBytesInUse>,
}

impl Drop for HostCharge {
    fn drop(&mut self) {
        self.count.now.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl TenstorrentAllocator {
    /// An allocator over `memory`.
    pub fn new(memory: Arc<DeviceMemory>) -> Self {
        TenstorrentAllocator {
            memory,
            host: Arc::default(),
        }
    }

    /// Use of each memory kind now.
    pub fn usage(&self) -> Vec<KindUsage> {
        self.memory.statistics()
    }

    /// A device buffer holding a tensor of `shape` and `element_type` in the tile layout: the
    /// host reads and writes it row-major (the buffer's length is the row-major size), the
    /// device stores tiles, and transfers convert. Transfers must cover the whole buffer, and
    /// the mock cores refuse to dispatch on it (their kernels are row-major).
    ///
    /// # Errors
    /// `Unimplemented` for an element type tiles do not hold; as [`Allocator::allocate_buffer`].
    pub fn allocate_tiled(&self, params: BufferParams, shape: &[u64], element_type: ElementType) -> Result<Buffer> {
        let tiled = tiled_byte_length(shape, element_type)?;
        let layout = TiledLayout {
            shape: shape.to_vec(),
            element_type,
        };
        let row_major = layout.row_major_bytes();
        self.allocate_device(&params.canonicalize(), tiled, Some(layout))?
            .subspan(0, row_major)
    }

    fn allocate_device(&self, params: &BufferParams, size: u64, layout: Option<TiledLayout>) -> Result<Buffer> {
        let role = if params.usage.intersects(BufferUsage::DISPATCH) {
            BufferRole::DispatchStorage
        } else {
            BufferRole::Other
        };
        let range = self.memory.allocate(size, role)?;
        let storage = HostAllocation::new(size, DEVICE_MEMORY)
            .map_err(|error| error.context(format!("backing {size} bytes of mock {}", range.kind().name())))?
            .with_tag(Box::new(DeviceStorage { range, layout }));
        self.record_peak();
        // Mapping bits are dropped: nothing on the host may map this memory.
        let usage = params.usage & !(BufferUsage::MAPPING | BufferUsage::MAPPING_PERSISTENT);
        Ok(Buffer::new(Arc::new(storage), usage, params.access))
    }

    fn bytes_in_use(&self) -> u64 {
        let device: u64 = self.memory.statistics().iter().map(|u| u.in_use).sum();
        device + self.host.now.load(Ordering::Relaxed)
    }

    fn record_peak(&self) {
        self.host.peak.fetch_max(self.bytes_in_use(), Ordering::Relaxed);
    }

    fn allocate_host(&self, params: &BufferParams, size: u64) -> Result<Buffer> {
        let storage = HostAllocation::new(size, HOST_MEMORY)?;
        self.host.now.fetch_add(size, Ordering::Relaxed);
        let charge = HostCharge {
            bytes: size,
            count: self.host.clone(),
        };
        self.record_peak();
        Ok(Buffer::new(
            Arc::new(storage.with_tag(Box::new(charge))),
            params.usage | BufferUsage::MAPPING,
            params.access,
        ))
    }
}

fn device_storage(buffer: &Buffer) -> Option<&DeviceStorage> {
    let storage = buffer.allocation().as_any().downcast_ref::<HostAllocation>()?;
    storage.tag()?.downcast_ref::<DeviceStorage>()
}

/// The memory kind a device buffer lives in; `None` for host memory or another driver's buffer.
pub fn memory_kind(buffer: &Buffer) -> Option<MemoryKind> {
    device_storage(buffer).map(|storage| storage.range.kind())
}

/// The tensor a buffer in the tile layout holds; `None` for row-major buffers.
pub fn tiled_layout(buffer: &Buffer) -> Option<&TiledLayout> {
    device_storage(buffer)?.layout.as_ref()
}

/// Whether `buffer` is device memory (as opposed to host memory the device reaches).
pub fn is_device_memory(buffer: &Buffer) -> bool {
    !buffer.memory_type().contains(MemoryType::HOST_VISIBLE)
}

impl Allocator for TenstorrentAllocator {
    fn memory_heaps(&self) -> Vec<MemoryHeap> {
        let usage = self.memory.statistics();
        let largest_device = usage.iter().map(|u| u.capacity).max().unwrap_or(0);
        vec![
            MemoryHeap {
                memory_type: DEVICE_MEMORY,
                allowed_usage: BufferUsage::DEFAULT | BufferUsage::DISPATCH,
                max_allocation_size: largest_device,
                min_alignment: HOST_ALIGNMENT as u64,
            },
            MemoryHeap {
                memory_type: HOST_MEMORY,
                allowed_usage: BufferUsage::all(),
                max_allocation_size: isize::MAX as u64,
                min_alignment: HOST_ALIGNMENT as u64,
            },
        ]
    }

    fn allocate_buffer(&self, params: BufferParams, size: u64) -> Result<Buffer> {
        let params = params.canonicalize();
        let _span = tracing::info_span!("allocate", size, memory_type = ?params.memory_type).entered();
        if params.memory_type.contains(MemoryType::HOST_VISIBLE) {
            self.allocate_host(&params, size)
        } else if params
            .memory_type
            .intersects(MemoryType::DEVICE_VISIBLE | MemoryType::OPTIMAL)
            || params.memory_type.is_empty()
        {
            self.allocate_device(&params, size, None)
        } else {
            Err(Error::invalid_argument(format!(
                "the tenstorrent device has no memory of type {:?}",
                params.memory_type
            )))
        }
    }

    fn import_host(&self, params: BufferParams, bytes: Box<dyn HostBytes>) -> Result<Buffer> {
        // The card cannot address the host's pages in place: the bytes are copied into host
        // memory of the device's own, which the queues then move where they are needed.
        let params = BufferParams {
            memory_type: HOST_MEMORY,
            ..params.canonicalize()
        };
        import_by_copy(self, params, bytes)
    }

    fn statistics(&self) -> AllocatorStatistics {
        AllocatorStatistics {
            bytes_allocated: self.bytes_in_use(),
            bytes_peak: self.host.peak.load(Ordering::Relaxed),
        }
    }
}
