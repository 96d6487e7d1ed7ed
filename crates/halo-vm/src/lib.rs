//! halo's VM: loads, verifies and interprets IREE bytecode modules (`.vmfb`).
#![warn(missing_docs)]
pub mod isa;
