//! A seeded mutation campaign through the command line: fixture modules with a few bytes changed
//! run through `halo run-module` on both CPU drivers. Whatever a mutant does, halo must end in a
//! result or an error message: never a panic, an abort, or death by a signal. Bytes of the
//! embedded kernel libraries (ELF files) are left alone: changed machine code that faults ends in
//! an error (see the last test), but it may as well write anywhere without faulting, as any native
//! code may; the ELF loader has its own hostile-input tests. Runs that do not finish
//! in time are counted, not failed (a changed loop bound can make a correct program run for
//! ever; `halo` then behaves as IREE would). The Vulkan builds of the model fixtures get their
//! own campaign on the `vulkan` driver, SPIR-V included: a driver's compiler must never see a
//! module that could crash it. `scripts/mutate-modules` runs the same campaigns at any size,
//! kernels included.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Mutants per CPU driver in the suite; the script takes any count.
const MUTANTS: usize = 300;
/// Mutants of the Vulkan fixtures (each run compiles pipelines, so they are slower).
const VULKAN_MUTANTS: usize = 400;
/// Mutants of the Metal fixtures (each run that gets far compiles MSL with clang).
const METAL_MUTANTS: usize = 150;
/// How long one run may take before it counts as not finishing.
const PATIENCE: Duration = Duration::from_secs(10);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A small deterministic generator (xorshift64*), so a failure names a reproducible seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Every case flagfile of the model and VM fixtures whose module is in the same directory.
fn cases() -> Vec<PathBuf> {
    let mut cases = Vec::new();
    for dir in ["models", "vm"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "flags") && module_of(&path).exists() {
                cases.push(path);
            }
        }
    }
    cases.sort();
    cases
}

/// Byte ranges of the ELF files embedded in a module: from each `\x7fELF` to the end of its
/// section header table.
/// Byte ranges of the MSL source texts in a Metal module (each to its terminating NUL).
fn msl_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    const START: &[u8] = b"#include <metal_stdlib>";
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(at) = bytes[from..].windows(START.len()).position(|w| w == START) {
        let start = from + at;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == 0)
            .map_or(bytes.len(), |n| start + n);
        ranges.push(start..end);
        from = end;
    }
    ranges
}

fn elf_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
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

/// The module a case runs: this host's build for a model fixture (the VM fixtures use no HAL, so
/// one build serves every CPU).
fn module_of(flags: &Path) -> PathBuf {
    let name = flags.file_stem().unwrap().to_string_lossy().into_owned();
    let dir = flags.parent().unwrap();
    let modules = if dir.ends_with("models") {
        common::host_builds(dir).0
    } else {
        dir.to_path_buf()
    };
    modules.join(format!("{}.vmfb", name.split('.').next().unwrap()))
}

/// Whether a test whose damaged bytes are x86-64 machine code can run here; elsewhere it says by
/// name that it skipped (the AArch64 build's kernels are damaged by
/// `a_kernel_library_whose_first_instruction_faults_ends_in_an_error_naming_it`).
fn x86_64_code_runs_here(test: &str) -> bool {
    if !cfg!(target_arch = "x86_64") {
        println!("SKIPPED {test}: its damaged bytes are x86-64 machine code, and this host is not x86-64");
    }
    cfg!(target_arch = "x86_64")
}

/// How one run ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Finished,
    TimedOut,
    Crashed(String),
}

