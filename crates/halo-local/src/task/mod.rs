//! The `local-task` driver: GPU-like scheduling of CPU work across all cores (the default device).
//!
//! HAL concepts on this driver: the cores are the compute units. Every queue operation is a
//! submission that starts when its wait fence is reached (a semaphore callback, no polling) and
//! signals its fence when done. A command buffer is split at its barriers into regions; all
//! workgroups and transfers of a region are tiles that the executor's workers claim in parallel,
//! and the thread finishing a region's last tile starts the next one. Cheap regions (by the
//! measured cost of their kernels) run directly on the thread that reaches them, because handing
//! work to another thread costs more than they do. Buffers come from halo-hal's heap allocator and
//! semaphores are host timelines, as on `local-sync`.

pub mod contention;
mod device;
pub mod driver;
pub mod executor;
pub mod submission;

pub use device::{TaskDevice, WORKERS_QUERY_CATEGORY};
pub use driver::TaskDriver;
