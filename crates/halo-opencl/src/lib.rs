//! The `opencl` driver: IREE's Vulkan programs (`vulkan-spirv-fb`) on OpenCL devices. No
//! `iree-compile` target emits OpenCL kernels, and OpenCL cannot load the shader SPIR-V Vulkan
//! programs carry, so each executable's SPIR-V is translated to OpenCL C (`halo-spirv-opencl`)
//! and built by the device's compiler.
//!
//! How HAL concepts map onto OpenCL:
//! - the ICD loader (`libOpenCL.so.1`) is opened at run time (`opencl3`'s dynamic loading, one
//!   typed call per entry point, so no SDK at build time); without it, or without a platform,
//!   there are no devices and creating one reports `Unavailable` ([`driver`]);
//! - a device is an OpenCL device with one context and one in-order command queue ([`device`]);
//! - buffers are host memory with a `CL_MEM_USE_HOST_PTR` buffer object over it, whose bytes
//!   kernels use in place where the device shares the host's memory; device-local buffers of a
//!   device with memory of its own (or `device_local_mappable=false`) are buffer objects of that
//!   memory, which the host reaches through queue copies, and its host-visible buffers are host
//!   memory beside such a buffer object, synced when mapped ([`allocator`], [`buffer`]);
//! - executables are `vulkan-spirv-fb` FlatBuffers (`halo-spirv-fb`) whose SPIR-V is translated
//!   and built into one kernel per export ([`executable`]); built programs are kept while used
//!   and on disk between processes ([`program_cache`]);
//! - command buffers are halo-hal's validated command lists, issued at submit as buffer commands
//!   and kernel launches (`command_buffer`); reusable ones are recorded once through
//!   `cl_khr_command_buffer` where the device has it and enqueued whole (`replay`);
//! - semaphores are halo-hal's host timelines, reached through OpenCL events: a submission is
//!   issued once its waits are met on the host, or on the device when a submission already
//!   queued will signal them, and its marker event's completion signals it (`queue`).
//!
//! The only `unsafe` is in `api` and `khr_command_buffer`.
//!
//! Subgroup operations run at the subgroup size the programs were compiled for (URI parameter
//! `subgroup_size`, see [`driver`]): as OpenCL's subgroup built-ins where the device can make its
//! subgroups that wide (`cl_intel_required_subgroup_size`; Intel's runtimes), else emulated in
//! workgroup memory.
//!
#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod allocator;
mod api;
pub mod buffer;
mod command_buffer;
pub mod device;
pub mod driver;
pub mod executable;
mod khr_command_buffer;
pub mod program_cache;
mod replay;

pub use device::OpenClDevice;
pub use driver::{OpenClDriver, DRIVER_NAME};

use halo_hal::DriverRegistry;
use std::sync::Arc;

/// Registers the `opencl` driver.
pub fn register_driver(registry: &mut DriverRegistry) {
    registry.register(DRIVER_NAME, Box::new(|| Ok(Arc::new(OpenClDriver))));
}
