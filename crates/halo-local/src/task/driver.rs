//! The `local-task` driver: one device backed by a pool of worker threads.

use super::device::TaskDevice;
use super::executor::{ExecutorOptions, Pinning};
use super::submission::SchedulingOptions;
use halo_cpu_executable::library::HostImport;
use halo_hal::allocator::read_guard_pages;
use halo_hal::driver::select_device;
use halo_hal::transient_pool::TransientPoolOptions;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, ParamReader, Result};
use std::sync::Arc;

/// Name under which the driver registers.
pub const DRIVER_NAME: &str = "local-task";

/// Creates `local-task` devices.
#[derive(Default)]
pub struct TaskDriver;

/// Everything a `local-task` device is built with; from URI parameters
/// (`local-task://?workers=2&pin=true&spin_us=50&busy_spin_us=2000&inline_ns=20000`).
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
    /// Whether each buffer is mapped between guard pages (`guard_pages`; see
    /// [`halo_hal::allocator::read_guard_pages`]).
    pub guard_pages: bool,
}

/// Most worker threads a device may have (IREE's executor allows as many): a count from a URI
/// past what the system can start would fail deep inside thread creation instead.
pub const MAX_WORKERS: usize = 256;

impl TaskDeviceOptions {
    /// Reads the URI parameters; unknown keys and bad values are errors naming them.
    pub fn from_params(params: &DeviceParams) -> Result<Self> {
        let mut params = ParamReader::new(DRIVER_NAME, params);
        let guard_pages = read_guard_pages(&mut params)?;
        let mut options = TaskDeviceOptions {
            transient: TransientPoolOptions::read(&mut params)?.unpooled_if(guard_pages),
            guard_pages,
            imports: crate::kernel_imports(),
            ..TaskDeviceOptions::default()
        };
        let executor = &mut options.executor;
        if let Some(workers) = params.number("workers", 1..=MAX_WORKERS)? {
            executor.worker_count = workers;
        }
        let pinning = [
            ("true", Pinning::Always),
            ("1", Pinning::Always),
            ("false", Pinning::Never),
            ("0", Pinning::Never),
            ("auto", Pinning::Auto),
        ];
        if let Some(pinning) = params.choice("pin", &pinning)? {
            executor.pinning = pinning;
        }
        if let Some(spin) = params.micros("spin_us")? {
            executor.spin = spin;
        }
        if let Some(spin) = params.micros("busy_spin_us")? {
            executor.spin_while_busy = spin;
        }
        if let Some(inline_ns) = params.number("inline_ns", 0..=u64::MAX)? {
            options.scheduling.inline_ns = Some(inline_ns);
        }
        params.finish()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn options(key: &str, value: &str) -> Result<TaskDeviceOptions> {
        TaskDeviceOptions::from_params(&DeviceParams::from([(key.to_string(), value.to_string())]))
    }

    #[test]
    fn parameters_in_range_are_taken() {
        assert_eq!(options("workers", "256").unwrap().executor.worker_count, 256);
        assert_eq!(options("pin", "true").unwrap().executor.pinning, Pinning::Always);
        assert_eq!(options("pin", "0").unwrap().executor.pinning, Pinning::Never);
        assert_eq!(options("pin", "auto").unwrap().executor.pinning, Pinning::Auto);
        assert_eq!(TaskDeviceOptions::default().executor.pinning, Pinning::Auto);
        assert_eq!(options("spin_us", "0").unwrap().executor.spin, Duration::ZERO);
        assert_eq!(
            options("busy_spin_us", "300").unwrap().executor.spin_while_busy,
            Duration::from_micros(300)
        );
        assert_eq!(options("inline_ns", "5").unwrap().scheduling.inline_ns, Some(5));
    }

    #[test]
    fn out_of_range_or_malformed_parameters_are_refused_by_name() {
        for (key, value, expected) in [
            ("workers", "0", "from 1 to 256"),
            ("workers", "100000", "from 1 to 256"),
            ("workers", "-2", "from 1 to 256"),
            ("pin", "yes", "true, 1, false, 0 or auto"),
            ("spin_us", "1000001", "from 0 to 1000000"),
            ("busy_spin_us", "2.5", "from 0 to 1000000"),
            ("inline_ns", "soon", "a whole number"),
        ] {
            let error = options(key, value)
                .err()
                .unwrap_or_else(|| panic!("{key}={value} taken"));
            assert_eq!(error.code(), halo_hal::StatusCode::InvalidArgument);
            let message = error.to_string();
            assert!(
                message.contains(&format!("{key}={value}")) && message.contains(expected),
                "{message}"
            );
        }
    }

    #[test]
    fn an_unknown_parameter_is_refused_with_every_known_one() {
        let message = options("spin", "5").expect_err("spin taken").to_string();
        let known = [
            "guard_pages",
            "transient_retain_bytes",
            "transient_limit_bytes",
            "workers",
            "pin",
            "spin_us",
            "busy_spin_us",
            "inline_ns",
        ];
        for known in known {
            assert!(message.contains(known), "{known} missing from: {message}");
        }
    }
}
