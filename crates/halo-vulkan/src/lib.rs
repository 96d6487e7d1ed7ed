//! The Vulkan driver, `vulkan`, through `ash` with the Vulkan loader found at run time.
//!
//! How HAL concepts map onto Vulkan:
//! - a device is a `VkDevice` with one compute queue ([`device`]); where no loader or no
//!   Vulkan 1.2 device exists, the driver reports `Unavailable`;
//! - buffers are `VkBuffer`s over memory sub-allocated by `gpu-allocator`, host-mapped where the
//!   memory type allows ([`allocator`], [`buffer`]);
//! - semaphores are Vulkan timeline semaphores; failures are kept beside them ([`semaphore`]);
//! - command buffers are halo-hal's validated command lists, recorded into a `VkCommandBuffer`
//!   at submit with the binding table resolved ([`command_buffer`]);
//! - executables are `vulkan-spirv-fb` FlatBuffers made into compute pipelines ([`executable`]),
//!   with each executable's compiled pipelines kept on disk between processes
//!   ([`pipeline_cache`]);
//! - a submission keeps everything it uses alive until the device's progress timeline passes it;
//!   one waiter thread per device runs that release and any host-side signals ([`completion`]).
//!
//! Validation: [`Validation`] turns on the Khronos layer; in strict mode (the tests) any message
//! it prints fails the device's next queue operation or wait.
#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod allocator;
pub mod buffer;
pub mod command_buffer;
pub mod completion;
pub mod device;
pub mod driver;
pub mod executable;
mod features;
pub mod indirect_guard;
mod instance;
pub mod pipeline_cache;
pub mod semaphore;
mod status;
mod submit;

pub use driver::{DeviceOptions, VulkanDriver, DRIVER_NAME};
pub use instance::Validation;

use halo_hal::DriverRegistry;
use std::sync::Arc;

/// Registers the `vulkan` driver, with validation from `HALO_VULKAN_VALIDATION`.
pub fn register_driver(registry: &mut DriverRegistry) {
    registry.register(
        DRIVER_NAME,
        Box::new(|| Ok(Arc::new(VulkanDriver::new(Validation::from_env()?)?))),
    );
}

/// Registers the `vulkan` driver with the given validation.
pub fn register_driver_with(registry: &mut DriverRegistry, validation: Validation) {
    registry.register(
        DRIVER_NAME,
        Box::new(move || Ok(Arc::new(VulkanDriver::new(validation)?))),
    );
}
