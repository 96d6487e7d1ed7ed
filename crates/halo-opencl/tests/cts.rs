//! The conformance suite on the first OpenCL device (PoCL in CI), as it comes and with device-local
//! memory the host cannot map (`device_local_mappable=false`, what a discrete GPU has). Without an
//! OpenCL device every case says it skipped.

use halo_cts::{cts_suite, Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_opencl::register_driver(&mut registry);
    registry.create_device(uri)
}

static OPENCL: Manifest = Manifest {
    driver: "opencl",
    device_uri: "opencl://",
    executable_format: "vulkan-spirv-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(opencl, OPENCL, super::create_device);

static OPENCL_UNMAPPED: Manifest = Manifest {
    driver: "opencl",
    device_uri: "opencl://?device_local_mappable=false",
    executable_format: "vulkan-spirv-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(opencl_unmapped, OPENCL_UNMAPPED, super::create_device);
