//! halo's Tenstorrent driver, built mock mode first (issue 19): a simulated chip whose memory the
//! host cannot map, so every byte travels through queue transfers.
//!
//! What exists so far:
//! - [`memory`]: the memory kinds (L1 sharded, L1 interleaved, DRAM), one range allocator each,
//!   the placement rules, and exhaustion that names what is free;
//! - [`tile_layout`]: Tensix cores compute on 32×32 tiles stored as four 16×16 faces; buffers
//!   created with the tiled layout are converted by the transfer queue (tilize on upload,
//!   untilize on download).
//!
//! Still to come (see the issue): the device and its buffers on [`memory`], the compute and
//! transfer queues, and the mock cores running
//! `halo-cpu-executable`'s CPU executables over the simulated core grid.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod memory;
pub mod tile_layout;
