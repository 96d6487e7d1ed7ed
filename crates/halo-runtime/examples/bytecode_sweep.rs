//! A systematic mutation campaign against the bytecode verifier, the interpreter and the `hal`
//! module's checks (a campaign, not a test): for every instruction of every function of the
//! fixtures, values in its opcode byte (every value, or `--values N` of them picked by seed;
//! `--every-byte`: in every byte of the bytecode, operands too: registers, ordinals, constants).
//!
//! Each mutant is loaded on `local-sync` (verified, linked, initialized) and called: a model
//! fixture (`fixtures/models`, programs that call the `hal` module) with its first case whose
//! inputs are all tensors, which must run unchanged; a VM fixture (`--vm`, `fixtures/vm`)
//! through every export, with zeros and with ones for its arguments (null references). Loads
//! and calls are cancelled after a short time (a mutant may loop for ever). A panic is a gap:
//! the run prints the fixture, the byte and the value, and exits 1.
//!
//! Usage: cargo run --release -p halo-runtime --example bytecode_sweep [-- [--vm]
//! [--every-byte] [--values N] [--seed S] [--device URI --modules vulkan] [--call-ms N]
//! [FIXTURE_STEM ...]]; `SWEEP_TRACE=1` names each mutant before it runs, `SWEEP_FROM=OFFSET`
//! starts each fixture at that file offset. `--device` runs the mutants on another device (a new
//! one for each), and `--modules` takes the model fixtures' builds for it from that folder of
//! `fixtures/models` (`--device vulkan --modules vulkan`: the Vulkan programs on lavapipe), their
//! cases unchanged. `--call-ms` sets how long a load or a call runs before it is cancelled
//! (10 ms; programs with large constants load slower on lavapipe).

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

/// How long a load or a call may run before it is cancelled, unless `--call-ms` says otherwise.
const CALL_TIME: Duration = Duration::from_millis(10);

/// What each mutant of a fixture is asked to do once loaded.
enum Calls {
    /// A model fixture's case: the function and its inputs.
    Case { function: String, inputs: Vec<HostTensor> },
    /// A VM fixture: every export, with zeros and with ones.
    EveryExport,
}

