//! A systematic mutation campaign against the bytecode verifier and interpreter (a benchmark-like
//! tool, not a test): for every instruction of every function of the VM fixtures, each of the
//! 256 values in its opcode byte. Each mutant is loaded (verified, linked, initialized), and
//! when it loads, each exported function is called with zeros and with ones for its arguments
//! (null references); the initializer and each call are cancelled after a short time. A panic is a verifier gap: the run prints
//! the fixture, the byte and the value, and exits 1. Random byte flips (`scripts/mutate-modules`)
//! rarely land on an opcode; this tries them all.
//!
//! Usage: cargo run --release -p halo-vm --example opcode_sweep [-- [--every-byte] [FIXTURE_STEM ...]]
//! (`--every-byte`: every byte of the functions' bytecode, operands too; about eight times as many
//! runs).

use halo_vm::isa::decode::decode;
use halo_vm::isa::BLOCK_MARKER;
use halo_vm::{BytecodeModule, CancelToken, Context, Value};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one call may run before it is cancelled.
const CALL_TIME: Duration = Duration::from_millis(5);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vm")
}

/// The file offsets of every instruction's opcode byte in `file`, or with `every_byte` of every
/// byte of its functions' bytecode.
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
            // A block marker is one byte; an instruction may carry a prefix byte (an extension
            // set) before its opcode: both of its first two bytes are tried.
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

/// Arguments for a calling convention (`0ifr_i`): every primitive `fill`, every reference null;
/// `None` for a variadic one.
fn arguments(cconv: &str, fill: i32) -> Option<Vec<Value>> {
    let arguments = cconv.strip_prefix('0')?.split('_').next()?;
    if arguments == "v" {
        return Some(Vec::new());
    }
    arguments
        .chars()
        .map(|kind| match kind {
            'i' => Some(Value::I32(fill)),
            'I' => Some(Value::I64(fill.into())),
            'f' => Some(Value::F32(fill as f32)),
            'F' => Some(Value::F64(fill.into())),
            'r' => Some(Value::Ref(None)),
            _ => None,
        })
        .collect()
}

/// Loads `file` and calls its exports; a panic comes back as its message.
fn exercise(file: Vec<u8>, watchdog: &mpsc::Sender<(Instant, CancelToken)>) -> Option<String> {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let Ok(module) = BytecodeModule::from_bytes(file) else {
            return;
        };
        let module = Arc::new(module);
        let mut context = Context::new();
        let cancel = CancelToken::new();
        let _ = watchdog.send((Instant::now() + CALL_TIME, cancel.clone()));
        let Ok(instance) = context.add_bytecode_cancellable(module.clone(), &cancel) else {
            return;
        };
        for export in module.exports() {
            let Some(signature) = module.function_signature(export.internal_ordinal) else {
                continue;
            };
            for fill in [0, 1] {
                let Some(args) = signature.calling_convention.and_then(|c| arguments(c, fill)) else {
                    continue;
                };
                let cancel = CancelToken::new();
                let _ = watchdog.send((Instant::now() + CALL_TIME, cancel.clone()));
                let _ = instance.invoke_cancellable(export.internal_ordinal, &args, &cancel);
            }
        }
    }));
    outcome.err().map(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into())
    })
}

fn main() {
    let mut wanted: Vec<String> = std::env::args().skip(1).collect();
    let every_byte = wanted.iter().any(|arg| arg == "--every-byte");
    wanted.retain(|arg| arg != "--every-byte");
    // Names each mutant before it runs, so that one that never ends is known.
    let trace = std::env::var_os("SWEEP_TRACE").is_some();
    // Starts each fixture at this file offset, to rerun from a mutant a trace named.
    let first_position: usize = std::env::var("SWEEP_FROM")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let mut stems: Vec<String> = std::fs::read_dir(fixtures())
        .expect("fixtures/vm")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            (path.extension()? == "vmfb").then_some(stem)
        })
        .filter(|stem| wanted.is_empty() || wanted.contains(stem))
        .collect();
    stems.sort();
    // One thread cancels the calls that outlive CALL_TIME, in the order they started.
    let (watchdog, deadlines) = mpsc::channel::<(Instant, CancelToken)>();
    std::thread::spawn(move || {
        for (deadline, cancel) in deadlines {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            cancel.cancel();
        }
    });
    // Panics are counted here, not printed by the default hook for each.
    std::panic::set_hook(Box::new(|_| {}));
    let (mut runs, mut panics) = (0usize, 0usize);
    for stem in &stems {
        let file = std::fs::read(fixtures().join(format!("{stem}.vmfb"))).expect("a fixture");
        let positions = positions(&file, every_byte);
        for &position in positions.iter().filter(|&&p| p >= first_position) {
            for value in 0..=255u8 {
                if value == file[position] {
                    continue;
                }
                let mut mutant = file.clone();
                mutant[position] = value;
                runs += 1;
                if trace {
                    eprintln!("{stem}.vmfb byte {position}: {:#04x} -> {value:#04x}", file[position]);
                }
                if let Some(message) = exercise(mutant, &watchdog) {
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
