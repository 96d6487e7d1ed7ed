//! The instance: the drivers this build links, by Cargo feature.

use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

/// Every driver enabled in this build, the one list of them: `local-sync` and `local-task`
/// (feature `local`), `vulkan` (feature `vulkan`, validation from `HALO_VULKAN_VALIDATION`),
/// `cuda` and `hip` (feature `cuda`), `tenstorrent` (feature `tenstorrent`, mock mode) and
/// `opencl` (feature `opencl`); all are default features. The `halo` command line and the
/// server use this registry too.
pub fn default_registry() -> DriverRegistry {
    #[allow(unused_mut, reason = "unused when every driver feature is off")]
    let mut registry = DriverRegistry::new();
    #[cfg(feature = "local")]
    halo_local::register_drivers(&mut registry);
    #[cfg(feature = "vulkan")]
    halo_vulkan::register_driver(&mut registry);
    #[cfg(feature = "cuda")]
    halo_cuda::register_drivers(&mut registry);
    #[cfg(feature = "tenstorrent")]
    halo_tenstorrent::register_driver(&mut registry);
    #[cfg(feature = "opencl")]
    halo_opencl::register_driver(&mut registry);
    #[cfg(feature = "metal")]
    halo_metal::register_driver(&mut registry);
    registry
}

/// The drivers available to sessions (`iree_runtime_instance_t`).
///
/// Threading: shareable; devices it creates are independent of it.
pub struct Instance {
    registry: DriverRegistry,
}

impl Default for Instance {
    fn default() -> Self {
        Self::new()
    }
}

impl Instance {
    /// An instance with every driver enabled in this build ([`default_registry`]).
    pub fn new() -> Self {
        Instance {
            registry: default_registry(),
        }
    }

    /// An instance over a caller-built registry (for out-of-tree drivers).
    pub fn with_registry(registry: DriverRegistry) -> Self {
        Instance { registry }
    }

    /// The registered drivers.
    pub fn registry(&self) -> &DriverRegistry {
        &self.registry
    }

    /// Creates the device a URI names (`local-task`, `local-sync://0`, ...).
    ///
    /// # Errors
    /// `NotFound` for an unknown driver or device (listing the known ones); `Unavailable` when
    /// the driver's library or hardware is missing.
    pub fn create_device(&self, uri: &str) -> Result<Arc<dyn Device>> {
        self.registry.create_device(uri)
    }
}
