//! The conformance suite on every driver linked here.

use halo_cts::{cts_suite, Manifest};
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
    executable_format: "embedded-elf-x86_64",
    tags: &[],
    unsupported: &[],
    expected_failures: &[],
};

cts_suite!(local_sync, LOCAL_SYNC, super::create_device);
