//! halo's VM: loads, verifies and interprets IREE bytecode modules (`.vmfb`).
//!
//! - [`isa`]: the instruction set as data, with the table-driven decoder.
//! - `module`: the `.vmfb` loader (FlatBuffer + appended rodata).
//! - [`compile`]: the verifier, which also lowers each function for the interpreter.
//! - [`value`] and [`ref_types`]: what registers hold; `vm.buffer` and `vm.list`.
#![warn(missing_docs)]

pub mod cconv;
pub mod compile;
pub mod isa;
pub mod ref_types;
pub mod value;
