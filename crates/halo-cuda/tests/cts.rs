//! The conformance suite on the CUDA driver. Without the CUDA driver library or a GPU every case
//! says it skipped.

use halo_cts::{cts_suite, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_cuda::register_driver(&mut registry);
    registry.create_device(uri)
}

/// Why indirect dispatches are not supported yet.
const INDIRECT: &str = "stream command buffers cannot read a workgroup count the device writes without a \
                        host round trip; IREE's CUDA stream command buffers refuse it too";

static CUDA: Manifest = Manifest {
    driver: "cuda",
    device_uri: "cuda://",
    executable_format: "cuda-nvptx-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[
        ("indirect_workgroup_count_direct", INDIRECT),
        ("indirect_workgroup_count_binding_table", INDIRECT),
    ],
    expected_failures: &[],
};

cts_suite!(cuda, CUDA, super::create_device);

/// The same suite with device-local memory from `cuMemAlloc` instead of the stream's pool.
static CUDA_SYNC_ALLOCATIONS: Manifest = Manifest {
    driver: "cuda",
    device_uri: "cuda://?async_allocations=false",
    ..CUDA
};

cts_suite!(cuda_sync_allocations, CUDA_SYNC_ALLOCATIONS, super::create_device);
