//! halo's Tenstorrent driver in mock mode (issue 19): a simulated chip whose memory the host
//! cannot map, so every byte travels through queue transfers.
//!
//! How HAL concepts map onto the chip:
//! - [`memory`]: the memory kinds (L1 sharded, L1 interleaved, DRAM), one range allocator each,
//!   the placement rules, and exhaustion that names what is free; [`allocator`] puts device
//!   buffers there (not host-mappable) and staging buffers in host memory;
//! - [`queue`]: a compute and a transfer queue, each in order on its own thread, ordered against
//!   each other by device-side events;
//! - [`command_buffer`]: command buffers run with each dispatch's workgroups shared over the
//!   simulated core grid by host threads, on IREE's CPU executables (`halo-cpu-executable`);
//! - [`tile_layout`]: Tensix cores compute on 32×32 tiles stored as four 16×16 faces; buffers
//!   created with [`allocator::TenstorrentAllocator::allocate_tiled`] are stored that way and
//!   converted by [`tiled_transfer`] on the transfer queue (the mock cores' kernels are
//!   row-major, so dispatches refuse tiled buffers);
//! - [`driver`]: `tenstorrent://mock` and its URI parameters; `tenstorrent://hardware` is the
//!   seam for TT-Metal, not built here.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod allocator;
pub mod command_buffer;
pub mod device;
pub mod driver;
pub mod memory;
pub mod queue;
pub mod tile_layout;
pub mod tiled_transfer;

pub use device::{TenstorrentDevice, TenstorrentStatistics};
pub use driver::TenstorrentDriver;

use halo_hal::DriverRegistry;
use std::sync::Arc;

/// Registers the `tenstorrent` driver with `registry`.
pub fn register_driver(registry: &mut DriverRegistry) {
    registry.register(driver::DRIVER_NAME, Box::new(|| Ok(Arc::new(TenstorrentDriver))));
}
