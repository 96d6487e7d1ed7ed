//! halo's own CPU kernels, for IREE-compiled programs to call instead of the code IREE 3.13
//! generates for the operations that dominate a model's time: matmuls ([`matmul()`]),
//! convolutions of any group count, stride and dilation ([`conv2d_tile`]), depthwise
//! convolutions ([`depthwise_tile`]), attention's softmax ([`softmax_rows`]) and global pools'
//! sums ([`row_sums`]).
//!
//! Choices:
//! - **One call computes one tile, on the calling thread.** IREE's workgroups stay the
//!   parallelism: a dispatch that calls a kernel splits its output into workgroups as any other
//!   dispatch does, so `local-task`'s scheduling and `local-sync`'s inline execution keep working,
//!   and a kernel never starts threads of its own.
//! - **Safe views, checked once.** Kernels take [`Matrix`] and [`MatrixMut`] views whose extents
//!   were checked against their slices when made, so a kernel cannot read or write outside them.
//!   The multiply is halo's own AVX-512 kernel where the CPU has AVX-512F and the product has 2
//!   rows or more, and the `gemm` crate's otherwise (its AVX2+FMA and NEON paths chosen at run
//!   time; on stable Rust it has no AVX-512 code). On this project's AVX-512 machine the first
//!   runs ResNet-50's and ViT-S's product shapes at 110-135 GFLOP/s on one core from cache,
//!   `gemm` at 80-100 ([`KernelPath`], `examples/matmul_rate`).
//! - **Epilogues are fused** the way onnxruntime fuses them: a bias (per column, per row, or per
//!   filter), a residual sum (matmuls) and an activation (ReLU, ReLU6, SiLU, hard-swish, GELU)
//!   applied to each output tile while it is still in registers on the AVX-512 path, in cache on
//!   the others ([`Epilogue`], [`ConvEpilogue`]).
//! - [`import`] is the C ABI an IREE executable calls (`halo_matmul_f32_v0`, `_v1` with a bias
//!   per row and ReLU6, `_v2` with a residual added, `_v3` with SiLU and hard-swish, `_v4` with
//!   GELU, `_v5` with `a`'s columns scaled; `halo_conv2d_f32_v0` for unit strides, `_v1` for
//!   any, `_v2` with ReLU6, `_v3` for any group count, `_v4` with SiLU and hard-swish;
//!   `halo_depthwise_conv2d_f32_v0`, `_v1` adding the zero padding, `_v2` with SiLU and
//!   hard-swish; `halo_softmax_f32_v0`; `halo_row_sums_f32_v0`); the CPU drivers offer it to
//!   every executable they load, by name, as IREE's runtime offers a plugin's.

#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

mod activation;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod conv;
mod depthwise;
pub mod import;
mod matmul;
mod matrix;
mod row_sums;
mod softmax;
#[cfg(test)]
mod test_values;

pub use activation::Activation;
pub use conv::{conv2d_tile, conv2d_tile_on, ConvEpilogue, ConvShape};
pub use depthwise::{depthwise_tile, depthwise_tile_on, DepthwisePath, DepthwiseShape, Padding};
pub use matmul::{matmul, matmul_on, Bias, Epilogue, KernelPath};
pub use matrix::{Matrix, MatrixMut};
pub use row_sums::row_sums;
pub use softmax::{softmax_rows, softmax_rows_on};
