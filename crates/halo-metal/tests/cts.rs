//! The conformance suite on the emulated Metal device and on the system's Metal GPU, running
//! IREE's Metal builds of the fixture kernels. Without clang the emulated cases, and off a Mac
//! the GPU's, say that they skipped.

use halo_cts::{cts_suite, Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_metal::register_driver(&mut registry);
    registry.create_device(uri)
}

static METAL_EMULATED: Manifest = Manifest {
    driver: "metal",
    device_uri: "metal://emulated",
    executable_format: "metal-msl-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(metal_emulated, METAL_EMULATED, super::create_device);

static METAL_GPU: Manifest = Manifest {
    driver: "metal",
    device_uri: "metal://",
    executable_format: "metal-msl-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(metal_gpu, METAL_GPU, super::create_device);
