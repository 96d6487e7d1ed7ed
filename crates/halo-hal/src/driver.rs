//! Drivers enumerate and create devices; the registry creates a device from a URI.

use crate::device::{Device, DeviceInfo};
use crate::{Error, Result, ResultExt};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Options from a device URI's query string (`local-task://?workers=2`).
pub type DeviceParams = BTreeMap<String, String>;

/// Longest time, in microseconds, a device parameter may ask a host thread to spin or poll
/// before it sleeps (`spin_us`, `poll_us`): a second of a busy core is far past where watching
/// pays, and more would keep a core busy for as long as work runs.
pub const MAX_SPIN_US: u64 = 1_000_000;

/// A spin or poll parameter's value as a duration: `None` unless it is a whole number of
/// microseconds from 0 to [`MAX_SPIN_US`] (the driver names the parameter in its error).
pub fn parse_spin_us(value: &str) -> Option<Duration> {
    value
        .parse::<u64>()
        .ok()
        .filter(|us| *us <= MAX_SPIN_US)
        .map(Duration::from_micros)
}

/// A kind of device (`iree_hal_driver_t`).
///
/// Threading: any thread.
pub trait Driver: Send + Sync {
    /// Its registered name (`local-sync`).
    fn name(&self) -> &str;
    /// Devices present on this machine.
    ///
    /// # Errors
    /// `Unavailable` when the driver's library or hardware is missing.
    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>>;
    /// Creates the device with `path`: empty for the default, a decimal ordinal, or an id/path
    /// that the driver understands.
    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>>;
}

/// Creates a driver when it is first used.
pub type DriverFactory = Box<dyn Fn() -> Result<Arc<dyn Driver>> + Send + Sync>;

/// The drivers linked into a program (`iree_hal_driver_registry_t`).
#[derive(Default)]
pub struct DriverRegistry {
    factories: BTreeMap<String, DriverFactory>,
}

/// A parsed device URI: `driver`, `driver://`, `driver://path`, `driver://path?key=value&...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceUri {
    /// Driver name.
    pub driver: String,
    /// Device path (empty for the default device).
    pub path: String,
    /// Query parameters.
    pub params: DeviceParams,
}

impl DeviceUri {
    /// Parses a device URI.
    ///
    /// # Errors
    /// `InvalidArgument` naming the URI when it has no driver name or a malformed parameter.
    pub fn parse(uri: &str) -> Result<Self> {
        let (driver, rest) = uri.split_once("://").unwrap_or((uri, ""));
        if driver.is_empty()
            || !driver
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            return Err(Error::invalid_argument(format!(
                "device URI '{uri}' has no valid driver name"
            )));
        }
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut params = DeviceParams::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::invalid_argument(format!("device URI '{uri}': parameter '{pair}' has no '='")))?;
            params.insert(key.to_string(), value.to_string());
        }
        Ok(DeviceUri {
            driver: driver.to_string(),
            path: path.to_string(),
            params,
        })
    }
}

impl DriverRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a driver factory under `name`, replacing any earlier one.
    pub fn register(&mut self, name: &str, factory: DriverFactory) {
        self.factories.insert(name.to_string(), factory);
    }

    /// Names of the registered drivers.
    pub fn driver_names(&self) -> Vec<String> {
        self.factories.keys().cloned().collect()
    }

    /// Creates the driver called `name`.
    ///
    /// # Errors
    /// `NotFound` listing the registered drivers.
    pub fn create_driver(&self, name: &str) -> Result<Arc<dyn Driver>> {
        let factory = self.factories.get(name).ok_or_else(|| {
            Error::not_found(format!(
                "no driver named '{name}'; available: {}",
                self.driver_names().join(", ")
            ))
        })?;
        factory().with_context(|| format!("creating driver '{name}'"))
    }

    /// Creates the device a URI names.
    pub fn create_device(&self, uri: &str) -> Result<Arc<dyn Device>> {
        self.create_device_from(&DeviceUri::parse(uri)?)
            .with_context(|| format!("creating device '{uri}'"))
    }

    /// Creates the device a parsed URI names.
    pub fn create_device_from(&self, uri: &DeviceUri) -> Result<Arc<dyn Device>> {
        self.create_driver(&uri.driver)?.create_device(&uri.path, &uri.params)
    }
}

/// Picks a device by path for drivers with a fixed device list: empty is the first, a number is
/// an ordinal, anything else must equal a device's path.
pub fn select_device<'a>(driver: &str, devices: &'a [DeviceInfo], path: &str) -> Result<&'a DeviceInfo> {
    let found = if path.is_empty() {
        devices.first()
    } else if let Ok(ordinal) = path.parse::<usize>() {
        devices.get(ordinal)
    } else {
        devices.iter().find(|d| d.path == path)
    };
    found.ok_or_else(|| {
        let known: Vec<String> = devices.iter().map(|d| format!("{driver}://{}", d.path)).collect();
        Error::not_found(format!(
            "driver '{driver}' has no device '{path}'; available: {}",
            known.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn spin_values_from_zero_to_a_second_are_taken() {
        assert_eq!(parse_spin_us("0"), Some(Duration::ZERO));
        assert_eq!(parse_spin_us("1000000"), Some(Duration::from_secs(1)));
        for bad in ["1000001", "18446744073709551615", "-1", "soon", ""] {
            assert_eq!(parse_spin_us(bad), None, "{bad:?}");
        }
    }

    use super::*;

    #[test]
    fn parses_uris() {
        let uri = DeviceUri::parse("local-task://0?workers=2").unwrap();
        assert_eq!((uri.driver.as_str(), uri.path.as_str()), ("local-task", "0"));
        assert_eq!(uri.params["workers"], "2");
        assert_eq!(DeviceUri::parse("local-sync").unwrap().path, "");
        assert!(DeviceUri::parse("://x").is_err());
        assert!(DeviceUri::parse("a b://").is_err());
        assert!(DeviceUri::parse("x://?novalue").is_err());
    }
}
