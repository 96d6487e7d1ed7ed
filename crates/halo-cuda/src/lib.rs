//! The GPU drivers `cuda` and `hip`: one driver core over two vendor APIs found at run time
//! (CUDA's driver API in `libcuda.so.1`, HIP in `libamdhip64.so`), as IREE's HIP driver design
//! describes. No SDK is needed to build it; where the library or a GPU is missing the driver
//! reports `Unavailable`. HIP has been built and its executables' metadata read, but it has not
//! yet run on AMD hardware.
//!
//! How HAL concepts map onto the vendor APIs (the CUDA names; HIP's are the same with `hip`):
//! - the library's entry points are one typed table for both vendors ([`api`]), the only place
//!   that calls into it;
//! - a device is a GPU's primary context with one non-blocking stream ([`device`]);
//! - buffers are `cuMemAlloc` (device-local), `cuMemAllocManaged` (device-local and
//!   host-visible) or `cuMemAllocHost` (pinned host) allocations, addressed by unified pointers
//!   ([`allocator`], [`buffer`]); freed blocks of memory without a stream-ordered pool are kept
//!   for reuse, since those vendor calls synchronize with the device (`recycler`);
//! - executables are `cuda-nvptx-fb` FlatBuffers of PTX, JIT-compiled by the driver, or
//!   `rocm-hsaco-fb` FlatBuffers of AMD code objects ([`executable`]);
//! - command buffers are halo-hal's validated command lists, translated at submit into stream
//!   operations (memsets, copies, kernel launches) and issued in order ([`command_buffer`]); on
//!   CUDA, by default (`command_buffers=graph`; `stream` turns it off), a reusable one of kernel
//!   launches becomes a CUDA graph that is instantiated once and relaunched ([`graph`]);
//! - semaphores are halo-hal's host timelines: a submission is issued by whichever thread meets
//!   its last wait, and signalled by the device's completion thread once an event recorded after
//!   it has passed.
//!
//! - device-local buffers come from the stream's memory pool (`cuMemAllocAsync`/`cuMemFreeAsync`,
//!   device parameter `async_allocations`), so queue allocations never wait for the device;
//! - a submission whose waits are promised by work already on the stream goes onto it at once:
//!   the in-order stream is the device-side wait.
//!
//! Not yet: events for waits across devices or streams, indirect dispatches, graphs on HIP.
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
pub mod graph;
mod recycler;

pub use api::Vendor;
pub use driver::{CommandBufferKind, DeviceOptions, GpuDriver, DRIVER_NAME, HIP_DRIVER_NAME};

use halo_hal::DriverRegistry;
use std::sync::Arc;

/// Registers the `cuda` and `hip` drivers.
pub fn register_drivers(registry: &mut DriverRegistry) {
    for vendor in [Vendor::Cuda, Vendor::Hip] {
        registry.register(
            driver::driver_name(vendor),
            Box::new(move || Ok(Arc::new(GpuDriver::new(vendor)?))),
        );
    }
}
