//! Drivers and device creation.

use crate::CtsDevice;
use halo_hal::StatusCode;

/// The device under test reports an identity and device queries answer.
pub fn enumerates_the_tested_device(ctx: &CtsDevice) {
    let info = ctx.device.info();
    assert!(!info.name.is_empty(), "device name is empty");
    assert_eq!(ctx.device.driver_name(), ctx.manifest.driver);
}

/// Creating a device or driver that does not exist is `NotFound`, naming what exists.
pub fn rejects_unknown_device_path(ctx: &CtsDevice) {
    let driver = ctx.manifest.driver;
    let error = (ctx.factory)(&format!("{driver}://99"))
        .err()
        .expect("device 99 must not exist");
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("{driver}://{}", ctx.device.info().path)),
        "{error}"
    );
    let error = (ctx.factory)("no-such-driver://")
        .err()
        .expect("unknown driver must fail");
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(
        error.to_string().contains(driver),
        "error should list the available drivers: {error}"
    );
    let again = (ctx.factory)(&format!("{driver}://{}", ctx.device.info().path)).unwrap();
    assert_eq!(again.info(), ctx.device.info());
}
