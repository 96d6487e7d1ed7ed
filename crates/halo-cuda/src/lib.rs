//! The CUDA driver, `cuda`, on the CUDA driver API found at run time (`libcuda.so.1`); no CUDA
//! SDK is needed to build it, and where the library or a GPU is missing it reports `Unavailable`.
//!
//! How HAL concepts map onto CUDA (IREE's CUDA/HIP driver design, first slice):
//! - the driver library's entry points are one typed table ([`api`]), the only place that calls
//!   into it;
//! - a device is a GPU's primary context with one non-blocking stream ([`device`]);
//! - buffers are `cuMemAlloc` (device-local), `cuMemAllocManaged` (device-local and
//!   host-visible) or `cuMemAllocHost` (pinned host) allocations, addressed by unified pointers
//!   ([`allocator`], [`buffer`]);
//! - executables are `cuda-nvptx-fb` FlatBuffers of PTX, JIT-compiled by the driver
//!   ([`executable`]);
//! - command buffers are halo-hal's validated command lists, translated at submit into stream
//!   operations (memsets, copies, kernel launches) and issued in order ([`command_buffer`]);
//! - semaphores are halo-hal's host timelines: a submission is issued by whichever thread meets
//!   its last wait, and signalled by the device's completion thread once an event recorded after
//!   it has passed.
//!
//! - device-local buffers come from the stream's memory pool (`cuMemAllocAsync`/`cuMemFreeAsync`,
//!   device parameter `async_allocations`), so queue allocations never wait for the device;
//! - a submission whose waits are promised by work already on the stream goes onto it at once:
//!   the in-order stream is the device-side wait.
//!
//! Not yet: graph-backed command buffers, events for waits across devices or streams, indirect
//! dispatches.
#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod allocator;
pub mod api;
pub mod buffer;
pub mod command_buffer;
pub mod device;
pub mod driver;
pub mod executable;

pub use driver::{CudaDriver, DeviceOptions, DRIVER_NAME};

use halo_hal::DriverRegistry;
use std::sync::Arc;

/// Registers the `cuda` driver.
pub fn register_driver(registry: &mut DriverRegistry) {
    registry.register(DRIVER_NAME, Box::new(|| Ok(Arc::new(CudaDriver::new()?))));
}
