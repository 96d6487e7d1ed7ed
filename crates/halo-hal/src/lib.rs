//! halo's hardware abstraction layer: the object model every driver implements.
//!
//! Who does what:
//! - [`Driver`] enumerates and creates [`Device`]s; a [`DriverRegistry`] maps URIs to drivers.
//! - A device owns an [`Allocator`] that makes [`Buffer`]s over driver [`Allocation`]s.
//! - [`CommandBuffer`] recording and validation live here, once; drivers only execute the
//!   validated [`Command`] list (CPU drivers walk it, GPU drivers translate it).
//! - Queue operations take a wait [`Fence`] and a signal fence of [`Semaphore`] timepoints;
//!   [`TimelineSemaphore`] is the host implementation every CPU driver uses.
//! - Executables come from an [`ExecutableCache`], which knows the formats it can prepare.
//! - Errors are one [`Error`] type with IREE's status codes and a context chain.
#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod allocator;
pub mod buffer;
pub mod buffer_view;
pub mod buffer_view_text;
pub mod caller;
pub mod command_buffer;
pub mod device;
pub mod device_params;
pub mod disk_cache;
pub mod driver;
pub mod element_text;
pub mod element_type;
pub mod error;
pub mod executable;
pub mod fence;
pub mod file;
pub mod guarded_memory;
pub mod held;
pub mod host_memory;
pub mod memory;
pub mod mlir_text;
pub mod promised_timepoints;
pub mod semaphore;
mod small_blocks;
pub mod submission_count;
pub mod submission_queue;
pub mod trace;
pub mod transfer;
pub mod transient_pool;

pub use allocator::{Allocator, AllocatorStatistics, HeapAllocator, MemoryHeap};
pub use buffer::{host_transfer, Allocation, Buffer, Mapping, Overlap, WHOLE_BUFFER};
pub use buffer_view::BufferView;
pub use buffer_view_text::HostTensor;
pub use command_buffer::{
    check_direct_copy, check_direct_fill, Binding, BufferRef, BufferSource, Command, CommandBuffer, CommandBufferMode,
    CommandCategory, DispatchCommand, ResolvedRef, WorkgroupCount,
};
pub use device::{downcast, Device, DeviceInfo};
pub use device_params::ParamReader;
pub use driver::{DeviceParams, DeviceUri, Driver, DriverFactory, DriverRegistry};
pub use element_type::{ElementType, NumericalType};
pub use error::{Error, Result, ResultExt, StatusCode};
pub use executable::{Executable, ExecutableCache, ExecutableParams, ExportInfo};
pub use fence::Fence;
pub use host_memory::HostBytes;
pub use memory::{BufferParams, BufferUsage, MemoryAccess, MemoryType, QueueAffinity};
pub use semaphore::{
    wait_semaphores, DueTimepoints, PendingTimepoints, Semaphore, TimelineSemaphore, Timeout, Timepoint, WaitMode,
};
