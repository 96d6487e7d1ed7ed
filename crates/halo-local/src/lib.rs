//! The CPU drivers, `local-sync` and `local-task`.
//!
//! How HAL concepts map onto the CPU:
//! - executables are IREE executable libraries, loaded by the shared `halo-cpu-executable`
//!   crate (`embedded-elf-*` of the host's architecture by halo's own ELF loader,
//!   `system-elf-*` on Linux and `system-dylib-*` on macOS through the system loader);
//! - a dispatch calls the library's function once per workgroup (`halo_cpu_executable::dispatch`),
//!   the workgroups spread over threads by [`region`];
//! - buffers are host memory from halo-hal's heap allocator, queue allocations reused through
//!   halo-hal's transient pool; semaphores are host timelines;
//! - command buffers are halo-hal's validated command lists, executed by [`command_buffer`];
//! - executables may import halo's own kernels by name ([`kernel_imports`]).
#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod command_buffer;
pub mod region;
pub mod sync;
pub mod task;
pub mod tile;

use halo_cpu_executable::executable::LocalExecutableCache;
use halo_cpu_executable::library::HostImport;
use halo_hal::device::query_common_i64;
use halo_hal::transient_pool::TransientPool;
use halo_hal::{Device, DriverRegistry, Result};
use halo_kernels::import::MemoryCheck;
use std::sync::Arc;

/// Registers the CPU drivers (`local-sync`, `local-task`) with `registry`.
pub fn register_drivers(registry: &mut DriverRegistry) {
    registry.register(sync::driver::DRIVER_NAME, Box::new(|| Ok(Arc::new(sync::SyncDriver))));
    registry.register(task::driver::DRIVER_NAME, Box::new(|| Ok(Arc::new(task::TaskDriver))));
}

/// The host functions both CPU drivers offer every executable they load: halo's own kernels
/// (`halo_kernels::import`), which programs that `halo compile` gave them call by name.
/// Each checks the memory a kernel hands it against the calling dispatch's bindings.
pub fn kernel_imports() -> Arc<[HostImport]> {
    static CHECK: MemoryCheck = MemoryCheck {
        within: halo_cpu_executable::dispatch_memory::within_running_dispatch,
    };
    (halo_kernels::import::ENTRY_POINTS.iter())
        .map(|&(name, entry)| {
            // SAFETY: the context is a static, and `within_running_dispatch` vouches only for
            // bytes inside the bindings of the dispatch running on the calling thread, which the
            // dispatch keeps alive and bounds-checked while its workgroups run (writes only where
            // the binding allows them); it reads thread-local state, so concurrent calls are fine.
            unsafe { HostImport::new(name, entry).with_context((&raw const CHECK).cast_mut().cast()) }
        })
        .collect()
}

/// The device queries both CPU devices answer: their transient pool's, then the common ones.
fn query_i64(
    device: &dyn Device,
    executables: &LocalExecutableCache,
    transient: &TransientPool,
    category: &str,
    key: &str,
) -> Result<i64> {
    match category {
        TransientPool::QUERY_CATEGORY => transient.query_i64(key),
        _ => query_common_i64(device, executables, category, key),
    }
}
