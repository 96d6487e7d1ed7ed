//! `halo run-module --device=vulkan` on every model fixture compiled for Vulkan
//! (`fixtures/models/vulkan`), against IREE's CPU output for the same case, with the Khronos
//! validation layer in strict mode (any message fails the case). Without a Vulkan device it says
//! that it skipped.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

fn vulkan_modules() -> PathBuf {
    fixtures().join("vulkan")
}

/// Cases where the SPIR-V kernels, not halo, give numbers that differ from the CPU's: IREE's own
/// Vulkan driver prints exactly what halo prints for each (checked with `iree-run-module
/// --device=vulkan` on lavapipe). These are compared with `common::close_enough` instead of as text.
const KERNEL_DIFFERENCES: &[(&str, &str)] = &[
    (
        "elementwise_math.binary",
        "remf(-0, 1) is +0 in lavapipe's SPIR-V OpFRem, -0 on the CPU",
    ),
    (
        "elementwise_math.unary_special",
        "lavapipe's exp(88.5) is 1 ulp below the CPU's correctly rounded value",
    ),
    (
        "float16.to_f16",
        "6e-8 becomes the f16 subnormal 5.96e-8 on lavapipe; the CPU kernel flushes it to 0",
    ),
    (
        "onnx_mlp.basic",
        "softmax's exp differs by 1 ulp between lavapipe and the CPU",
    ),
];

#[test]
fn close_enough_compares_numbers_not_text() {
    assert!(common::close_enough(
        "4xf32=[1 -0 2.72308E+38]",
        "4xf32=[1 0 2.72309E+38]"
    ));
    assert!(common::close_enough("2xf16=5.96046E-08 1", "2xf16=0 1"));
    assert!(common::close_enough("2xf32=NAN -INF", "2xf32=NAN -INF"));
    assert!(!common::close_enough("2xf32=1.001 1", "2xf32=1 1"));
    assert!(!common::close_enough("2xi32=1 1", "3xi32=1 1"));
    assert!(!common::close_enough("2xf32=1 1 1", "2xf32=1 1"));
}

#[test]
fn every_vulkan_model_fixture_matches_iree_cpu_output() {
    check_every_case("every_vulkan_model_fixture_matches_iree_cpu_output", "--device=vulkan");
}

/// The same with device-local memory kept from the host, as on a discrete GPU: inputs, outputs
/// and the values programs read back all go through staging copies on the queue.
#[test]
fn every_vulkan_model_fixture_matches_with_unmapped_device_memory() {
    check_every_case(
        "every_vulkan_model_fixture_matches_with_unmapped_device_memory",
        "--device=vulkan://?device_local_mappable=false",
    );
}

fn check_every_case(test: &str, device_flag: &str) {
    if !common::vulkan_device_present() {
        println!("SKIPPED {test}: no Vulkan device");
        return;
    }
    let cases: Vec<PathBuf> = common::cases(&fixtures())
        .into_iter()
        .filter(|flags| common::case_module(&vulkan_modules(), flags).exists())
        .collect();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| {
            let name = flags.file_stem().unwrap().to_string_lossy();
            let kernel_difference = KERNEL_DIFFERENCES.iter().any(|(case, _)| *case == name);
            common::check_case_in(
                &fixtures(),
                &vulkan_modules(),
                flags,
                &[device_flag],
                &[("HALO_VULKAN_VALIDATION", "strict")],
                if kernel_difference {
                    common::close_enough
                } else {
                    common::same_text
                },
            )
        })
        .collect();
    assert!(cases.len() >= 100, "only {} Vulkan model cases found", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ on {device_flag}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}

/// A program missing from `fixtures/models/vulkan` must be listed in its README with the reason.
#[test]
fn every_model_is_compiled_for_vulkan_or_explained() {
    let readme = std::fs::read_to_string(vulkan_modules().join("README.md")).unwrap();
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "mlir") {
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            let compiled = vulkan_modules().join(format!("{name}.vmfb")).exists();
            assert!(
                compiled || readme.contains(&format!("`{name}`")),
                "{name}.mlir has no Vulkan module and fixtures/models/vulkan/README.md does not say why"
            );
        }
    }
}
