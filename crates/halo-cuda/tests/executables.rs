//! The `cuda-nvptx-fb` fixtures read without a GPU: every export matches what the CPU build of the
//! same source declares, and damaged files are refused with an error instead of a crash.

use halo_cuda::executable::ExecutableSpec;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables")
}

/// Every CUDA fixture, by executable name.
fn cuda_fixtures() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".cuda-nvptx-fb.fb"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            let name = name.split('.').next().unwrap().to_string();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// `(entry point, bindings, constants)` of every case flagfile of the CUDA build of `name`.
fn cases(name: &str) -> Vec<(u32, usize, usize)> {
    let dir = fixtures().join("cuda-nvptx-fb");
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
    let fixtures = cuda_fixtures();
    assert!(fixtures.len() >= 8, "found {} CUDA fixtures", fixtures.len());
    for (name, data) in &fixtures {
        let spec = ExecutableSpec::parse(data).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!spec.modules.is_empty(), "{name}: no PTX modules");
        for module in &spec.modules {
            assert!(module.contains(".entry"), "{name}: a module has no kernel entry");
        }
        for export in &spec.exports {
            let [x, y, z] = export.info.workgroup_size;
            assert!(x * y * z <= 1024, "{name}: block {x}x{y}x{z}");
            assert!(
                spec.modules[export.module].contains(&format!(".entry {}(", export.symbol)),
                "{name}: kernel '{}' is not in its module",
                export.symbol
            );
        }
        let cases = cases(name);
        assert!(!cases.is_empty(), "{name}: no cases");
        for (entry_point, bindings, constants) in cases {
            let info = &spec.exports[entry_point as usize].info;
            assert_eq!(
                (info.binding_count as usize, info.constant_count as usize),
                (bindings, constants),
                "{name}: export {entry_point} ('{}')",
                info.name
            );
        }
    }
}

#[test]
fn damaged_executables_are_refused() {
    let (_, good) = cuda_fixtures().into_iter().next().unwrap();
    let refused = |data: &[u8], what: &str| {
        let error = ExecutableSpec::parse(data).expect_err(what);
        assert!(error.to_string().contains("CUDA executable"), "{what}: {error}");
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

#[test]
fn no_single_byte_change_makes_parsing_panic() {
    // Every byte of the smallest fixture set to a few values: whatever parses must still be a
    // consistent description (exports naming existing modules).
    let (name, good) = cuda_fixtures().into_iter().min_by_key(|(_, data)| data.len()).unwrap();
    let mut parsed = 0;
    for at in 0..good.len() {
        for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut data = good.clone();
            data[at] = value;
            if let Ok(spec) = ExecutableSpec::parse(&data) {
                parsed += 1;
                assert!(
                    spec.exports.iter().all(|e| e.module < spec.modules.len()),
                    "{name} with byte {at} = {value:#x}"
                );
            }
        }
    }
    println!("{parsed} of {} mutants of {name} parsed", good.len() * 5);
}
