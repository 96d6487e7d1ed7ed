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
