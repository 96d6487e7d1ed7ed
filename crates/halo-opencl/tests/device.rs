//! What the CTS cannot know of the OpenCL driver: its URI parameters and what it refuses.

use halo_hal::{Device, DriverRegistry, StatusCode};
use std::sync::Arc;

fn create(uri: &str) -> halo_hal::Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_opencl::register_driver(&mut registry);
    registry.create_device(uri)
}

#[test]
fn bad_uri_parameters_are_refused_naming_them() {
    for (uri, named) in [
        ("opencl://?subgroup_size=3", "subgroup_size=3"),
        ("opencl://?subgroup_size=256", "subgroup_size=256"),
        ("opencl://?subgroup_size=", "subgroup_size="),
        ("opencl://?workers=2", "'workers'"),
    ] {
        let error = create(uri).err().unwrap_or_else(|| panic!("{uri} was accepted"));
        assert_eq!(error.code(), StatusCode::InvalidArgument, "{uri}: {error}");
        assert!(error.to_string().contains(named), "{uri}: {error}");
    }
}

#[test]
fn devices_are_named_by_ordinal_and_by_platform_and_device() {
    let device = match create("opencl://0") {
        Ok(device) => device,
        Err(error) if error.is_unavailable() => {
            println!("devices_are_named_by_ordinal_and_by_platform_and_device: skipped: {error}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    let path = device.info().path.clone();
    assert!(path.contains('/'), "{path}");
    let same = create(&format!("opencl://{path}?subgroup_size=16")).unwrap();
    assert_eq!(same.info().id, device.info().id);
    assert_eq!(same.query_i64("hal.device.id", "vulkan*").unwrap(), 1);
    assert_eq!(same.query_i64("hal.executable.format", "vulkan-spirv-fb").unwrap(), 1);
    let error = create("opencl://99/99").err().unwrap();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
}