/// Runs halo on `module` with the case's flags (inside the case's directory, so its inputs
/// resolve), under an address-space limit where `prlimit` exists.
fn run(module: &Path, flags: &Path, driver: &str) -> Outcome {
    let halo = env!("CARGO_BIN_EXE_halo");
    let args = [
        "run-module".to_string(),
        format!("--device={driver}"),
        format!("--module={}", module.display()),
        format!("--flagfile={}", flags.display()),
    ];
    let limited = Command::new("prlimit").arg("--version").output().is_ok();
    let mut command = if limited {
        let mut command = Command::new("prlimit");
        command.args(["--as=8589934592", "--", halo]);
        command
    } else {
        Command::new(halo)
    };
    let mut child = command
        .args(&args)
        .current_dir(flags.parent().unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            return Outcome::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = String::from_utf8_lossy(&child.wait_with_output().unwrap().stderr).into_owned();
    match status.code() {
        Some(0 | 1) if !stderr.contains("panicked") => Outcome::Finished,
        _ => Outcome::Crashed(format!("{status}: {}", stderr.chars().take(2000).collect::<String>())),
    }
}

/// What a campaign found: crash reports and how many runs did not finish.
struct Campaign {
    crashes: Vec<String>,
    timed_out: usize,
}

/// Runs `count` mutants of the modules that `module_of` gives each case, on `driver`, with
/// embedded kernel libraries and MSL sources left alone.
fn campaign(cases: &[PathBuf], module_of: impl Fn(&Path) -> PathBuf, driver: &str, count: usize) -> Campaign {
    let label: String = driver
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = std::env::temp_dir().join(format!("halo-mutants-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut found = Campaign {
        crashes: Vec::new(),
        timed_out: 0,
    };
    let mut rng = Rng(0x5eed_0000_0000_0001);
    for mutant in 0..count {
        let flags = &cases[rng.below(cases.len())];
        let mut bytes = std::fs::read(module_of(flags)).unwrap();
        let kernels: Vec<_> = elf_ranges(&bytes).into_iter().chain(msl_ranges(&bytes)).collect();
        let changes = 1 + rng.below(4);
        for _ in 0..changes {
            let at = rng.below(bytes.len());
            if !kernels.iter().any(|kernel| kernel.contains(&at)) {
                bytes[at] = rng.next() as u8;
            }
        }
        let module = dir.join(format!("mutant-{mutant}.vmfb"));
        std::fs::write(&module, &bytes).unwrap();
        match run(&module, flags, driver) {
            Outcome::Finished => {}
            Outcome::TimedOut => found.timed_out += 1,
            Outcome::Crashed(what) => found
                .crashes
                .push(format!("mutant {mutant} of {} on {driver}: {what}", flags.display())),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    println!(
        "{count} runs of mutated modules on {driver}: {} crashed, {} did not finish in {PATIENCE:?}",
        found.crashes.len(),
        found.timed_out
    );
    found
}

#[test]
fn mutated_modules_never_crash_the_command_line() {
    let cases = cases();
    assert!(cases.len() > 300, "found {} cases", cases.len());
    let mut crashes = Vec::new();
    for driver in ["local-sync", "local-task"] {
        crashes.extend(campaign(&cases, module_of, driver, MUTANTS).crashes);
    }
    assert!(crashes.is_empty(), "{}", crashes.join("\n---\n"));
}

/// The Vulkan builds of the model fixtures (`fixtures/models/vulkan`), run with the CPU cases'
/// flagfiles.
#[test]
fn mutated_vulkan_modules_never_crash_the_command_line() {
    let test = "mutated_vulkan_modules_never_crash_the_command_line";
    if !common::vulkan_device_present() {
        println!("SKIPPED {test}: no Vulkan device");
        return;
    }
    let models = fixtures().join("models");
    let vulkan_module = |flags: &Path| common::case_module(&models.join("vulkan"), flags);
    let cases: Vec<PathBuf> = cases()
        .into_iter()
        .filter(|flags| flags.parent() == Some(models.as_path()) && vulkan_module(flags).exists())
        .collect();
    assert!(cases.len() > 100, "found {} cases", cases.len());
    let found = campaign(&cases, vulkan_module, "vulkan", VULKAN_MUTANTS);
    assert!(found.crashes.is_empty(), "{}", found.crashes.join("\n---\n"));
}

/// The Metal builds of the model fixtures (`fixtures/models/metal`) on the emulated device, their
/// MSL left alone: it becomes host code, trusted as a system library's code is.
#[test]
fn mutated_metal_modules_never_crash_the_command_line() {
    let test = "mutated_metal_modules_never_crash_the_command_line";
    if !common::device_present("metal") {
        println!("SKIPPED {test}: no Metal device (the emulated one needs clang)");
        return;
    }
    let models = fixtures().join("models");
    let metal_module = |flags: &Path| common::case_module(&models.join("metal"), flags);
    let cases: Vec<PathBuf> = cases()
        .into_iter()
        .filter(|flags| flags.parent() == Some(models.as_path()) && metal_module(flags).exists())
        .collect();
    assert!(cases.len() > 90, "found {} cases", cases.len());
    let found = campaign(&cases, metal_module, "metal://emulated", METAL_MUTANTS);
    assert!(found.crashes.is_empty(), "{}", found.crashes.join("\n---\n"));
}

/// A mutant the script found: one byte of `transpose.vmfb`'s executable makes a binding claim
/// 2,315,255,809 descriptors, which halo once tried to lay out one slot each (an abort when the
/// allocation failed). It is refused against the device's per-stage limit instead.
#[test]
fn a_descriptor_count_past_the_devices_limit_is_refused() {
    let test = "a_descriptor_count_past_the_devices_limit_is_refused";
    if !common::vulkan_device_present() {
        println!("SKIPPED {test}: no Vulkan device");
        return;
    }
    let models = fixtures().join("models");
    let mut bytes = std::fs::read(models.join("vulkan/transpose.vmfb")).unwrap();
    assert_eq!(bytes[13763], 0, "the fixture changed; find the descriptor count again");
    bytes[13763] = 0o212;
    let module = std::env::temp_dir().join(format!("halo-descriptor-count-{}.vmfb", std::process::id()));
    std::fs::write(&module, &bytes).unwrap();
    let output = common::halo_command()
        .args([
            "run-module",
            "--device=vulkan",
            &format!("--module={}", module.display()),
        ])
        .arg(format!("--flagfile={}", models.join("transpose.t2d.flags").display()))
        .current_dir(&models)
        .output()
        .unwrap();
    std::fs::remove_file(&module).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("binding 0: 2315255809 descriptors exceed the device's"),
        "{stderr}"
    );
}

/// Mutants `scripts/mutate-modules` found with kernel bytes changed (seeds 777, 4242 and 902): one byte
/// of machine code makes a kernel, or a library's query function, fault (a jump into the `int3`
/// padding between functions traps). Each ends in an error that
/// names what faulted, on both CPU drivers, instead of the process dying by the signal.
#[test]
fn kernels_that_fault_end_in_an_error_naming_them() {
    if !x86_64_code_runs_here("kernels_that_fault_end_in_an_error_naming_them") {
        return;
    }
    let models = fixtures().join("models");
    // (module, byte, its value, the damaged value, case, what the error says)
    let damaged = [
        (
            "elementwise_math",
            21162,
            133,
            67,
            "elementwise_math.binary",
            "export 9 'binary_dispatch_1_elementwise_8_f32' of library 'elementwise_math_linked' \
             faulted in workgroup (0, 0, 0): SIGILL: illegal instruction at 0x",
        ),
        (
            "pooling",
            8354,
            65,
            48,
            "pooling.max_pool",
            "export 0 'max_pool_dispatch_0_conv_2x2x2x2x2_f32' of library 'pooling_linked' faulted",
        ),
        (
            "batch_matmul",
            7782,
            195,
            129,
            "batch_matmul.basic",
            "SIGTRAP: breakpoint at instruction 0x",
        ),
        (
            "dynamic_shapes",
            34966,
            141,
            176,
            "dynamic_shapes.row_sums_2x3",
            "the library's query function faulted: SIGSEGV: invalid access to address 0x0",
        ),
        (
            // The query function writes through a callee-saved register on entry: it once held
            // the trampoline's record, and the process died on the way back.
            "shape_ops",
            13617,
            0xc0,
            0x03,
            "shape_ops.splat",
            "the library's query function faulted: SIGSEGV: invalid access to address 0x0",
        ),
        (
            // `test r8b, 8` becomes `popfq` (seed 1129): the flags it pops include the trap and
            // alignment-check flags, which once killed the process by SIGTRAP in the guard's
            // epilogue, and then by SIGBUS in the fault handler.
            "dynamic_shapes",
            28435,
            0xf6,
            0x9d,
            "dynamic_shapes.matmul_3x5x4",
            "export 2 'dyn_matmul_dispatch_0_matmul_DxDxD_f32' of library 'dynamic_shapes_linked' faulted",
        ),
        (
            // Turns an instruction into `wrfsbase` (seed 1131) where Linux lets user code move the
            // thread pointer: the fault handler's own thread-local access then faulted, and the
            // process died in it (SIGSEGV). Elsewhere the instruction is illegal.
            "mlp",
            9475,
            0x85,
            0xb4,
            "mlp.zeros",
            "export 0 'mlp_hidden_dispatch_0_matmul_2x16x8_f32' of library 'mlp_linked' faulted",
        ),
    ];
    for (name, at, was, now, case, says) in damaged {
        let mut bytes = std::fs::read(models.join(format!("{name}.vmfb"))).unwrap();
        assert_eq!(bytes[at], was, "{name}.vmfb changed; find a faulting byte again");
        bytes[at] = now;
        let module = std::env::temp_dir().join(format!("halo-faulting-{name}-{}.vmfb", std::process::id()));
        std::fs::write(&module, &bytes).unwrap();
        assert_faults_on_both_cpu_drivers(&module, case, &[says]);
        std::fs::remove_file(&module).unwrap();
    }
}

/// A mutant `scripts/mutate-modules --seed 905` found: one byte of `matmul.vmfb`'s kernel makes
/// its store loop run on past its 48-byte output. While small buffers came from the Rust heap,
/// the process died in a later `free` (SIGSEGV, every run). Now the stores land in other device
/// buffers, where the call may finish with wrong results or reach a chunk's guard and end in
/// `DATA_LOSS`. How far the damaged loop stores depends on the addresses it is handed (about 1
/// run in 30 finishes, with `guard_pages=true` too), so either outcome passes; a signal fails.
#[test]
fn a_kernel_storing_past_a_small_buffer_leaves_the_process_alive() {
    if !x86_64_code_runs_here("a_kernel_storing_past_a_small_buffer_leaves_the_process_alive") {
        return;
    }
    let models = fixtures().join("models");
    let mut bytes = std::fs::read(models.join("matmul.vmfb")).unwrap();
    assert_eq!(bytes[8685], 0x57, "matmul.vmfb changed; find the damaging byte again");
    bytes[8685] = 0x92;
    let module = std::env::temp_dir().join(format!("halo-storing-matmul-{}.vmfb", std::process::id()));
    std::fs::write(&module, &bytes).unwrap();
    let fault = "export 0 'matmul_dispatch_0_matmul_4x3x8_f32' of library 'matmul_linked' faulted in \
                 workgroup (0, 0, 0): SIGSEGV: invalid access to address 0x";
    for driver in [
        "local-sync",
        "local-task",
        "local-sync://?guard_pages=true",
        "local-task://?guard_pages=true",
    ] {
        let output = common::halo_command()
            .args([
                "run-module",
                &format!("--device={driver}"),
                &format!("--module={}", module.display()),
                "--flagfile=matmul.identity.flags",
            ])
            .current_dir(&models)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let faulted = output.status.code() == Some(1) && stderr.contains("DATA_LOSS") && stderr.contains(fault);
        let finished = output.status.code() == Some(0);
        assert!(faulted || finished, "on {driver}: {}: {stderr}", output.status);
    }
    std::fs::remove_file(&module).unwrap();
}

/// Runs `module` with the model fixture case `case` on both CPU drivers and checks each run ends
/// in `DATA_LOSS` with every one of `says` in the message.
fn assert_faults_on_both_cpu_drivers(module: &Path, case: &str, says: &[&str]) {
    for driver in ["local-sync", "local-task"] {
        let output = common::halo_command()
            .args([
                "run-module",
                &format!("--device={driver}"),
                &format!("--module={}", module.display()),
                &format!("--flagfile={case}.flags"),
            ])
            .current_dir(fixtures().join("models"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{case} on {driver}: {}: {stderr}",
            output.status
        );
        assert!(
            stderr.contains("DATA_LOSS") && says.iter().all(|said| stderr.contains(said)),
            "{case} on {driver}: {stderr}"
        );
    }
}

/// The file offset, within `elf`, of the start of its `.text` section (the first function the
/// linker placed), read from the section headers.
fn text_start(elf: &[u8]) -> Option<usize> {
    let word = |at: usize, len: usize| -> Option<usize> {
        let field = elf.get(at..at.checked_add(len)?)?;
        Some(field.iter().rev().fold(0usize, |value, &b| value << 8 | usize::from(b)))
    };
    let (table, size, count, names) = (word(0x28, 8)?, word(0x3a, 2)?, word(0x3c, 2)?, word(0x3e, 2)?);
    let header = |index: usize| table.checked_add(index.checked_mul(size)?);
    let names_at = word(header(names)? + 0x18, 8)?;
    (0..count).find_map(|index| {
        let at = header(index)?;
        let name = names_at.checked_add(word(at, 4)?)?;
        (elf.get(name..name + 6)? == b".text\0").then(|| word(at + 0x18, 8))?
    })
}

/// The first instruction of each kernel library of this architecture's build of `mlp` (whose
/// `zeros` case runs all of its code) replaced by one that faults: an undefined instruction, or a
/// store through the first argument (the environment, which kernels may only read). Each ends in
/// `DATA_LOSS` naming the library and the signal, on both CPU drivers; run under qemu-aarch64 by
/// `scripts/test-arm64` for the AArch64 build.
#[test]
fn a_kernel_library_whose_first_instruction_faults_ends_in_an_error_naming_it() {
    let models = fixtures().join("models");
    let (modules, _) = common::host_builds(&models);
    let bytes = std::fs::read(modules.join("mlp.vmfb")).unwrap();
    // (the instruction's bytes, what the error says)
    let damages: [(&[u8], &str); 2] = if cfg!(target_arch = "aarch64") {
        [
            (&[0, 0, 0, 0], "SIGILL: illegal instruction at 0x"),
            (&[0x1f, 0x00, 0x00, 0x39], "SIGSEGV: invalid access to address 0x"),
        ]
    } else {
        [
            (&[0x0f, 0x0b], "SIGILL: illegal instruction at 0x"),
            (&[0xc6, 0x07, 0x00], "SIGSEGV: invalid access to address 0x"),
        ]
    };
    let libraries = elf_ranges(&bytes);
    assert!(!libraries.is_empty(), "mlp.vmfb holds no kernel library");
    for (code, says) in damages {
        let mut damaged = bytes.clone();
        for library in &libraries {
            let at = library.start + text_start(&bytes[library.clone()]).expect("a .text section");
            damaged[at..at + code.len()].copy_from_slice(code);
        }
        let module = std::env::temp_dir().join(format!("halo-first-instruction-{}.vmfb", std::process::id()));
        std::fs::write(&module, &damaged).unwrap();
        assert_faults_on_both_cpu_drivers(&module, "mlp.zeros", &["'mlp_linked'", says]);
        std::fs::remove_file(&module).unwrap();
    }
}
