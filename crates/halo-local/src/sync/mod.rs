//! The `local-sync` driver: queue work runs inline on the submitting thread once its waits are met.
//!
//! HAL concepts on this driver: the allocator is halo-hal's heap allocator; semaphores are host
//! timeline semaphores; command buffers are halo-hal's recorded lists, walked inline at submit;
//! executables are executable libraries loaded by [`halo_cpu_executable::executable`]. A queue operation blocks
//! the caller on its wait fence, so work waiting on a semaphore that only the same thread would
//! signal later cannot make progress (use `local-task` for wait-before-signal).

mod device;
pub mod driver;

pub use device::SyncDevice;
pub use driver::SyncDriver;
