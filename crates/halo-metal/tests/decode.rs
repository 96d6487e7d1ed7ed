//! Decoding the `metal-msl-fb` executables iree-compile 3.13 wrote for the fixtures, and damaged
//! ones: every error names what is wrong, nothing panics.

use halo_hal::StatusCode;
use halo_metal::executable_def::schema::{
    self, BindingBits, ExecutableDefArgs, LibraryDefArgs, MSLSourceDefArgs, PipelineDefArgs, ThreadgroupSize,
};
use halo_metal::executable_def::{decode, LanguageVersion};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables")
}

/// Every `<exe>.metal-msl-fb.fb`, by executable name (read once).
fn metal_fixtures() -> &'static [(String, Vec<u8>)] {
    static FOUND: std::sync::OnceLock<Vec<(String, Vec<u8>)>> = std::sync::OnceLock::new();
    FOUND.get_or_init(read_metal_fixtures)
}

fn read_metal_fixtures() -> Vec<(String, Vec<u8>)> {
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path
                .file_name()?
                .to_str()?
                .strip_suffix(".metal-msl-fb.fb")?
                .to_string();
            Some((name, std::fs::read(&path).unwrap()))
        })
        .collect();
    found.sort();
    found
}

#[test]
fn every_fixture_decodes_with_the_exports_of_its_vulkan_build() {
    let fixtures_found = metal_fixtures();
    assert!(
        fixtures_found.len() >= 8,
        "found {} Metal fixtures",
        fixtures_found.len()
    );
    for (name, bytes) in fixtures_found {
        let metal = decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let vulkan = std::fs::read(fixtures().join(format!("{name}.vulkan-spirv-fb.fb"))).unwrap();
        let vulkan = halo_spirv_fb::decode(&vulkan).unwrap();
        assert_eq!(metal.exports.len(), vulkan.exports.len(), "{name}");
        for (m, v) in metal.exports.iter().zip(&vulkan.exports) {
            assert_eq!(m.name, v.name, "{name}");
            assert_eq!(m.constant_count, v.constant_count, "{name}: {}", m.name);
            assert_eq!(m.binding_count(), v.bindings.len(), "{name}: {}", m.name);
        }
    }
}

/// What the driver will rely on in the MSL: each entry point is a kernel of its library, and its
/// argument buffer has one `[[id(n)]]` member per HAL binding.
#[test]
fn each_entry_point_is_a_kernel_of_its_library_with_one_argument_per_binding() {
    for (name, bytes) in metal_fixtures() {
        let executable = decode(bytes).unwrap();
        for export in &executable.exports {
            let library = &executable.libraries[export.library];
            assert_eq!(
                library.language_version,
                LanguageVersion::from_raw(0x3_0000),
                "{name}: MSL 3.0"
            );
            let source = library.source.as_deref().expect("MSL source");
            assert!(
                source.contains(&format!("kernel void {}(", export.entry_point)),
                "{name}: no kernel '{}' in\n{source}",
                export.entry_point
            );
            for binding in 0..export.binding_count() {
                assert!(
                    source.contains(&format!("[[id({binding})]]")),
                    "{name}: binding {binding}"
                );
            }
            assert!(
                !source.contains(&format!("[[id({})]]", export.binding_count())),
                "{name}"
            );
            let threads: u32 = export.threadgroup_size.iter().product();
            assert!((1..=1024).contains(&threads), "{name}: {:?}", export.threadgroup_size);
        }
    }
}

/// One pipeline of a hand-built executable.
struct Pipeline {
    library: u32,
    entry_point: &'static str,
    threadgroup_size: Option<[u32; 3]>,
    bindings: Vec<BindingBits>,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline {
            library: 0,
            entry_point: "main0",
            threadgroup_size: Some([64, 1, 1]),
            bindings: vec![BindingBits::IMMUTABLE, BindingBits::empty()],
        }
    }
}

