//! Loads arbitrary bytes as a `.vmfb` on a `local-sync` device with the `hal` module, and when it
//! loads (verification included), calls every export with synthesized arguments: zero scalars
//! and a small tensor for every ref. Each invocation may make a bounded number of interpreter
//! steps, so programs that loop for ever end with RESOURCE_EXHAUSTED. Any outcome but a crash,
//! hang or unbounded allocation is fine.
//!
//! Inputs whose embedded kernel libraries (ELF files) are not byte for byte one of the fixture
//! modules' are skipped: changed machine code crashes as any native code does, and says nothing
//! about halo. `HALO_FUZZ_MUTATE_KERNELS=1` runs them anyway.
#![no_main]

use halo_runtime::{HostTensor, Instance, Session, Value};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Interpreter steps one invocation may make.
const STEP_LIMIT: u64 = 100_000;

/// Byte ranges of the ELF files embedded in a module: from each `\x7fELF` to the end of its
/// section header table.
fn elf_ranges(bytes: &[u8]) -> Vec<Range<usize>> {
    let word = |at: usize, len: usize| -> Option<u64> {
        let field = bytes.get(at..at + len)?;
        Some(field.iter().rev().fold(0u64, |value, &b| value << 8 | u64::from(b)))
    };
    (0..bytes.len().saturating_sub(64))
        .filter(|&at| &bytes[at..at + 4] == b"\x7fELF")
        .filter_map(|at| {
            let table = word(at + 0x3a, 2)?.checked_mul(word(at + 0x3c, 2)?)?;
            let end = word(at + 0x28, 8)?.checked_add(table)?;
            Some(at..(at as u64).saturating_add(end).min(bytes.len() as u64) as usize)
        })
        .collect()
}

fn digest(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// Digests of every kernel library in the fixture modules (the seeds of the corpus).
fn fixture_kernels() -> &'static HashSet<u64> {
    static KERNELS: OnceLock<HashSet<u64>> = OnceLock::new();
    KERNELS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures");
        let mut kernels = HashSet::new();
        let mut pending = vec![root];
        while let Some(dir) = pending.pop() {
            for path in std::fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.path()) {
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "vmfb") {
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    kernels.extend(elf_ranges(&bytes).into_iter().map(|r| digest(&bytes[r])));
                }
            }
        }
        eprintln!("execute: {} kernel libraries of the fixture modules are run", kernels.len());
        kernels
    })
}

/// Whether every kernel library in `data` is one of the fixtures' own.
fn kernels_unchanged(data: &[u8]) -> bool {
    static MUTATE_KERNELS: OnceLock<bool> = OnceLock::new();
    if *MUTATE_KERNELS.get_or_init(|| std::env::var_os("HALO_FUZZ_MUTATE_KERNELS").is_some_and(|v| v == "1")) {
        return true;
    }
    let known = fixture_kernels();
    elf_ranges(data).into_iter().all(|r| known.contains(&digest(&data[r])))
}

fuzz_target!(|data: &[u8]| {
    if !kernels_unchanged(data) {
        return;
    }
    let Ok(module) = halo_vm::BytecodeModule::from_bytes(data.to_vec()) else {
        return;
    };
    let module = Arc::new(module);
    let Ok(mut session) = Session::new(&Instance::new(), &["local-sync"]) else {
        return;
    };
    session.context_mut().limit_steps(STEP_LIMIT);
    if session.load_module(module.clone()).is_err() {
        return;
    }
    let names: Vec<String> = module.exports().iter().map(|e| e.local_name.to_string()).collect();
    for name in names {
        let Ok(function) = session.function(&name) else {
            continue;
        };
        let Ok(tensor) = HostTensor::parse("4xf32=1") else {
            return;
        };
        let inputs: Option<Vec<Value>> = function
            .argument_kinds()
            .into_iter()
            .map(|kind| match kind {
                'i' => Some(Value::I32(0)),
                'I' => Some(Value::I64(0)),
                'f' => Some(Value::F32(0.0)),
                'F' => Some(Value::F64(0.0)),
                _ => session.tensor_input(&tensor).ok(),
            })
            .collect();
        if let Some(inputs) = inputs {
            let _ = session.call(&function, &inputs);
        }
    }
});
