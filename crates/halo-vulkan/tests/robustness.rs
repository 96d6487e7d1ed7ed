//! Bounds-checked buffer access (`robustBufferAccess`): asked for by default, so a kernel that
//! reaches past its binding cannot corrupt other memory or lose the device; `robust_buffer_access=false`
//! turns it off.

use halo_hal::{Device, DeviceParams, DriverRegistry, Result};
use halo_vulkan::{DeviceOptions, Validation};
use std::sync::Arc;

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_vulkan::register_driver_with(&mut registry, Validation::Strict);
    registry.create_device(uri)
}

/// Whether the device at `uri` has `robustBufferAccess` on, or `None` (with a line saying the
/// test skipped) without a Vulkan device.
fn robust_or_skip(test: &str, uri: &str) -> Option<i64> {
    match create_device(uri) {
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED {test}: device unavailable: {error}");
            None
        }
        other => Some(
            other
                .expect("creating the Vulkan device")
                .query_i64("vulkan.features", "robust_buffer_access")
                .expect("the query answers"),
        ),
    }
}

#[test]
fn robust_buffer_access_is_on_by_default_and_can_be_turned_off() {
    let _alone = halo_cts::run_alone();
    let test = "robust_buffer_access_is_on_by_default_and_can_be_turned_off";
    // Vulkan requires every device to offer the feature, so asking for it always gets it.
    let Some(default) = robust_or_skip(test, "vulkan://") else {
        return;
    };
    assert_eq!(default, 1);
    assert_eq!(robust_or_skip(test, "vulkan://?robust_buffer_access=true"), Some(1));
    assert_eq!(robust_or_skip(test, "vulkan://?robust_buffer_access=false"), Some(0));
}

#[test]
fn a_bad_robust_buffer_access_value_is_refused_by_name() {
    let _alone = halo_cts::run_alone();
    // The parameters are read before any device is opened, so this runs without Vulkan too.
    let params = DeviceParams::from([("robust_buffer_access".to_string(), "sometimes".to_string())]);
    let error = DeviceOptions::from_params(&params).expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("vulkan device parameter robust_buffer_access=sometimes is not true, false, 1 or 0"),
        "{error}"
    );
}
