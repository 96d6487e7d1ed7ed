//! halo's VM: loads, verifies and interprets IREE bytecode modules (`.vmfb`).
//!
//! - [`isa`]: the instruction set as data, with the table-driven decoder.
//! - [`module`]: the `.vmfb` loader (FlatBuffer + appended rodata), zero-copy.
//! - [`compile`]: the verifier, which also lowers each function for the interpreter.
//! - [`context`]: modules linked together, imports resolved, globals, initializers.
//! - [`interp`]: the interpreter over lowered functions; [`interp::Invocation`] for calls that
//!   suspend instead of blocking.
//! - [`native`]: modules written in Rust that bytecode imports.
//! - [`cancel`]: [`CancelToken`], which stops a call from another thread.
//! - [`value`] and [`ref_types`]: what registers hold; `vm.buffer` and `vm.list`.
#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod cancel;
pub mod cconv;
pub mod compile;
pub mod context;
pub mod interp;
pub mod isa;
pub mod module;
pub mod native;
pub mod ref_types;
mod unchecked;
pub mod value;

pub use cancel::CancelToken;
pub use context::{Context, Instance};
pub use module::{BytecodeModule, LoadMode};
pub use native::{Args, NativeModule};
pub use value::{Results, Value};
