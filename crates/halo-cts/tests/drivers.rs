//! The conformance suite on every driver linked here.

use halo_cpu_executable::library::EMBEDDED_ELF_FORMAT;
use halo_cts::{cts_suite, Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_local::register_drivers(&mut registry);
    registry.create_device(uri)
}

static LOCAL_SYNC: Manifest = Manifest {
    driver: "local-sync",
    device_uri: "local-sync://",
    executable_format: EMBEDDED_ELF_FORMAT,
    tags: &[],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(local_sync, LOCAL_SYNC, super::create_device);

static LOCAL_TASK: Manifest = Manifest {
    driver: "local-task",
    device_uri: "local-task://",
    executable_format: EMBEDDED_ELF_FORMAT,
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(local_task, LOCAL_TASK, super::create_device);

/// `local-task` with every multi-tile region handed to the workers, so the suite exercises the
/// parallel path too (the default runs regions this cheap on the submitting thread).
static LOCAL_TASK_PARALLEL: Manifest = Manifest {
    driver: "local-task",
    device_uri: "local-task://?inline_ns=0",
    executable_format: EMBEDDED_ELF_FORMAT,
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(local_task_parallel, LOCAL_TASK_PARALLEL, super::create_device);
