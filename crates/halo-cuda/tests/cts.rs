//! The conformance suite on the CUDA driver. Without the CUDA driver library or a GPU every case
//! says it skipped.

use halo_cts::{cts_suite, Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_cuda::register_drivers(&mut registry);
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
        ("indirect_workgroup_count_beyond_limits_direct", INDIRECT),
        ("indirect_workgroup_count_beyond_limits_binding_table", INDIRECT),
    ],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(cuda, CUDA, super::create_device);

/// The same suite with device-local memory from `cuMemAlloc` instead of the stream's pool.
static CUDA_SYNC_ALLOCATIONS: Manifest = Manifest {
    driver: "cuda",
    device_uri: "cuda://?async_allocations=false",
    ..CUDA
};

cts_suite!(cuda_sync_allocations, CUDA_SYNC_ALLOCATIONS, super::create_device);

/// The same suite with every command buffer issued onto the stream (the default runs reusable
/// command buffers of launches as CUDA graphs where the driver has them).
static CUDA_STREAM: Manifest = Manifest {
    driver: "cuda",
    device_uri: "cuda://?command_buffers=stream",
    ..CUDA
};

cts_suite!(cuda_stream_command_buffers, CUDA_STREAM, super::create_device);

/// Stream command buffers with device-local memory from `cuMemAlloc`.
static CUDA_STREAM_SYNC_ALLOCATIONS: Manifest = Manifest {
    driver: "cuda",
    device_uri: "cuda://?command_buffers=stream&async_allocations=false",
    ..CUDA
};

cts_suite!(
    cuda_stream_command_buffers_sync_allocations,
    CUDA_STREAM_SYNC_ALLOCATIONS,
    super::create_device
);

/// The suite on HIP; no AMD GPU has been available to run it yet, so here it says it skipped.
static HIP: Manifest = Manifest {
    driver: "hip",
    device_uri: "hip://",
    executable_format: "rocm-hsaco-fb",
    ..CUDA
};

cts_suite!(hip, HIP, super::create_device);

/// Without the vendor library a driver reports `Unavailable` naming the API and the library it
/// looked for; with it, it lists its devices.
#[test]
fn a_missing_vendor_library_is_reported_by_name() {
    for (vendor, library) in [
        (halo_cuda::Vendor::Cuda, "libcuda.so.1"),
        (halo_cuda::Vendor::Hip, "libamdhip64.so"),
    ] {
        match halo_cuda::GpuDriver::new(vendor) {
            Ok(driver) => {
                let devices = halo_hal::Driver::enumerate_devices(&driver);
                println!("{vendor:?}: present, devices {devices:?}");
            }
            Err(error) => {
                assert!(error.is_unavailable(), "{error}");
                let text = error.to_string();
                assert!(
                    text.contains(vendor.api_name()) && (text.contains(library) || text.contains("no device")),
                    "{text}"
                );
            }
        }
    }
}
