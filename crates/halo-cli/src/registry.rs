//! The drivers linked into the `halo` binary.

use halo_hal::DriverRegistry;

/// Device used when `--device` is not given.
pub const DEFAULT_DEVICE: &str = "local-task";

/// A registry with every driver this build links.
pub fn default_registry() -> DriverRegistry {
    let mut registry = DriverRegistry::new();
    halo_local::register_drivers(&mut registry);
    halo_vulkan::register_driver(&mut registry);
    halo_cuda::register_drivers(&mut registry);
    halo_tenstorrent::register_driver(&mut registry);
    halo_opencl::register_driver(&mut registry);
    registry
}
