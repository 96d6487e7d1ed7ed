//! The Metal driver, to IREE's Metal HAL design: one driver over a narrow backend interface,
//! with an `apple` backend over `objc2-metal` and an `emulated` one that runs IREE's MSL on host
//! threads (`docs/architecture.md`).
//!
//! How HAL concepts map onto Metal:
//! - executables are IREE's `metal-msl-fb` programs ([`executable_def`]: a `MTL1` FlatBuffer of
//!   MSL libraries and one compute pipeline per export), made into pipelines by the backend;
//! - command buffers are halo-hal's recorded lists, encoded into one backend command buffer per
//!   submission (`command_buffer.rs`): dispatches with the HAL bindings as the argument buffer's
//!   `[[id(n)]]` members and the push constants beside them, fills, updates and copies as blits;
//! - buffers come from the backend's allocator; semaphores are host timelines.
//!
//! Backends ([`backend::Backend`]): `apple` (macOS only), the system's GPU through `objc2-metal`
//! (`metal://0`); and [`emulated`], which compiles the MSL for the host with clang and runs
//! its threadgroups on host threads (`metal://emulated`, on every host).
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

#[cfg(target_os = "macos")]
pub mod apple;
pub mod backend;
mod command_buffer;
pub mod device;
pub mod driver;
pub mod emulated;
pub mod executable;
pub mod executable_def;

use halo_hal::DriverRegistry;
use std::sync::Arc;

/// Registers the `metal` driver with `registry`.
pub fn register_driver(registry: &mut DriverRegistry) {
    registry.register(driver::DRIVER_NAME, Box::new(|| Ok(Arc::new(driver::MetalDriver))));
}
