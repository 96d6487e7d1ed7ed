//! The translator on the SPIR-V that iree-compile 3.13 emitted for the repository's Vulkan
//! fixtures: what translates builds on OpenCL, what does not names what it lacks, and kernels run
//! on OpenCL compute what the SPIR-V says.

mod common;

use common::{fixture_modules, fixtures, spirv_modules, OpenCl, FIXTURE_SUBGROUP_SIZE};
use halo_hal::StatusCode;
use halo_spirv_opencl::{translate, Options};
use std::collections::BTreeMap;

#[test]
fn every_fixture_shader_translates_and_builds_or_names_what_it_lacks() {
    let opencl = OpenCl::first("every_fixture_shader_translates_and_builds_or_names_what_it_lacks");
    // Without a device, translate as for one without extensions.
    let options = opencl.as_ref().map(OpenCl::options).unwrap_or(Options {
        subgroup_size: FIXTURE_SUBGROUP_SIZE,
        ..Options::default()
    });
    let modules = fixture_modules();
    assert!(
        modules.len() > 100,
        "found only {} SPIR-V modules in the fixtures",
        modules.len()
    );
    let mut translated = 0;
    let mut with_builtins = 0;
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    for (file, words) in &modules {
        match translate(words, &options) {
            Ok(translation) => {
                translated += 1;
                with_builtins += usize::from(translation.source.contains("intel_reqd_sub_group_size"));
                // Zero-length arrays are a GNU extension some OpenCL compilers refuse (Intel's).
                assert!(
                    !translation
                        .source
                        .lines()
                        .any(|line| line.starts_with("typedef") && line.contains("[0];")),
                    "{file}: the translation declares a zero-length array:\n{}",
                    translation.source
                );
                if let Some(opencl) = &opencl {
                    if let Err(log) = opencl.build(&translation) {
                        panic!("{file}: the translation does not build:\n{log}\n{}", translation.source);
                    }
                }
            }
            Err(error) => {
                assert_eq!(error.code(), StatusCode::Unimplemented, "{file}: {error}");
                *refused.entry(error.message().to_string()).or_default() += 1;
            }
        }
    }
    println!(
        "translated {translated} of {} fixture modules ({with_builtins} with subgroup built-ins); refused: \
         {refused:#?}",
        modules.len()
    );
    // The fixtures' reductions use subgroups: where the device has the built-ins, they are used.
    if options.subgroups == halo_spirv_opencl::Subgroups::Native {
        assert!(with_builtins > 0, "no translation used the subgroup built-ins");
    } else {
        assert_eq!(with_builtins, 0);
    }
    assert!(refused.is_empty(), "refused: {refused:#?}");
    assert_eq!(translated, modules.len());
}

/// The `bits` kernel of elementwise_i32: shifts, xor, arithmetic shift right, wrapping
/// multiplication, one loop with a phi.
#[test]
fn integer_bit_operations_compute_what_the_spirv_says() {
    let Some(opencl) = OpenCl::first("integer_bit_operations_compute_what_the_spirv_says") else {
        return;
    };
    let bytes = std::fs::read(fixtures().join("executables/elementwise_i32.vulkan-spirv-fb.fb")).unwrap();
    let module = spirv_modules(&bytes).remove(0);
    let translation = translate(&module, &opencl.options()).unwrap();
    assert_eq!(translation.kernels[0].entry_point, "bits");
    let a: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(0x9e37_79b9) ^ (i << 3)).collect();
    let b: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(0x85eb_ca6b).rotate_left(i)).collect();
    let to_bytes = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut buffers = vec![to_bytes(&a), to_bytes(&b), vec![0; 256]];
    opencl.run(&translation, 0, &mut buffers, &[], [4, 1, 1]);
    for i in 0..64 {
        let (x, y) = (a[i], b[i]);
        let expected = ((x ^ y) << (y & 7))
            .wrapping_add(((x as i32) >> 1) as u32)
            .wrapping_sub(x.wrapping_mul(y))
            .wrapping_add(x >> 28);
        let got = u32::from_le_bytes(buffers[2][4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(got, expected, "element {i}: a={x:#x} b={y:#x}");
    }
}

#[test]
fn malformed_modules_are_refused_naming_the_problem() {
    let options = Options::default();
    let error = translate(&[], &options).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    assert!(error.message().contains("magic"), "{error}");
    let (_, words) = fixture_modules().remove(0);
    let error = translate(&words[..words.len() / 2], &options).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// Any module with a few words changed is translated or refused with an error, never a panic
    /// or a hang.
    #[test]
    fn mutated_modules_never_panic(
        module in 0usize..137,
        changes in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u32::ANY), 1..4),
    ) {
        let modules = mutation_sources();
        let mut words = modules[module % modules.len()].clone();
        for (at, value) in changes {
            let at = at % words.len();
            words[at] = match value % 4 {
                0 => value,
                1 => value % 64,
                2 => words[at] ^ (1 << (value % 32)),
                _ => u32::MAX - value % 4,
            };
        }
        let _ = translate(&words, &Options::default());
    }
}

/// The fixture modules, read once for the property test.
fn mutation_sources() -> &'static [Vec<u32>] {
    static MODULES: std::sync::OnceLock<Vec<Vec<u32>>> = std::sync::OnceLock::new();
    MODULES.get_or_init(|| fixture_modules().into_iter().map(|(_, words)| words).collect())
}
