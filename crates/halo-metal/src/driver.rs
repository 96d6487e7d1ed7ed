//! The `metal` driver and its devices.
//!
//! `metal://emulated?threads=N`: the emulated device, on every host. Its kernels are IREE's MSL
//! compiled by clang (`HALO_METAL_CLANG`, else `clang` on `PATH`), its threadgroups run on `N`
//! host threads (default: one per host CPU). Without clang the device is `Unavailable`, saying
//! what to install. Apple GPUs come with the Apple backend.

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

impl MetalDriver {
    fn devices() -> Vec<DeviceInfo> {
        vec![DeviceInfo {
            id: 0,
            path: "emulated".into(),
            name: "emulated Metal device (MSL compiled by clang, run on host threads)".into(),
            details: vec![("executable formats".into(), crate::executable_def::FORMAT.into())],
        }]
    }
}

impl Driver for MetalDriver {
    fn name(&self) -> &str {
        DRIVER_NAME
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        // The emulated device is there only where it can compile; `halo devices` then says why not.
        HostCompiler::locate()?;
        Ok(Self::devices())
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        let info = select_device(DRIVER_NAME, &Self::devices(), path)?.clone();
        let mut params = ParamReader::new(DRIVER_NAME, params);
        let threads = params.number("threads", 1..=MAX_THREADS)?;
        let transient = TransientPoolOptions::read(&mut params)?;
        params.finish()?;
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
        let backend = EmulatedBackend::new(HostCompiler::locate()?, threads)?;
        Ok(Arc::new(MetalDevice::new(info, Arc::new(backend), transient)))
    }
}
