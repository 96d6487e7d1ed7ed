//! The emulated Metal backend's pieces, built on every host: IREE's MSL runs on host threads,
//! compiled by clang, so the Metal driver is tested where no Apple GPU is (as the Vulkan driver
//! is on lavapipe).
//!
//! The parts: reading what each kernel takes ([`kernel_signature`]), the textual changes C++ for
//! OpenCL needs ([`msl_rewrite`]), compiling a library's MSL into host code whose entries run one
//! threadgroup ([`host_compiler`]), and the device that runs them ([`backend`]).

pub mod backend;
pub mod host_compiler;
pub mod kernel_signature;
pub mod msl_rewrite;
