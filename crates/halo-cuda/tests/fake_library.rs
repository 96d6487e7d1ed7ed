//! The GPU driver core over `halo-cuda-fake`, a stand-in for CUDA's driver library built with
//! the tests: the conformance suite's allocation, transfer, command buffer, queue and semaphore
//! cases run here without a GPU, in both command-buffer modes' stream path. The fake runs no
//! kernels, so the cases that need a kernel's results are listed as unsupported.

mod common;

use halo_cts::{cts_suite, Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    registry.register("cuda", Box::new(|| Ok(Arc::new(common::fake_driver()?))));
    registry.create_device(uri)
}

const NO_KERNELS: &str = "the fake CUDA library runs no kernels";

static FAKE: Manifest = Manifest {
    driver: "cuda",
    device_uri: "cuda://",
    executable_format: "cuda-nvptx-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[
        ("dispatch_writes_output_direct", NO_KERNELS),
        ("dispatch_writes_output_binding_table", NO_KERNELS),
        ("dispatch_with_constants_direct", NO_KERNELS),
        ("dispatch_with_constants_binding_table", NO_KERNELS),
        ("dispatch_3d_grid_direct", NO_KERNELS),
        ("dispatch_3d_grid_binding_table", NO_KERNELS),
        ("chained_dispatches_with_barrier_direct", NO_KERNELS),
        ("chained_dispatches_with_barrier_binding_table", NO_KERNELS),
        ("indirect_workgroup_count_direct", NO_KERNELS),
        ("indirect_workgroup_count_binding_table", NO_KERNELS),
        ("indirect_workgroup_count_beyond_limits_direct", NO_KERNELS),
        ("indirect_workgroup_count_beyond_limits_binding_table", NO_KERNELS),
    ],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(fake, FAKE, super::create_device);

static FAKE_SYNC_ALLOCATIONS: Manifest = Manifest {
    device_uri: "cuda://?async_allocations=false",
    ..FAKE
};

cts_suite!(fake_sync_allocations, FAKE_SYNC_ALLOCATIONS, super::create_device);

/// The fake has no graph entry points, as a CUDA driver older than 12 lacks them: graph
/// command buffers asked for are refused when the device is created, naming why, and the
/// default falls back to the stream.
#[test]
fn graph_command_buffers_without_graph_entry_points_are_refused() {
    if let Err(error) = create_device("cuda://") {
        panic!("the default device over a library without graphs: {error}");
    }
    let error = match create_device("cuda://?command_buffers=graph") {
        Ok(_) => panic!("a device with graph command buffers over a library without graphs"),
        Err(error) => error,
    };
    assert_eq!(error.code(), halo_hal::StatusCode::Unimplemented, "{error}");
    assert!(error.to_string().contains("graph command buffers"), "{error}");
}
