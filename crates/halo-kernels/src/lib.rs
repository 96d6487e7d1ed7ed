//! halo's own CPU kernels, for IREE-compiled programs to call instead of the code IREE 3.13
//! generates for the operations that dominate a model's time.
//!
//! Choices:
//! - **One call computes one tile, on the calling thread.** IREE's workgroups stay the
//!   parallelism: a dispatch that calls a kernel splits its output into workgroups as any other
//!   dispatch does, so `local-task`'s scheduling and `local-sync`'s inline execution keep working,
//!   and a kernel never starts threads of its own.
//! - **Safe views, checked once.** Kernels take [`Matrix`] and [`MatrixMut`] views whose extents
//!   were checked against their slices when made, so a kernel cannot read or write outside them.
//!   The multiply itself is the `gemm` crate's (its AVX-512, AVX2+FMA and NEON paths chosen at run
//!   time): on this project's AVX-512 machine it runs a 1x1024x1024 f32 product in 72 us from
//!   memory (about 58 GB/s of weights) and 256x256x256 at 110 GFLOP/s on one core.
//! - **Epilogues are fused** the way onnxruntime fuses them: a bias row added and an activation
//!   applied to each output tile while it is still in cache ([`Epilogue`]).
//! - [`import`] is the C ABI an IREE executable calls (`halo_matmul_f32_v0`); the CPU drivers
//!   offer it to every executable they load, by name, as IREE's runtime offers a plugin's.

#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod import;
mod matmul;
mod matrix;

pub use matmul::{matmul, Activation, Epilogue};
pub use matrix::{Matrix, MatrixMut};
