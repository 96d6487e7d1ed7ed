//! The `local-sync` driver: one device, the calling thread.

use super::device::SyncDevice;
use halo_hal::allocator::read_guard_pages;
use halo_hal::driver::select_device;
use halo_hal::transient_pool::TransientPoolOptions;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, ParamReader, Result};
use std::sync::Arc;

/// Name under which the driver registers.
pub const DRIVER_NAME: &str = "local-sync";

/// Creates `local-sync` devices.
#[derive(Default)]
pub struct SyncDriver;

impl SyncDriver {
    fn devices() -> Vec<DeviceInfo> {
        vec![DeviceInfo {
            id: 0,
            path: "0".into(),
            name: "local-sync (calling thread)".into(),
            details: Vec::new(),
        }]
    }
}

impl Driver for SyncDriver {
    fn name(&self) -> &str {
        DRIVER_NAME
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(Self::devices())
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        let mut params = ParamReader::new(DRIVER_NAME, params);
        let guard_pages = read_guard_pages(&mut params)?;
        let transient = TransientPoolOptions::read(&mut params)?.unpooled_if(guard_pages);
        params.finish()?;
        let info = select_device(DRIVER_NAME, &Self::devices(), path)?.clone();
        let device = SyncDevice::new(info, crate::kernel_imports(), transient);
        Ok(Arc::new(if guard_pages { device.with_guard_pages() } else { device }))
    }
}
