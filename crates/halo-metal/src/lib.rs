//! The Metal driver, to IREE's Metal HAL design: one driver over a narrow backend interface,
//! with an `apple` backend over `objc2-metal` and an `emulated` one that runs IREE's MSL on host
//! threads (`docs/architecture.md`).
//!
//! Written so far: [`executable_def`], the `metal-msl-fb` executable format that
//! `iree-compile --iree-hal-target-device=metal` writes (a `MTL1` FlatBuffer of MSL libraries and
//! one compute pipeline per export), read and checked into owned values; and the start of the
//! [`emulated`] backend, which compiles a library's MSL for the host and runs its threadgroups.
//! The device, its queue and the Apple backend come next; until then no driver is registered.
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

pub mod emulated;
pub mod executable_def;
