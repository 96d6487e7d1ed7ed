//! halo's embedding API: run what `iree-compile` produced on a halo device.
//!
//! ```no_run
//! use halo_runtime::{Instance, Session, HostTensor};
//! let instance = Instance::new();
//! let mut session = Session::new(&instance, &["local-task"])?;
//! session.load_module_file("model.vmfb".as_ref())?;
//! let function = session.function("main")?;
//! let input = session.tensor_input(&HostTensor::parse("4xf32=1 2 3 4")?)?;
//! let outputs = session.call(&function, &[input])?;
//! println!("{}", halo_runtime::format_output(&**session.device(), &outputs[0], 1024)?);
//! # Ok::<(), halo_runtime::Error>(())
//! ```
//!
//! Who does what:
//! - [`Instance`]: the drivers linked in (Cargo features), creating devices from URIs.
//! - [`Session`]: devices plus a VM context holding the `hal` module and the program's modules;
//!   resolves [`Function`]s and calls them, blocking ([`Session::call`]) or as a future
//!   ([`Session::call_async`]).
//! - [`Function`]: an export with its calling convention, its declaration
//!   (`iree.abi.declaration`) and its ABI model; inputs are checked against them before a call.
//! - [`tensor`]: buffer views in and out of VM values, host tensors, `.npy` files.
//! - [`trace`]: Chrome trace-event timelines of calls, submissions, dispatches and waits.
//! - `array` (feature `ndarray`): `ndarray` arrays in (in place where layout and alignment
//!   allow) and out.
#![warn(missing_docs)]

#[cfg(feature = "ndarray")]
pub mod array;
mod call;
mod function;
mod instance;
pub mod npy;
mod session;
pub mod tensor;
pub mod trace;

pub use call::CallFuture;
pub use function::{AbiModel, Function};
pub use halo_hal::{BufferView, Error, HostTensor, Result, StatusCode};
pub use halo_vm::{CancelToken, LoadMode, Value};
pub use instance::{default_registry, Instance};
pub use session::Session;
pub use tensor::format_output;
