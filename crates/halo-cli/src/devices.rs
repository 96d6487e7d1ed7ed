//! `halo drivers` and `halo devices`.

use crate::output::outln;
use halo_hal::{DriverRegistry, Result};

/// Prints each registered driver's name.
pub fn list_drivers(registry: &DriverRegistry) -> Result<()> {
    for name in registry.driver_names() {
        outln!("{name}")?;
    }
    Ok(())
}

/// Prints each device as `uri  name`, then its details indented; drivers that are unavailable
/// here say so.
pub fn list_devices(registry: &DriverRegistry) -> Result<()> {
    for name in registry.driver_names() {
        let devices = registry
            .create_driver(&name)
            .and_then(|driver| driver.enumerate_devices());
        match devices {
            Ok(devices) => {
                for device in devices {
                    outln!("{name}://{}\t{}", device.path, device.name)?;
                    for (what, value) in &device.details {
                        outln!("    {what}: {value}")?;
                    }
                }
            }
            Err(error) if error.is_unavailable() => outln!("# {name}: unavailable ({})", error.message())?,
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
