//! The `metal` driver and its devices.
//!
//! - `metal://0`, or `metal://` (macOS): the system's default GPU, through the Apple backend.
//! - `metal://emulated?threads=N`: the emulated device, on every host. Its kernels are IREE's MSL
//!   compiled by clang (`HALO_METAL_CLANG`, else `clang` on `PATH`), its threadgroups run on `N`
//!   host threads (default: one per host CPU). `program_cache=FOLDER|off` is where compiled
//!   libraries are kept between processes (default `HALO_METAL_PROGRAM_CACHE`, else
//!   `~/.cache/halo/metal-emulated`), so a program's second load compiles nothing. Without clang
//!   the device is `Unavailable`, saying what to install. It is chosen only by name, never as
//!   `metal://`.

use crate::backend::Backend;
use crate::device::MetalDevice;
use crate::emulated::backend::EmulatedBackend;
use crate::emulated::host_compiler::HostCompiler;
use halo_hal::driver::select_device;
use halo_hal::transient_pool::TransientPoolOptions;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, ParamReader, Result};
use std::sync::Arc;

/// Name under which the driver registers (and the pattern Metal programs select devices by).
pub const DRIVER_NAME: &str = "metal";

/// The most host threads the emulated device takes.
const MAX_THREADS: usize = 256;

/// Creates Metal devices.
#[derive(Default)]
pub struct MetalDriver;

/// The path of the emulated device.
const EMULATED: &str = "emulated";

/// The path of the system's default GPU (macOS).
#[cfg(target_os = "macos")]
const APPLE_DEFAULT: &str = "0";

impl MetalDriver {
    /// The devices there are here: the system's GPU (macOS), then the emulated device where clang
    /// is found. `Unavailable` when there is neither.
    fn devices() -> Result<Vec<DeviceInfo>> {
        let mut devices = Vec::new();
        #[cfg(target_os = "macos")]
        if let Some(name) = crate::apple::AppleBackend::system_default_name() {
            devices.push(DeviceInfo {
                id: 0,
                path: APPLE_DEFAULT.into(),
                name,
                details: vec![("executable formats".into(), crate::executable_def::FORMAT.into())],
            });
        }
        match HostCompiler::locate() {
            Ok(_) => devices.push(DeviceInfo {
                id: devices.len() as u64,
                path: EMULATED.into(),
                name: "emulated Metal device (MSL compiled by clang, run on host threads)".into(),
                details: vec![("executable formats".into(), crate::executable_def::FORMAT.into())],
            }),
            // `halo devices` then says why there is none.
            Err(error) if devices.is_empty() => return Err(error),
            Err(_) => {}
        }
        Ok(devices)
    }

    /// The device `path` names among `devices`: the emulated device by its name only, a GPU by
    /// ordinal (`metal://0`, or `metal://` for the first).
    fn select(devices: &[DeviceInfo], path: &str) -> Result<DeviceInfo> {
        let (emulated, gpus): (Vec<DeviceInfo>, Vec<DeviceInfo>) =
            devices.iter().cloned().partition(|device| device.path == EMULATED);
        if path == EMULATED {
            return match emulated.into_iter().next() {
                Some(device) => Ok(device),
                None => Err(HostCompiler::locate()
                    .err()
                    .unwrap_or_else(|| halo_hal::Error::unavailable("the emulated Metal device is not available"))),
            };
        }
        if path.is_empty() && gpus.is_empty() {
            return Err(halo_hal::Error::unavailable(format!(
                "no Metal GPU here (Metal GPUs are reached on macOS); the emulated device is chosen only by name: \
                 metal://{EMULATED}"
            )));
        }
        select_device(DRIVER_NAME, &gpus, path).cloned().map_err(|_| {
            // Every device is listed, though the emulated one is picked by its name only.
            let known: Vec<String> = devices.iter().map(|d| format!("{DRIVER_NAME}://{}", d.path)).collect();
            halo_hal::Error::not_found(format!(
                "driver '{DRIVER_NAME}' has no device '{path}'; available: {}",
                known.join(", ")
            ))
        })
    }

    #[cfg(target_os = "macos")]
    fn apple_backend() -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(crate::apple::AppleBackend::system_default()?))
    }

    #[cfg(not(target_os = "macos"))]
    fn apple_backend() -> Result<Arc<dyn Backend>> {
        Err(halo_hal::Error::unavailable("Metal GPUs are reached on macOS only"))
    }
}

impl Driver for MetalDriver {
    fn name(&self) -> &str {
        DRIVER_NAME
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        Self::devices()
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        let info = Self::select(&Self::devices()?, path)?;
        let mut params = ParamReader::new(DRIVER_NAME, params);
        let emulated = if info.path == EMULATED {
            Some((
                params.number("threads", 1..=MAX_THREADS)?,
                params.cache_dir("program_cache")?,
            ))
        } else {
            None
        };
        let transient = TransientPoolOptions::read(&mut params)?;
        params.finish()?;
        let backend: Arc<dyn Backend> = match emulated {
            Some((threads, cache)) => {
                let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
                let cache = cache.unwrap_or_else(crate::emulated::host_compiler::cache_dir_from_env);
                Arc::new(EmulatedBackend::new(
                    HostCompiler::locate()?.with_cache(&cache),
                    threads,
                )?)
            }
            None => Self::apple_backend()?,
        };
        Ok(Arc::new(MetalDevice::new(info, backend, transient)?))
    }
}
