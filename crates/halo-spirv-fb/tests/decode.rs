//! Decoding the `vulkan-spirv-fb` executables iree-compile 3.13 wrote for the fixtures.

use halo_hal::StatusCode;
use halo_spirv_fb::{decode, BindingSlot};
use std::path::Path;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/executables")
            .join(name),
    )
    .unwrap()
}

#[test]
fn exports_name_their_module_bindings_and_constants() {
    let executable = decode(&fixture("multi_export.vulkan-spirv-fb.fb")).unwrap();
    assert_eq!(executable.exports.len(), 3);
    assert_eq!(executable.modules.len(), 3);
    for (ordinal, export) in executable.exports.iter().enumerate() {
        assert_eq!(export.module, ordinal, "{export:?}");
        let words = &executable.modules[export.module];
        assert_eq!(words[0], 0x0723_0203, "module {ordinal} is SPIR-V");
        assert!(!export.bindings.is_empty(), "{export:?}");
        assert!(export.bindings.iter().all(|b| b.set == 0), "{export:?}");
    }
    let constants = decode(&fixture("constants.vulkan-spirv-fb.fb")).unwrap();
    assert!(constants.exports[0].constant_count > 0, "{:?}", constants.exports[0]);
    let elementwise = decode(&fixture("elementwise_i32.vulkan-spirv-fb.fb")).unwrap();
    assert_eq!(elementwise.exports[0].entry_point, "bits");
    assert_eq!(
        elementwise.exports[0].bindings,
        (0..3)
            .map(|binding| BindingSlot { set: 0, binding })
            .collect::<Vec<_>>()
    );
}

#[test]
fn truncated_or_foreign_bytes_are_refused() {
    let bytes = fixture("elementwise_i32.vulkan-spirv-fb.fb");
    for broken in [
        &bytes[..40],
        &bytes[..bytes.len() / 2],
        &b"not an executable at all, just some bytes...................."[..],
    ] {
        let error = decode(broken).unwrap_err();
        assert!(
            matches!(
                error.code(),
                StatusCode::InvalidArgument | StatusCode::Incompatible | StatusCode::OutOfRange
            ),
            "{error}"
        );
    }
}

/// What `encode` writes decodes to what it was given, for every fixture and for a made-up
/// executable with two sets, a gap in a set's bindings and push constants.
#[test]
fn encoded_executables_decode_to_themselves() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".vulkan-spirv-fb.fb") {
            continue;
        }
        let Ok(executable) = decode(&std::fs::read(&path).unwrap()) else {
            continue;
        };
        assert_eq!(
            decode(&halo_spirv_fb::encode(&executable)).unwrap(),
            executable,
            "{}",
            path.display()
        );
        seen += 1;
    }
    assert!(seen >= 5, "only {seen} fixtures decoded");
    let made = halo_spirv_fb::SpirvExecutable {
        modules: vec![vec![0x0723_0203, 1, 2], vec![0x0723_0203, 3]],
        exports: vec![
            halo_spirv_fb::SpirvExport {
                name: "first".into(),
                entry_point: "main".into(),
                module: 1,
                bindings: vec![
                    BindingSlot { set: 0, binding: 0 },
                    BindingSlot { set: 0, binding: 3 },
                    BindingSlot { set: 2, binding: 1 },
                ],
                constant_count: 5,
                subgroup_size: 16,
            },
            halo_spirv_fb::SpirvExport {
                name: "second".into(),
                entry_point: "other".into(),
                module: 0,
                bindings: vec![],
                constant_count: 0,
                subgroup_size: 0,
            },
        ],
    };
    assert_eq!(decode(&halo_spirv_fb::encode(&made)).unwrap(), made);
}
