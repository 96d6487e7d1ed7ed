//! The `metal` driver's devices and URI parameters, as a user meets them.

use halo_hal::{DriverRegistry, StatusCode};

fn registry() -> DriverRegistry {
    let mut registry = DriverRegistry::new();
    halo_metal::register_driver(&mut registry);
    registry
}

/// Whether the emulated device can run here, saying by name that `test` skipped if not.
fn emulated_or_skip(test: &str) -> bool {
    match halo_metal::emulated::host_compiler::HostCompiler::locate() {
        Ok(_) => true,
        Err(error) => {
            println!("SKIPPED {test}: {error}");
            false
        }
    }
}

#[test]
fn bad_parameters_and_paths_are_named() {
    if !emulated_or_skip("bad_parameters_and_paths_are_named") {
        return;
    }
    let registry = registry();
    let error = registry.create_device("metal://emulated?threads=0").err().unwrap();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    assert!(error.message().contains("threads=0"), "{error}");
    let error = registry.create_device("metal://emulated?colour=blue").err().unwrap();
    assert!(error.message().contains("no device parameter 'colour'"), "{error}");
    if cfg!(not(target_os = "macos")) {
        // Without a GPU a plain `metal` does not pick the emulated device, and neither does an
        // ordinal, which names GPUs only.
        let error = registry.create_device("metal").err().unwrap();
        assert_eq!(error.code(), StatusCode::Unavailable, "{error}");
        assert!(
            error.message().contains("chosen only by name: metal://emulated"),
            "{error}"
        );
        for uri in ["metal://0", "metal://elsewhere"] {
            let error = registry.create_device(uri).err().unwrap();
            assert_eq!(error.code(), StatusCode::NotFound, "{uri}: {error}");
            assert!(error.message().contains("available: metal://emulated"), "{error}");
        }
    }
    let device = registry.create_device("metal://emulated?threads=3").unwrap();
    assert_eq!(device.info().path, "emulated");
}

#[test]
fn a_metal_device_refuses_other_formats_and_executable_constants() {
    if !emulated_or_skip("a_metal_device_refuses_other_formats_and_executable_constants") {
        return;
    }
    let device = registry().create_device("metal://emulated").unwrap();
    let cache = device.create_executable_cache().unwrap();
    assert!(cache.can_prepare_format("metal-msl-fb"));
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables");
    let data = std::fs::read(fixtures.join("multi_export.metal-msl-fb.fb")).unwrap();
    let prepare = |format, constants: &[u32]| {
        cache.prepare_executable(&halo_hal::ExecutableParams {
            format,
            data: &data,
            constants,
        })
    };
    let error = prepare("vulkan-spirv-fb", &[]).err().unwrap();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(error.message().contains("metal-msl-fb"), "{error}");
    let error = prepare("metal-msl-fb", &[7]).err().unwrap();
    assert!(
        error.message().contains("no executable-level constants; 1 were given"),
        "{error}"
    );
    assert_eq!(prepare("metal-msl-fb", &[]).unwrap().export_count(), 3);
}