/// An executable with `pipelines` and libraries of `sources` (`None`: a library with no code),
/// behind the 64-byte header.
fn build(pipelines: &[Pipeline], sources: &[Option<&str>]) -> Vec<u8> {
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let libraries: Vec<_> = sources
        .iter()
        .map(|source| {
            let source = source.map(|code| {
                let code = fbb.create_string(code);
                schema::MSLSourceDef::create(
                    &mut fbb,
                    &MSLSourceDefArgs {
                        version: 0x3_0000,
                        code: Some(code),
                    },
                )
            });
            schema::LibraryDef::create(
                &mut fbb,
                &LibraryDefArgs {
                    source,
                    ..Default::default()
                },
            )
        })
        .collect();
    let pipelines: Vec<_> = pipelines
        .iter()
        .map(|p| {
            let entry_point = fbb.create_string(p.entry_point);
            let binding_flags = fbb.create_vector(&p.bindings);
            let size = p.threadgroup_size.map(|[x, y, z]| ThreadgroupSize::new(x, y, z));
            schema::PipelineDef::create(
                &mut fbb,
                &PipelineDefArgs {
                    library_ordinal: p.library,
                    entry_point: Some(entry_point),
                    threadgroup_size: size.as_ref(),
                    binding_flags: Some(binding_flags),
                    ..Default::default()
                },
            )
        })
        .collect();
    let (pipelines, libraries) = (fbb.create_vector(&pipelines), fbb.create_vector(&libraries));
    let root = schema::ExecutableDef::create(
        &mut fbb,
        &ExecutableDefArgs {
            pipelines: Some(pipelines),
            libraries: Some(libraries),
            ..Default::default()
        },
    );
    fbb.finish(root, Some("MTL1"));
    let body = fbb.finished_data();
    let mut bytes = Vec::from(*b"MTL1");
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.resize(64, 0);
    bytes.extend_from_slice(body);
    bytes
}

#[test]
fn a_hand_built_executable_reads_back_as_built() {
    let executable = decode(&build(&[Pipeline::default()], &[Some("kernel void main0() {}")])).unwrap();
    let export = &executable.exports[0];
    assert_eq!((export.name.as_str(), export.entry_point.as_str()), ("main0", "main0"));
    assert_eq!(export.threadgroup_size, [64, 1, 1]);
    assert_eq!(export.read_only_bindings, [true, false]);
}

/// Pipelines, library sources, and what decoding them must say.
type Damaged = (Vec<Pipeline>, Vec<Option<&'static str>>, &'static str);

#[test]
fn damaged_executables_are_refused_naming_the_part_at_fault() {
    let source = Some("kernel void main0() {}");
    let cases: [Damaged; 7] = [
        (vec![], vec![source], "declares no pipelines"),
        (
            vec![Pipeline {
                library: 1,
                ..Default::default()
            }],
            vec![source],
            "'main0' names library 1 of 1; while reading export 0",
        ),
        (
            vec![Pipeline {
                threadgroup_size: None,
                ..Default::default()
            }],
            vec![source],
            "'main0' has no threadgroup size",
        ),
        (
            vec![Pipeline {
                threadgroup_size: Some([0, 1, 1]),
                ..Default::default()
            }],
            vec![source],
            "threadgroups of [0, 1, 1] threads (0)",
        ),
        (
            vec![Pipeline {
                threadgroup_size: Some([32, 32, 2]),
                ..Default::default()
            }],
            vec![source],
            "threadgroups of [32, 32, 2] threads (2048); a threadgroup holds 1 to 1024",
        ),
        (
            vec![Pipeline {
                threadgroup_size: Some([u32::MAX; 3]),
                ..Default::default()
            }],
            vec![source],
            "(more than 2^64); a threadgroup holds 1 to 1024",
        ),
        (
            vec![Pipeline::default()],
            vec![None],
            "library holds neither MSL source nor a metallib; while reading library 0",
        ),
    ];
    for (pipelines, sources, says) in cases {
        let error = decode(&build(&pipelines, &sources)).unwrap_err();
        assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
        assert!(error.to_string().contains(says), "expected '{says}' in: {error}");
    }
}

#[test]
fn every_truncation_and_a_wrong_header_are_errors() {
    let (_, bytes) = &metal_fixtures()[0];
    for len in 0..bytes.len() {
        assert!(decode(&bytes[..len]).is_err(), "{len} bytes decoded");
    }
    let mut other = bytes.clone();
    other[..4].copy_from_slice(b"VKE1");
    assert!(decode(&other)
        .unwrap_err()
        .to_string()
        .contains("not a Metal executable"));
    let mut newer = bytes.clone();
    newer[4] = 1;
    assert_eq!(decode(&newer).unwrap_err().code(), StatusCode::Incompatible);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Damage anywhere ends in Ok or an error, never a panic.
    #[test]
    fn damaged_bytes_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        for (_, original) in metal_fixtures() {
            let mut bytes = original.clone();
            for &(at, value) in &flips {
                let at = at % bytes.len();
                bytes[at] = value;
            }
            let _ = decode(&bytes);
        }
    }
}
