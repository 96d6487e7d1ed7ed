//! The module's functions, one file per object family; each file exports a table of
//! `(name, calling convention, function)` rows in IREE 3.13's spelling.

mod allocator;
mod buffer;
mod buffer_view;
mod command_buffer;
mod device;
mod executable;
mod fence;

use crate::{Export, WaitHook};
use halo_vm::ref_types::{Ref, RefObject};
use halo_vm::{Results, Value};
use smallvec::smallvec;

/// One function: its name within `hal`, its calling convention, its implementation.
pub(crate) type Row = (&'static str, &'static str, Export);

/// A function that waits: name, calling convention, the fence it waits for, implementation.
pub(crate) type WaitingRow = (&'static str, &'static str, WaitHook, Export);

/// Every table of functions that wait.
pub(crate) const WAITING: &[&[WaitingRow]] = &[fence::WAITING];

/// Every table of functions that may block or run long on the calling thread.
pub(crate) const BLOCKING: &[&[Row]] = &[device::QUEUE];

/// Every other table.
pub(crate) const ALL: &[&[Row]] = &[
    allocator::EXPORTS,
    buffer::EXPORTS,
    buffer_view::EXPORTS,
    command_buffer::EXPORTS,
    device::EXPORTS,
    executable::EXPORTS,
    fence::EXPORTS,
];

/// A result list holding one object.
/// A module state with no devices, for calling exports that take theirs from arguments.
#[cfg(test)]
fn state_without_devices() -> crate::HalModuleState {
    crate::HalModuleState {
        devices: Vec::new(),
        caches: std::sync::Mutex::new(Vec::new()),
    }
}

fn object<T: RefObject>(object: T) -> Results {
    smallvec![Value::Ref(Some(Ref::new(object)))]
}
