//! IREE's CPU executables, shared by every halo driver that runs workgroups on host threads
//! (`local-sync` and `local-task` today); drivers depend on this crate, never on each other.
//!
//! Who does what:
//! - [`library`]: the executable library ABI (`iree_hal_executable_library_v0`): the header,
//!   export tables, the environment and import calls an executable gets;
//! - `arch`: what differs between CPU architectures (x86-64, AArch64), one module each: ELF
//!   machine and relocations, format names, CPU data, floating-point controls;
//! - `elf`: halo's own loader for `embedded-elf-*` (mapping, relocation, protection);
//!   `system_library`: `system-elf-*` and `system-dylib-*` through the system's dynamic loader,
//!   after `macho` checks a Mach-O library's headers;
//! - [`executable`]: a loaded library as a HAL executable, and the cache that prepares them;
//! - [`dispatch`]: one dispatch's prepared state and the call of one workgroup;
//! - [`float_mode`]: the denormal mode compiled kernels expect, set around their calls;
//! - [`native_faults`]: calls into a library's code that return its faults (a damaged kernel's
//!   out-of-range access, illegal instruction) as errors instead of ending the process, with the
//!   flags, floating-point controls and thread pointer a kernel may damage put back;
//!   `thread_pointer` keeps each thread's thread pointer where the fault handler finds it.
//!
//! How workgroups are spread over threads is the driver's business, not this crate's.
#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

mod arch;
pub mod dispatch;
pub mod dispatch_memory;
mod elf;
pub mod executable;
pub mod float_mode;
pub mod library;
mod macho;
pub mod native_faults;
mod system_library;
#[cfg(guarded_calls)]
mod thread_pointer;
mod workgroup_cost;
