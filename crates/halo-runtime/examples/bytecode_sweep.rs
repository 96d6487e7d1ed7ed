//! A systematic mutation campaign against programs that call the `hal` module (a campaign, not a
//! test): for every instruction of the model fixtures' functions, values in its opcode byte
//! (every value, or `--values N` of them picked by seed). Each mutant is loaded on `local-sync`
//! (verified, linked, initialized) and its fixture case called with the case's inputs, the load
//! and the call each cancelled after a short time. A panic is a gap in the verifier or in a
//! `hal` function's checks: the run prints the fixture, the byte and the value, and exits 1.
//! Cases whose inputs come from files or are scalars are left out. The VM-only counterpart is
//! `halo-vm`'s `opcode_sweep` example.
//!
//! Usage: cargo run --release -p halo-runtime --example bytecode_sweep [-- [--every-byte]
//! [--values N] [--seed S] [FIXTURE_STEM ...]] (`--every-byte`: every byte of the functions'
//! bytecode, operands too: registers, ordinals, constants).

use halo_hal::HostTensor;
use halo_runtime::{CancelToken, Instance, Session, Value};
use halo_vm::isa::decode::decode;
use halo_vm::isa::BLOCK_MARKER;
use halo_vm::BytecodeModule;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a load or a call may run before it is cancelled.
const CALL_TIME: Duration = Duration::from_millis(50);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// A fixture case: the function and its inline tensor inputs.
struct Case {
    function: String,
    inputs: Vec<HostTensor>,
}

/// The first case of `stem` whose inputs are all inline tensors (`4xf32=1,2,3,4`).
fn first_case(stem: &str) -> Option<Case> {
    let mut flagfiles: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(&format!("{stem}.")) && name.ends_with(".flags")
        })
        .collect();
    flagfiles.sort();
    flagfiles.iter().find_map(|path| {
        let text = std::fs::read_to_string(path).ok()?;
        let mut case = Case {
            function: String::new(),
            inputs: Vec::new(),
        };
        for line in text.lines() {
            if let Some(function) = line.strip_prefix("--function=") {
                case.function = function.to_string();
            } else if let Some(input) = line.strip_prefix("--input=") {
                if input.contains('@') || !input.contains('x') {
                    return None;
                }
                case.inputs.push(HostTensor::parse(input).ok()?);
            }
        }
        (!case.function.is_empty()).then_some(case)
    })
}

/// The file offsets of every instruction's first two bytes (a prefix, or the opcode and what
/// follows it) in `file`, or with `every_byte` of every byte of its functions' bytecode.
fn positions(file: &[u8], every_byte: bool) -> Vec<usize> {
    let Ok(module) = BytecodeModule::from_bytes(file.to_vec()) else {
        return Vec::new();
    };
    let base = module.bytes().as_slice().as_ptr() as usize;
    let mut positions = Vec::new();
    for ordinal in 0..module.function_count() {
        let Some(code) = module.function_bytecode(ordinal) else {
            continue;
        };
        let start = code.as_ptr() as usize - base;
        if every_byte {
            positions.extend(start..start + code.len());
            continue;
        }
        let mut pc = 0;
        while pc < code.len() {
            positions.extend(
                [start + pc, start + pc + 1]
                    .into_iter()
                    .filter(|&p| p < start + code.len()),
            );
            if code[pc] == BLOCK_MARKER {
                pc += 1;
                continue;
            }
            match decode(code, pc) {
                Ok(decoded) if decoded.next_pc > pc => pc = decoded.next_pc,
                _ => break,
            }
        }
    }
    positions.sort_unstable();
    positions.dedup();
    positions
}

/// Loads `file` on `local-sync` and runs `case`: whether the call succeeded, or a panic's
/// message.
fn exercise(
    instance: &Instance,
    file: Vec<u8>,
    case: &Case,
    watchdog: &mpsc::Sender<(Instant, CancelToken)>,
) -> Result<bool, String> {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let Ok(module) = BytecodeModule::from_bytes(file) else {
            return false;
        };
        let Ok(mut session) = Session::new(instance, &["local-sync"]) else {
            return false;
        };
        let cancel = CancelToken::new();
        let _ = watchdog.send((Instant::now() + CALL_TIME, cancel.clone()));
        if session.load_module_cancellable(Arc::new(module), &cancel).is_err() {
            return false;
        }
        let Ok(function) = session.function(&case.function) else {
            return false;
        };
        let Ok(inputs) = case
            .inputs
            .iter()
            .map(|tensor| session.tensor_input(tensor))
            .collect::<halo_hal::Result<Vec<Value>>>()
        else {
            return false;
        };
        let cancel = CancelToken::new();
        let _ = watchdog.send((Instant::now() + CALL_TIME, cancel.clone()));
        session.call_cancellable(&function, &inputs, &cancel).is_ok()
    }));
    outcome.map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into())
    })
}

/// A small seeded generator for picking values (xorshift).
struct Picker(u64);

impl Picker {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn main() {
    let mut words = std::env::args().skip(1);
    let (mut values_per_byte, mut seed, mut wanted) = (256usize, 1u64, Vec::new());
    let mut every_byte = false;
    while let Some(word) = words.next() {
        match word.as_str() {
            "--every-byte" => every_byte = true,
            "--values" => values_per_byte = words.next().and_then(|v| v.parse().ok()).expect("--values N"),
            "--seed" => seed = words.next().and_then(|v| v.parse().ok()).expect("--seed S"),
            _ => wanted.push(word),
        }
    }
    let mut stems: Vec<String> = std::fs::read_dir(fixtures())
        .expect("fixtures/models")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            (path.extension()? == "vmfb").then_some(stem)
        })
        .filter(|stem| wanted.is_empty() || wanted.contains(stem))
        .collect();
    stems.sort();
    let (watchdog, deadlines) = mpsc::channel::<(Instant, CancelToken)>();
    std::thread::spawn(move || {
        for (deadline, cancel) in deadlines {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            cancel.cancel();
        }
    });
    std::panic::set_hook(Box::new(|_| {}));
    let instance = Instance::new();
    let mut picker = Picker(seed.max(1));
    let (mut runs, mut panics) = (0usize, 0usize);
    for stem in &stems {
        let Some(case) = first_case(stem) else {
            eprintln!("{stem}: no case with inline inputs; left out");
            continue;
        };
        let file = std::fs::read(fixtures().join(format!("{stem}.vmfb"))).expect("a fixture");
        // The case must run as it is, or its mutants would stop where it does.
        if exercise(&instance, file.clone(), &case, &watchdog) != Ok(true) {
            eprintln!("{stem}: the case '{}' does not run unchanged; left out", case.function);
            continue;
        }
        let positions = positions(&file, every_byte);
        for &position in &positions {
            let mut values: Vec<u8> = (0..=255u8).filter(|&v| v != file[position]).collect();
            while values.len() > values_per_byte {
                values.swap_remove(picker.next() as usize % values.len());
            }
            for value in values {
                let mut mutant = file.clone();
                mutant[position] = value;
                runs += 1;
                if let Err(message) = exercise(&instance, mutant, &case, &watchdog) {
                    panics += 1;
                    println!(
                        "PANIC {stem}.vmfb byte {position}: {:#04x} -> {value:#04x}: {message}",
                        file[position]
                    );
                }
            }
        }
        eprintln!(
            "{stem}: {} bytes tried, {runs} runs so far, {panics} panics",
            positions.len()
        );
    }
    println!("{runs} runs, {panics} panics");
    std::process::exit(i32::from(panics > 0));
}