/// The first case of model fixture `stem` whose inputs are all tensors (inline, `4xf32=1,2`, or
/// `.npy` files).
fn first_case(folder: &Path, stem: &str) -> Option<Calls> {
    let mut flagfiles: Vec<PathBuf> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(&format!("{stem}.")) && name.ends_with(".flags")
        })
        .collect();
    flagfiles.sort();
    flagfiles.iter().find_map(|path| {
        let (mut function, mut inputs) = (String::new(), Vec::new());
        for line in std::fs::read_to_string(path).ok()?.lines() {
            if let Some(name) = line.strip_prefix("--function=") {
                function = name.to_string();
            } else if let Some(input) = line.strip_prefix("--input=") {
                let tensor = match input.strip_prefix('@') {
                    Some(file) => halo_runtime::npy::read(&folder.join(file)).ok()?,
                    // Scalars need the function's kinds; such cases are left out.
                    None if !input.contains('x') => return None,
                    None => HostTensor::parse(input).ok()?,
                };
                inputs.push(tensor);
            }
        }
        (!function.is_empty()).then_some(Calls::Case { function, inputs })
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

/// Cancels each token it is handed once its time is up, in the order they come.
struct Watchdog {
    deadlines: mpsc::Sender<(Instant, CancelToken)>,
    call_time: Duration,
}

impl Watchdog {
    fn start(call_time: Duration) -> Watchdog {
        let (sender, deadlines) = mpsc::channel::<(Instant, CancelToken)>();
        std::thread::spawn(move || {
            for (deadline, cancel) in deadlines {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                cancel.cancel();
            }
        });
        Watchdog {
            deadlines: sender,
            call_time,
        }
    }

    /// A token cancelled the call time from now.
    fn token(&self) -> CancelToken {
        let cancel = CancelToken::new();
        let _ = self.deadlines.send((Instant::now() + self.call_time, cancel.clone()));
        cancel
    }
}

/// Loads `file` on `local-sync` and makes its `calls`: whether every call succeeded, or a
/// panic's message.
fn exercise(
    instance: &Instance,
    device: &str,
    file: Vec<u8>,
    calls: &Calls,
    watchdog: &Watchdog,
) -> Result<bool, String> {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let Ok(module) = BytecodeModule::from_bytes(file) else {
            return false;
        };
        let exports = module.public_functions();
        let Ok(mut session) = Session::new(instance, &[device]) else {
            return false;
        };
        if session
            .load_module_cancellable(Arc::new(module), &watchdog.token())
            .is_err()
        {
            return false;
        }
        match calls {
            Calls::Case { function, inputs } => {
                let Ok(function) = session.function(function) else {
                    return false;
                };
                let inputs: halo_hal::Result<Vec<Value>> = inputs.iter().map(|t| session.tensor_input(t)).collect();
                inputs.is_ok_and(|inputs| session.call_cancellable(&function, &inputs, &watchdog.token()).is_ok())
            }
            Calls::EveryExport => {
                let mut all_ok = true;
                for name in exports {
                    let Ok(function) = session.function(&name) else {
                        continue;
                    };
                    for fill in [0, 1] {
                        if let Some(args) = arguments(function.calling_convention(), fill) {
                            all_ok &= session.call_cancellable(&function, &args, &watchdog.token()).is_ok();
                        }
                    }
                }
                all_ok
            }
        }
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
    let (mut vm, mut every_byte) = (false, false);
    let (mut device, mut builds, mut call_time) = ("local-sync".to_string(), None, CALL_TIME);
    while let Some(word) = words.next() {
        match word.as_str() {
            "--vm" => vm = true,
            "--every-byte" => every_byte = true,
            "--values" => values_per_byte = words.next().and_then(|v| v.parse().ok()).expect("--values N"),
            "--seed" => seed = words.next().and_then(|v| v.parse().ok()).expect("--seed S"),
            "--device" => device = words.next().expect("--device URI"),
            "--modules" => builds = Some(words.next().expect("--modules FOLDER")),
            "--call-ms" => {
                let millis = words.next().and_then(|v| v.parse().ok()).expect("--call-ms N");
                call_time = Duration::from_millis(millis);
            }
            _ => wanted.push(word),
        }
    }
    let trace = std::env::var_os("SWEEP_TRACE").is_some();
    let first_position: usize = std::env::var("SWEEP_FROM")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(if vm { "vm" } else { "models" });
    let modules = match &builds {
        Some(builds) => folder.join(builds),
        None => folder.clone(),
    };
    let mut stems: Vec<String> = std::fs::read_dir(&modules)
        .expect("the fixtures")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            (path.extension()? == "vmfb").then_some(stem)
        })
        // kernel_loop's running time is an input: a mutant that raises it runs its kernel on
        // this thread (local-sync), where nothing stops it, so it is swept only when named.
        .filter(|stem| wanted.contains(stem) || (wanted.is_empty() && !stem.starts_with("kernel_loop")))
        .collect();
    stems.sort();
    let watchdog = Watchdog::start(call_time);
    // Panics are counted here, not printed by the default hook for each.
    std::panic::set_hook(Box::new(|_| {}));
    let instance = Instance::new();
    let mut picker = Picker(seed.max(1));
    let (mut runs, mut panics) = (0usize, 0usize);
    for stem in &stems {
        let calls = if vm {
            Some(Calls::EveryExport)
        } else {
            first_case(&folder, stem)
        };
        let Some(calls) = calls else {
            eprintln!("{stem}: no case with tensor inputs only; left out");
            continue;
        };
        let file = std::fs::read(modules.join(format!("{stem}.vmfb"))).expect("a fixture");
        // A model's case must run as it is, or its mutants would stop where it does.
        if !vm && exercise(&instance, &device, file.clone(), &calls, &watchdog) != Ok(true) {
            eprintln!("{stem}: its case does not run unchanged; left out");
            continue;
        }
        let positions = positions(&file, every_byte);
        for &position in positions.iter().filter(|&&p| p >= first_position) {
            let mut values: Vec<u8> = (0..=255u8).filter(|&v| v != file[position]).collect();
            while values.len() > values_per_byte {
                values.swap_remove(picker.next() as usize % values.len());
            }
            for value in values {
                let mut mutant = file.clone();
                mutant[position] = value;
                runs += 1;
                if trace {
                    eprintln!("{stem}.vmfb byte {position}: {:#04x} -> {value:#04x}", file[position]);
                }
                if let Err(message) = exercise(&instance, &device, mutant, &calls, &watchdog) {
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
