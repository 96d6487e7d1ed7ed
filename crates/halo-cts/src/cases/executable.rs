//! Executable caches and executables.

use crate::CtsDevice;
use halo_hal::{ExecutableParams, StatusCode};

/// An unknown format is `NotFound`, listing what the device supports.
pub fn rejects_unknown_format(ctx: &CtsDevice) {
    let cache = ctx.device.create_executable_cache().unwrap();
    assert!(!cache.can_prepare_format("no-such-format"));
    assert!(cache.can_prepare_format(ctx.manifest.executable_format));
    let error = cache.prepare_executable(&ExecutableParams {
        format: "no-such-format",
        data: &[1, 2, 3],
        constants: &[],
    });
    let error = error.err().expect("unknown format must fail");
    assert_eq!(error.code(), StatusCode::NotFound);
    assert!(error.to_string().contains(ctx.manifest.executable_format), "{error}");
    assert_eq!(
        ctx.device
            .query_i64("hal.executable.format", ctx.manifest.executable_format)
            .unwrap(),
        1
    );
    assert_eq!(
        ctx.device.query_i64("hal.executable.format", "no-such-format").unwrap(),
        0
    );
}

/// Garbage and truncated data are errors, never crashes.
pub fn rejects_malformed_data(ctx: &CtsDevice) {
    let cache = ctx.device.create_executable_cache().unwrap();
    let good = std::fs::read(ctx.executable_path("multi_export")).unwrap();
    for data in [
        &[][..],
        &[0x7f, b'E', b'L', b'F'][..],
        &good[..good.len() / 3],
        &[0xAB; 256][..],
    ] {
        let params = ExecutableParams {
            format: ctx.manifest.executable_format,
            data,
            constants: &[],
        };
        assert!(
            cache.prepare_executable(&params).is_err(),
            "{} bytes of bad data loaded",
            data.len()
        );
    }
}

/// Export count, names, layouts, lookup by name and out-of-range ordinals.
pub fn lists_exports(ctx: &CtsDevice) {
    let executable = ctx.executable("multi_export");
    assert_eq!(executable.export_count(), 3);
    let names: Vec<String> = (0..3).map(|i| executable.export_info(i).unwrap().name).collect();
    assert_eq!(names, ["negate", "double_inplace", "add_scaled"]);
    let add = executable.export_info(2).unwrap();
    assert_eq!((add.constant_count, add.binding_count), (1, 3));
    assert_eq!(executable.lookup_export("double_inplace").unwrap(), 1);
    assert_eq!(
        executable.lookup_export("missing").unwrap_err().code(),
        StatusCode::NotFound
    );
    assert_eq!(executable.export_info(3).unwrap_err().code(), StatusCode::OutOfRange);
}
