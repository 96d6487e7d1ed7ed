//! The conformance suite on the Vulkan driver (lavapipe in CI), with the Khronos validation layer
//! on: any message it reports fails the case. Without a Vulkan device every case says it skipped.

use halo_cts::{cts_suite, Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use halo_vulkan::Validation;
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_vulkan::register_driver_with(&mut registry, Validation::Strict);
    registry.create_device(uri)
}

static VULKAN: Manifest = Manifest {
    driver: "vulkan",
    device_uri: "vulkan://",
    executable_format: "vulkan-spirv-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Alone,
};

cts_suite!(vulkan, VULKAN, super::create_device);

/// The same suite where device-local memory is never host-mapped, as on a discrete GPU: every
/// allocation that asks for device-local memory alone then has to be reached through the queue.
static VULKAN_UNMAPPED_DEVICE_MEMORY: Manifest = Manifest {
    driver: "vulkan",
    device_uri: "vulkan://?device_local_mappable=false",
    executable_format: "vulkan-spirv-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Alone,
};

cts_suite!(
    vulkan_unmapped_device_memory,
    VULKAN_UNMAPPED_DEVICE_MEMORY,
    super::create_device
);
