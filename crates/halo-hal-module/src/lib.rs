//! The `hal` VM module (version 7): the native functions IREE-compiled programs import to
//! allocate buffers, record command buffers, dispatch kernels and synchronize, implemented on
//! halo's HAL traits so they run on any driver.
//!
//! Who does what:
//! - [`objects`]: the HAL objects as VM reference types (`!hal.buffer_view`, ...).
//! - `exports/*`: one file per object family, each a table of `(name, calling convention,
//!   function)`; [`create_module`] registers them all.
//! - [`HalModuleState`]: the device group the program sees (`hal.devices.*`) and one executable
//!   cache per device, shared by every call.
//!
//! Waiting: `hal.fence.await` is a waiting function. An invocation that may yield
//! (`halo_vm::interp::Invocation::resume`, what `halo-runtime`'s async calls use) suspends until
//! its fences are reached and no thread waits; a blocking invocation blocks the calling thread
//! until they are reached or the timeout passes (IREE's synchronous mode).
#![warn(missing_docs)]

mod args;
mod exports;
pub mod objects;

use halo_hal::{Device, ExecutableCache, Result};
use halo_vm::NativeModule;
use std::sync::{Arc, Mutex};

pub use args::HalArgs;
pub use halo_vm::Args;
pub use objects::{HalBuffer, HalBufferView, HalDevice, HalFence};

/// The version programs from iree-compile 3.13 require (`hal, version >= 7`).
pub const VERSION: u32 = 7;

/// What every function of one `hal` module instance shares.
pub struct HalModuleState {
    devices: Vec<Arc<dyn Device>>,
    caches: Mutex<Vec<DeviceCache>>,
}

/// A device and the executable cache its executables are prepared in.
type DeviceCache = (Arc<dyn Device>, Arc<dyn ExecutableCache>);

impl HalModuleState {
    /// The devices a program sees, in `hal.devices.get` order.
    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }

    /// The executable cache of `device`, created on first use.
    fn executable_cache(&self, device: &Arc<dyn Device>) -> Result<Arc<dyn ExecutableCache>> {
        let mut caches = self.caches.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, cache)) = caches.iter().find(|(d, _)| Arc::ptr_eq(d, device)) {
            return Ok(cache.clone());
        }
        let cache = device.create_executable_cache()?;
        caches.push((device.clone(), cache.clone()));
        Ok(cache)
    }
}

/// A native function of the module.
type Export = fn(&HalModuleState, &Args<'_>) -> Result<halo_vm::Results>;

/// What a waiting function waits for, from its arguments.
type WaitHook = fn(&HalModuleState, &Args<'_>) -> Result<Option<halo_hal::Fence>>;

/// Builds the `hal` module over `devices` (the program's device group, in order).
///
/// Ownership: the module keeps the devices alive. Threading: its functions may be called from
/// any thread.
///
/// # Errors
/// `InvalidArgument` if an export table is malformed (a bug).
pub fn create_module(devices: Vec<Arc<dyn Device>>) -> Result<Arc<NativeModule>> {
    let state = Arc::new(HalModuleState {
        devices,
        caches: Mutex::new(Vec::new()),
    });
    // No hal function runs bytecode, so callers keep their module state locked across calls,
    // except those that may block or run kernels: concurrent calls of one program then overlap.
    let mut builder = NativeModule::builder("hal", VERSION).leaf();
    for &(name, cconv, export) in exports::ALL.iter().flat_map(|table| table.iter()) {
        let state = state.clone();
        builder = builder.function(name, cconv, move |args| export(&state, args))?;
    }
    for &(name, cconv, export) in exports::BLOCKING.iter().flat_map(|table| table.iter()) {
        let state = state.clone();
        builder = builder.blocking_function(name, cconv, move |args| export(&state, args))?;
    }
    for &(name, cconv, hook, export) in exports::WAITING.iter().flat_map(|table| table.iter()) {
        let (hook_state, state) = (state.clone(), state.clone());
        builder = builder.waiting_function(
            name,
            cconv,
            move |args| hook(&hook_state, args),
            move |args| export(&state, args),
        )?;
    }
    Ok(builder.build())
}
