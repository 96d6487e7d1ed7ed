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

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/executables")
        .join(name);
    std::fs::read(path).unwrap()
}

/// `elementwise_i32`'s executable with its SPIR-V's `LocalSize 1 1 1` made `x 1 1`.
fn with_workgroup_width(x: u32) -> Vec<u8> {
    let mut bytes = fixture("elementwise_i32.vulkan-spirv-fb.fb");
    let local_size: Vec<u8> = [(6u32 << 16) | 16]
        .iter()
        .chain(&[17u32, 1, 1, 1])
        .flat_map(|w| w.to_le_bytes())
        .collect();
    // The instruction is opcode and count, the entry point's id, then the mode and its sizes.
    let at = bytes
        .windows(24)
        .position(|w| w[..4] == local_size[..4] && w[8..] == local_size[4..])
        .expect("LocalSize 1 1 1 in the fixture");
    bytes[at + 12..at + 16].copy_from_slice(&x.to_le_bytes());
    bytes
}

/// A kernel whose workgroup is larger than the device runs is refused when prepared, naming the
/// size, and the device goes on preparing and running others.
#[test]
fn a_workgroup_past_the_device_limit_is_refused_and_the_device_keeps_working() {
    let device = match create("opencl://") {
        Ok(device) => device,
        Err(error) if error.is_unavailable() => {
            println!("a_workgroup_past_the_device_limit_is_refused_and_the_device_keeps_working: skipped: {error}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    let cache = device.create_executable_cache().unwrap();
    let prepare = |data: &[u8]| {
        cache.prepare_executable(&halo_hal::ExecutableParams {
            format: "vulkan-spirv-fb",
            data,
            constants: &[],
        })
    };
    let error = prepare(&with_workgroup_width(60000))
        .err()
        .expect("a 60000-wide workgroup was accepted");
    assert_eq!(error.code(), StatusCode::ResourceExhausted, "{error}");
    assert!(error.to_string().contains("60000x1x1"), "{error}");
    let error = prepare(&with_workgroup_width(70000))
        .err()
        .expect("a 70000-wide workgroup was accepted");
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    let executable = prepare(&fixture("elementwise_i32.vulkan-spirv-fb.fb")).unwrap();
    assert_eq!(executable.export_info(0).unwrap().workgroup_size, [1, 1, 1]);
}
