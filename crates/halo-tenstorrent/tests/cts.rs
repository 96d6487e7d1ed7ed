//! The conformance suite on the Tenstorrent mock device: memory the host cannot map, a compute
//! and a transfer queue.

use halo_cpu_executable::library::EMBEDDED_ELF_FORMAT;
use halo_cts::{cts_suite, Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, Result};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_tenstorrent::register_driver(&mut registry);
    registry.create_device(uri)
}

static TENSTORRENT_MOCK: Manifest = Manifest {
    driver: "tenstorrent",
    device_uri: "tenstorrent://mock?dram=256MiB",
    executable_format: EMBEDDED_ELF_FORMAT,
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(tenstorrent_mock, TENSTORRENT_MOCK, super::create_device);

/// The smallest chip: one core, so every dispatch runs on the queue thread, and little memory.
static TENSTORRENT_ONE_CORE: Manifest = Manifest {
    driver: "tenstorrent",
    device_uri: "tenstorrent://mock?grid=1x1&dram=64MiB&threads=1",
    executable_format: EMBEDDED_ELF_FORMAT,
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Shared,
};

cts_suite!(tenstorrent_one_core, TENSTORRENT_ONE_CORE, super::create_device);
