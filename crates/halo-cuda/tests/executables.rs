//! The `cuda-nvptx-fb` and `rocm-hsaco-fb` fixtures read without a GPU: every export matches what
//! the cases of the same source dispatch, every module is PTX text or an AMD code object, and
//! damaged files are refused with an error instead of a crash.

use halo_cuda::executable::{format, ExecutableSpec};
use halo_cuda::Vendor;
use std::path::{Path, PathBuf};

const VENDORS: [Vendor; 2] = [Vendor::Cuda, Vendor::Hip];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables")
}

/// Every fixture in `vendor`'s format, by executable name.
fn gpu_fixtures(vendor: Vendor) -> Vec<(String, Vec<u8>)> {
    let suffix = format!(".{}.fb", format(vendor));
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(&suffix))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            let name = name.split('.').next().unwrap().to_string();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// `(entry point, bindings, constants)` of every case flagfile of the `vendor` build of `name`.
fn cases(vendor: Vendor, name: &str) -> Vec<(u32, usize, usize)> {
    let dir = fixtures().join(format(vendor));
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if !file.starts_with(&format!("{name}.")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let value = |flag: &str| text.lines().filter(|l| l.starts_with(flag)).count();
        let entry_point = text
            .lines()
            .find_map(|l| l.strip_prefix("--entry_point="))
            .unwrap()
            .parse()
            .unwrap();
        cases.push((entry_point, value("--binding="), value("--constant=")));
    }
    cases
}

#[test]
fn every_fixture_declares_the_kernels_its_cases_dispatch() {
    for vendor in VENDORS {
        let fixtures = gpu_fixtures(vendor);
        assert!(fixtures.len() >= 8, "found {} {vendor:?} fixtures", fixtures.len());
        for (name, data) in &fixtures {
            let spec = ExecutableSpec::parse(data, vendor).unwrap_or_else(|e| panic!("{name}: {e}"));
            check_modules(vendor, name, &spec);
            let cases = cases(vendor, name);
            assert!(!cases.is_empty(), "{name} ({vendor:?}): no cases");
            for (entry_point, bindings, constants) in cases {
                let info = &spec.exports[entry_point as usize].info;
                let [x, y, z] = info.workgroup_size;
                assert!(x * y * z <= 1024, "{name}: block {x}x{y}x{z}");
                assert_eq!(
                    (info.binding_count as usize, info.constant_count as usize),
                    (bindings, constants),
                    "{name} ({vendor:?}): export {entry_point} ('{}')",
                    info.name
                );
            }
        }
    }
}

/// PTX modules define each kernel as an entry; code objects are ELF files naming it.
fn check_modules(vendor: Vendor, name: &str, spec: &ExecutableSpec) {
    assert!(!spec.modules.is_empty(), "{name}: no modules");
    for export in &spec.exports {
        let module = &spec.modules[export.module];
        let needle = match vendor {
            Vendor::Cuda => format!(".entry {}(", export.symbol),
            Vendor::Hip => {
                assert_eq!(&module[..4], b"\x7fELF", "{name}: not a code object");
                export.symbol.clone()
            }
        };
        assert!(
            module.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "{name} ({vendor:?}): kernel '{}' is not in its module",
            export.symbol
        );
    }
}

#[test]
fn damaged_executables_are_refused() {
    for vendor in VENDORS {
        let (_, good) = gpu_fixtures(vendor).into_iter().next().unwrap();
        let refused = |data: &[u8], what: &str| {
            let error = ExecutableSpec::parse(data, vendor).expect_err(what);
            assert!(error.to_string().contains("executable"), "{what}: {error}");
        };
        refused(&good[..10], "a truncated header");
        refused(&good[..good.len() / 2], "a truncated body");
        let mut magic = good.clone();
        magic[0] = b'X';
        refused(&magic, "a wrong magic");
        let mut version = good.clone();
        version[4] = 1;
        refused(&version, "another version");
        let mut identifier = good.clone();
        identifier[64 + 4] = b'X';
        refused(&identifier, "a wrong identifier");
    }
    let (_, cuda) = gpu_fixtures(Vendor::Cuda).into_iter().next().unwrap();
    let error = ExecutableSpec::parse(&cuda, Vendor::Hip).unwrap_err();
    assert!(error.to_string().contains("'HIP1'"), "{error}");
}

#[test]
fn no_single_byte_change_makes_parsing_panic() {
    // Every byte of the smallest fixture set to a few values: whatever parses must still be a
    // consistent description (exports naming existing modules).
    for vendor in VENDORS {
        let (name, good) = gpu_fixtures(vendor)
            .into_iter()
            .min_by_key(|(_, data)| data.len())
            .unwrap();
        let mut parsed = 0;
        for at in 0..good.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut data = good.clone();
                data[at] = value;
                if let Ok(spec) = ExecutableSpec::parse(&data, vendor) {
                    parsed += 1;
                    assert!(
                        spec.exports.iter().all(|e| e.module < spec.modules.len()),
                        "{name} with byte {at} = {value:#x}"
                    );
                }
            }
        }
        println!("{parsed} of {} mutants of {name} ({vendor:?}) parsed", good.len() * 5);
    }
}
