//! A mapped module file's pages leave the process's resident memory once the module is
//! initialized, and read back the same bytes afterwards; a module read into memory of its own
//! keeps its bytes. Residency is read from `/proc/self/smaps`, so these tests are Linux-only.

#![cfg(target_os = "linux")]

mod common;

use halo_runtime::{tensor, HostTensor, Instance, LoadMode, Session};
use halo_vm::module::BytecodeModule;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const FIXTURE: &str = "large_constants.vmfb";

/// A copy of the fixture under a path no other test maps, so residency is this test's alone.
struct PrivateCopy(PathBuf);

impl PrivateCopy {
    fn new(test: &str) -> Self {
        let source = common::module(FIXTURE);
        let path = std::env::temp_dir().join(format!("halo-residency-{}-{test}.vmfb", std::process::id()));
        std::fs::copy(source, &path).unwrap();
        PrivateCopy(path)
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Resident kB of this process's mappings of `path`.
fn resident_kb(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let wanted = path.to_str().unwrap();
    let mut in_file = false;
    let mut total = 0;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            in_file = fields.nth(4) == Some(wanted);
        } else if in_file && first == "Rss:" {
            total += fields.next().unwrap().parse::<u64>().unwrap();
        }
    }
    total
}

/// A sum of every byte, which touches every page.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().map(|&b| u64::from(b)).sum()
}

#[test]
fn released_file_pages_leave_residency_and_read_back_the_same() {
    let copy = PrivateCopy::new("bytes");
    let module = BytecodeModule::open(&copy.0, LoadMode::Map).unwrap();
    let before = checksum(module.bytes());
    let file_kb = module.bytes().len() as u64 / 1024;
    assert!(resident_kb(&copy.0) >= file_kb, "every page was read");
    module.bytes().release_resident_pages().unwrap();
    assert_eq!(resident_kb(&copy.0), 0);
    assert_eq!(checksum(module.bytes()), before);
    assert!(before > 0);
}

#[test]
fn release_keeps_a_preloaded_module_s_bytes() {
    let copy = PrivateCopy::new("preloaded");
    let module = BytecodeModule::open(&copy.0, LoadMode::Preload).unwrap();
    let before = checksum(module.bytes());
    module.bytes().release_resident_pages().unwrap();
    // Anonymous pages dropped would read back as zeros.
    assert_eq!(checksum(module.bytes()), before);
    assert_eq!(module.bytes()[..], std::fs::read(&copy.0).unwrap()[..]);
}

#[test]
fn initialized_module_leaves_its_file_pages_and_calls_still_read_its_constants() {
    let copy = PrivateCopy::new("session");
    let project = |mode: LoadMode| {
        let module = BytecodeModule::open(&copy.0, mode).unwrap();
        // As a loader that read the whole file would leave it.
        assert!(checksum(module.bytes()) > 0);
        let mut session = Session::new(&Instance::new(), &["local-sync"]).unwrap();
        session.load_module(Arc::new(module)).unwrap();
        let resident_after_init = resident_kb(&copy.0);
        let function = session.function("project").unwrap();
        let ones = session
            .tensor_input(&HostTensor::parse("1x512xf32=1").unwrap())
            .unwrap();
        let outputs = session.call(&function, &[ones]).unwrap();
        let result = tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap();
        (resident_after_init, result.bytes)
    };
    let (mapped_resident, mapped) = project(LoadMode::Map);
    assert_eq!(
        mapped_resident, 0,
        "the module's file pages stayed resident after its initializer"
    );
    let (_, preloaded) = project(LoadMode::Preload);
    assert_eq!(mapped, preloaded);
    assert!(mapped.iter().any(|&b| b != 0));
}
