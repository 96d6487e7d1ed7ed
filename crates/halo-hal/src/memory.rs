//! Memory types, buffer usage and memory access bits, with IREE's bit values.

use bitflags::bitflags;

bitflags! {
    /// Where memory lives and how the host may see it (`iree_hal_memory_type_t`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MemoryType: u32 {
        /// Let the allocator pick the best memory for the usage; a hint only.
        const OPTIMAL = 1 << 0;
        /// The host can map this memory.
        const HOST_VISIBLE = 1 << 1;
        /// Host writes and device writes are visible without flush or invalidate.
        const HOST_COHERENT = 1 << 2;
        /// The host caches this memory; reads are fast, non-coherent writes need flushing.
        const HOST_CACHED = 1 << 3;
        /// The device can access this memory.
        const DEVICE_VISIBLE = 1 << 4;
        /// Memory local to the device (fastest for it).
        const DEVICE_LOCAL = Self::DEVICE_VISIBLE.bits() | (1 << 5);
        /// Memory local to the host.
        const HOST_LOCAL = Self::HOST_VISIBLE.bits() | Self::HOST_COHERENT.bits() | (1 << 6);
        /// The best host memory.
        const OPTIMAL_FOR_HOST = Self::OPTIMAL.bits() | Self::HOST_LOCAL.bits();
        /// The best device memory.
        const OPTIMAL_FOR_DEVICE = Self::OPTIMAL.bits() | Self::DEVICE_LOCAL.bits();
    }
}

bitflags! {
    /// What a buffer may be used for (`iree_hal_buffer_usage_t`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct BufferUsage: u32 {
        /// Source of transfers (copy).
        const TRANSFER_SOURCE = 1 << 0;
        /// Target of transfers (fill, update, copy).
        const TRANSFER_TARGET = 1 << 1;
        /// Both transfer directions.
        const TRANSFER = Self::TRANSFER_SOURCE.bits() | Self::TRANSFER_TARGET.bits();
        /// Holds indirect dispatch parameters (workgroup counts).
        const DISPATCH_INDIRECT_PARAMETERS = 1 << 8;
        /// Read as uniform data by dispatches.
        const DISPATCH_UNIFORM_READ = 1 << 9;
        /// Read as storage by dispatches.
        const DISPATCH_STORAGE_READ = 1 << 10;
        /// Written as storage by dispatches.
        const DISPATCH_STORAGE_WRITE = 1 << 11;
        /// Read and written as storage by dispatches.
        const DISPATCH_STORAGE = Self::DISPATCH_STORAGE_READ.bits() | Self::DISPATCH_STORAGE_WRITE.bits();
        /// Read as an image.
        const DISPATCH_IMAGE_READ = 1 << 12;
        /// Written as an image.
        const DISPATCH_IMAGE_WRITE = 1 << 13;
        /// Every dispatch use.
        const DISPATCH = Self::DISPATCH_INDIRECT_PARAMETERS.bits() | Self::DISPATCH_UNIFORM_READ.bits()
            | Self::DISPATCH_STORAGE.bits() | (1 << 12) | (1 << 13);
        /// May be exported to other APIs.
        const SHARING_EXPORT = 1 << 16;
        /// May be replicated across devices.
        const SHARING_REPLICATE = 1 << 17;
        /// May be used by several queues at once.
        const SHARING_CONCURRENT = 1 << 18;
        /// Contents never change after creation.
        const SHARING_IMMUTABLE = 1 << 19;
        /// May be mapped for a scope.
        const MAPPING_SCOPED = 1 << 24;
        /// May stay mapped for its lifetime.
        const MAPPING_PERSISTENT = 1 << 25;
        /// Map only when cheap.
        const MAPPING_OPTIONAL = 1 << 26;
        /// Mapped memory is accessed randomly.
        const MAPPING_ACCESS_RANDOM = 1 << 27;
        /// Mapped memory is written sequentially.
        const MAPPING_ACCESS_SEQUENTIAL_WRITE = 1 << 28;
        /// Scoped random-access mapping.
        const MAPPING = Self::MAPPING_SCOPED.bits() | Self::MAPPING_ACCESS_RANDOM.bits();
        /// Transfers and storage dispatch: what most buffers need.
        const DEFAULT = Self::TRANSFER.bits() | Self::DISPATCH_STORAGE.bits();
    }
}

bitflags! {
    /// How a buffer's contents may be accessed (`iree_hal_memory_access_t`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MemoryAccess: u16 {
        /// Contents may be read.
        const READ = 1 << 0;
        /// Contents may be written.
        const WRITE = 1 << 1;
        /// Previous contents may be discarded on map.
        const DISCARD = 1 << 2;
        /// Write and discard.
        const DISCARD_WRITE = Self::WRITE.bits() | Self::DISCARD.bits();
        /// Mappings may alias each other.
        const MAY_ALIAS = 1 << 3;
        /// Unaligned access is allowed.
        const UNALIGNED = 1 << 4;
        /// Any access; validation is skipped.
        const ANY = 1 << 5;
        /// Read, write and discard.
        const ALL = Self::READ.bits() | Self::WRITE.bits() | Self::DISCARD.bits();
    }
}

/// Which queues an operation may run on; a bit per queue (`iree_hal_queue_affinity_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueAffinity(pub u64);

impl QueueAffinity {
    /// Any queue the device chooses.
    pub const ANY: QueueAffinity = QueueAffinity(u64::MAX);
}

impl Default for QueueAffinity {
    fn default() -> Self {
        Self::ANY
    }
}

/// What a new buffer must provide (`iree_hal_buffer_params_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferParams {
    /// Required memory type bits.
    pub memory_type: MemoryType,
    /// Required usage bits.
    pub usage: BufferUsage,
    /// Allowed access; empty means all.
    pub access: MemoryAccess,
    /// Queues that will use the buffer.
    pub queue_affinity: QueueAffinity,
    /// Minimum alignment of the allocation in bytes; 0 means the allocator's default.
    pub min_alignment: u64,
}

impl Default for BufferParams {
    fn default() -> Self {
        BufferParams {
            memory_type: MemoryType::DEVICE_LOCAL,
            usage: BufferUsage::DEFAULT,
            access: MemoryAccess::ALL,
            queue_affinity: QueueAffinity::ANY,
            min_alignment: 0,
        }
    }
}

impl BufferParams {
    /// Host-visible memory the host can map and the device can use.
    pub fn host_mappable() -> Self {
        BufferParams {
            memory_type: MemoryType::HOST_LOCAL | MemoryType::DEVICE_VISIBLE,
            usage: BufferUsage::DEFAULT | BufferUsage::MAPPING,
            ..Default::default()
        }
    }

    /// Memory the device uses fastest, mapped by the host only where the device allows it: what
    /// program inputs need (filled through [`crate::transfer`]).
    pub fn device_local() -> Self {
        BufferParams {
            memory_type: MemoryType::DEVICE_LOCAL,
            usage: BufferUsage::DEFAULT | BufferUsage::MAPPING_SCOPED | BufferUsage::MAPPING_OPTIONAL,
            ..Default::default()
        }
    }

    /// Fills defaults the way IREE canonicalizes params (empty access means all).
    pub fn canonicalize(mut self) -> Self {
        if self.access.is_empty() {
            self.access = MemoryAccess::ALL;
        }
        self
    }
}
