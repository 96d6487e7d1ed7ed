//! The `local-task` driver: one device backed by a pool of worker threads.

use super::device::TaskDevice;
use super::executor::ExecutorOptions;
use super::submission::SchedulingOptions;
use halo_cpu_executable::library::HostImport;
use halo_hal::driver::select_device;
use halo_hal::transient_pool::TransientPoolOptions;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, Error, Result};
use std::sync::Arc;
use std::time::Duration;

/// Name under which the driver registers.
pub const DRIVER_NAME: &str = "local-task";

/// Creates `local-task` devices.
#[derive(Default)]
pub struct TaskDriver;

/// Everything a `local-task` device is built with; from URI parameters
/// (`local-task://?workers=2&pin=true&spin_us=50&inline_ns=20000`).
#[derive(Debug, Clone, Default)]
pub struct TaskDeviceOptions {
    /// Worker pool settings.
    pub executor: ExecutorOptions,
    /// Scheduling thresholds.
    pub scheduling: SchedulingOptions,
    /// Host functions executables may import.
    pub imports: Arc<[HostImport]>,
    /// Bounds of the pool serving queue allocations.
    pub transient: TransientPoolOptions,
}

impl TaskDeviceOptions {
    /// Reads the URI parameters; unknown keys and bad values are errors naming them.
    pub fn from_params(params: &DeviceParams) -> Result<Self> {
        let mut params = params.clone();
        let mut options = TaskDeviceOptions {
            transient: TransientPoolOptions::take_from(&mut params)?,
            ..TaskDeviceOptions::default()
        };
        for (key, value) in &params {
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| Error::invalid_argument(format!("local-task parameter {key}={value} is not a number")))
            };
            match key.as_str() {
                "workers" => options.executor.worker_count = (number()? as usize).max(1),
                "pin" => options.executor.pin_workers = matches!(value.as_str(), "1" | "true"),
                "spin_us" => options.executor.spin = Duration::from_micros(number()?),
                "inline_ns" => options.scheduling.inline_ns = number()?,
                _ => {
                    return Err(Error::invalid_argument(format!(
                        "unknown local-task parameter '{key}' (known: workers, pin, spin_us, inline_ns, {})",
                        TransientPoolOptions::PARAMETERS.join(", ")
                    )))
                }
            }
        }
        Ok(options)
    }
}

impl TaskDriver {
    fn devices() -> Vec<DeviceInfo> {
        let workers = ExecutorOptions::default().worker_count;
        vec![DeviceInfo {
            id: 0,
            path: "0".into(),
            name: format!("local-task ({workers} workers)"),
            details: Vec::new(),
        }]
    }
}

impl Driver for TaskDriver {
    fn name(&self) -> &str {
        DRIVER_NAME
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(Self::devices())
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        let info = select_device(DRIVER_NAME, &Self::devices(), path)?.clone();
        Ok(Arc::new(TaskDevice::new(
            info,
            &TaskDeviceOptions::from_params(params)?,
        )?))
    }
}
