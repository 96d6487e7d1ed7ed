//! `halo run-executable` on every fixture case, in both CPU formats (and the Vulkan builds where a
//! Vulkan device exists), against IREE's recorded CPU output.

mod common;

use std::path::{Path, PathBuf};

/// Where this architecture's cases' flagfiles are (AArch64 builds may tile differently, so
/// theirs are in `arm_64/`).
const HOST_FLAGS: &str = if cfg!(target_arch = "aarch64") { "arm_64" } else { "" };

/// This host's embedded ELF format.
const EMBEDDED: &str = common::HOST_FORMATS[0];

/// This host's build of executable `name` in its embedded ELF format.
fn host_embedded(name: &str) -> PathBuf {
    fixtures().join(format!("{name}.{EMBEDDED}.so"))
}

/// This host's flagfile of `case` (`<exe>.<case>`): the workgroup counts are its build's.
fn host_flags(case: &str) -> PathBuf {
    fixtures().join(HOST_FLAGS).join(format!("{case}.flags"))
}

/// CPU devices every case runs on.
const DEVICES: &[&str] = &["local-sync", "local-task"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables")
}

/// Every `<exe>.<case>.flags` that has an `.expected` file.
fn cases() -> Vec<(String, PathBuf)> {
    let mut cases: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "flags") && path.with_extension("expected").exists())
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            (name, path)
        })
        .collect();
    cases.sort();
    cases
}

fn halo(args: &[String]) -> std::process::Output {
    common::halo_command().args(args).output().expect("running halo")
}

#[test]
fn every_fixture_matches_iree_output() {
    let cases = cases();
    assert!(cases.len() >= 12, "expected the fixture cases, found {}", cases.len());
    let mut failures = Vec::new();
    let (formats, flags_dir) = (common::HOST_FORMATS, HOST_FLAGS);
    let (_, same) = common::host_builds(&fixtures());
    for (name, flags) in &cases {
        let executable = name.split('.').next().unwrap();
        let expected = std::fs::read_to_string(flags.with_extension("expected")).unwrap();
        let flags = fixtures().join(flags_dir).join(flags.file_name().unwrap());
        for format in formats {
            for device in DEVICES {
                let file = fixtures().join(format!("{executable}.{format}.so"));
                let output = halo(&[
                    "run-executable".into(),
                    format!("--device={device}"),
                    format!("--executable_format={format}"),
                    format!("--executable_file={}", file.display()),
                    format!("--flagfile={}", flags.display()),
                    "--output_max_element_count=1048576".into(),
                ]);
                let stdout = String::from_utf8_lossy(&output.stdout);
                if !output.status.success() || !same(&stdout, &expected) {
                    failures.push(format!(
                        "{name} ({format}, {device}): status {}, stderr: {}",
                        output.status,
                        String::from_utf8_lossy(&output.stderr)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

fn run_error(extra: &[&str]) -> String {
    let file = host_embedded("multi_export");
    let mut args = vec![
        "run-executable".to_string(),
        format!("--executable_format={EMBEDDED}"),
        format!("--executable_file={}", file.display()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let output = halo(&args);
    assert!(!output.status.success(), "halo {args:?} should fail");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!stderr.contains("panicked"), "halo panicked: {stderr}");
    stderr
}

#[test]
fn bad_input_is_reported_not_crashed() {
    let negate = ["--entry_point=0", "--binding=8xf32=1", "--binding=8xf32"];
    assert!(run_error(&["--entry_point=9"]).contains("export ordinal 9 is out of range"));
    assert!(run_error(&["--entry_point=nope"]).contains("no export named 'nope'"));
    assert!(run_error(&["--entry_point=0", "--binding=8xf32=1 2"]).contains("2 values given for 8 elements"));
    assert!(run_error(&["--entry_point=0", "--binding=8xq32"]).contains("unknown element type 'q32'"));
    assert!(run_error(&["--entry_point=0", "--binding=8xf32"]).contains("1 bindings given; export 'negate' takes 2"));
    assert!(run_error(&[&negate[..], &["--constant=1"]].concat()).contains("1 constants given"));
    assert!(run_error(&[&negate[..], &["--workgroup_count=1,x"]].concat()).contains("--workgroup_count"));
    assert!(run_error(&[&negate[..], &["--device=nosuch"]].concat()).contains("no driver named 'nosuch'"));
    assert!(run_error(&[&negate[..], &["--device=local-sync://7"]].concat()).contains("has no device '7'"));
    let huge = run_error(&[&negate[..], &["--workgroup_count=4294967295,4294967295,65535"]].concat());
    assert!(huge.contains("has more workgroups than 2^64"), "{huge}");
    let deep = run_error(&[&negate[..], &["--workgroup_count=1,1,65536"]].concat());
    assert!(deep.contains("workgroup count z 65536"), "{deep}");
    // Two bindings of 8 floats hold 64 bytes: a 65th workgroup could only write past them.
    let past = run_error(&[&negate[..], &["--workgroup_count=65,1,1"]].concat());
    assert!(
        past.contains("asks for 65 workgroups") && past.contains("more than the 64 bytes its bindings hold"),
        "{past}"
    );
}

/// A workgroup count within that bound but past the grid the kernel was compiled for: the conv
/// fixture's output tiles take 12 workgroups, and the 13th onwards would write past its output.
/// The bindings lie between guard pages, so the first stray access faults and the dispatch ends in
/// an error naming the kernel, on both CPU drivers and for every count (once heap corruption,
/// then a SIGSEGV or a hang).
#[test]
fn workgroups_past_the_kernels_grid_end_in_an_error() {
    let flags = std::fs::read_to_string(host_flags("conv2d_f32.basic")).unwrap();
    assert!(flags.contains("--workgroup_count=12,1,1"), "the fixture changed");
    for count in ["13,1,1", "100,1,1", "1376,1,1"] {
        let changed = std::env::temp_dir().join(format!("halo-conv-{count}-{}.flags", std::process::id()));
        std::fs::write(
            &changed,
            flags.replace("--workgroup_count=12,1,1", &format!("--workgroup_count={count}")),
        )
        .unwrap();
        for device in ["local-sync", "local-task"] {
            let file = host_embedded("conv2d_f32");
            let output = halo(&[
                "run-executable".into(),
                format!("--device={device}"),
                format!("--executable_format={EMBEDDED}"),
                format!("--executable_file={}", file.display()),
                format!("--flagfile={}", changed.display()),
            ]);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(1),
                "{count} on {device}: {}: {stderr}",
                output.status
            );
            assert!(
                stderr.contains("DATA_LOSS: export 0 'conv' of library 'conv2d_f32' faulted in workgroup")
                    && stderr.contains("SIGSEGV: invalid access to address"),
                "{count} on {device}: {stderr}"
            );
        }
        std::fs::remove_file(&changed).unwrap();
    }
}

/// Vulkan leaves dispatches beyond `maxComputeWorkGroupCount` undefined: halo refuses them.
#[test]
fn vulkan_refuses_workgroup_counts_beyond_the_device_limits() {
    if !common::device_present("vulkan") {
        println!("SKIPPED vulkan_refuses_workgroup_counts_beyond_the_device_limits: no Vulkan device");
        return;
    }
    let output = halo(&[
        "run-executable".into(),
        "--device=vulkan".into(),
        "--executable_format=vulkan-spirv-fb".into(),
        format!(
            "--executable_file={}",
            fixtures().join("grid3d.vulkan-spirv-fb.fb").display()
        ),
        "--entry_point=0".into(),
        "--workgroup_count=4294967295,1,1".into(),
        "--binding=2x3x4xi32=-1".into(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("exceeds the device's limits"), "{stderr}");
}

#[test]
fn bad_executables_are_reported_not_crashed() {
    let dir = std::env::temp_dir().join(format!("halo-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read(host_embedded("multi_export")).unwrap();
    let mut other_machine = good.clone();
    other_machine[18] = if cfg!(target_arch = "aarch64") { 62 } else { 183 }; // EM_X86_64, EM_AARCH64
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("empty.so", vec![], EMBEDDED),
        ("truncated.so", good[..good.len() / 2].to_vec(), EMBEDDED),
        ("other_machine.so", other_machine, EMBEDDED),
        ("good.so", good, "vulkan-spirv-fb"),
    ];
    for (file, bytes, format) in cases {
        let path = dir.join(file);
        std::fs::write(&path, bytes).unwrap();
        let output = halo(&[
            "run-executable".into(),
            format!("--executable_format={format}"),
            format!("--executable_file={}", path.display()),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && !stderr.contains("panicked"),
            "{file}: {stderr}"
        );
        assert!(
            stderr.contains(file) || stderr.contains(format),
            "{file}: error should name the file: {stderr}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
    let missing = halo(&["run-executable".into(), "--executable_file=/nonexistent/x.so".into()]);
    assert!(!missing.status.success());
}

#[test]
fn benchmark_prints_google_benchmark_json() {
    let file = host_embedded("grid3d");
    let output = halo(&[
        "benchmark-executable".into(),
        format!("--executable_format={EMBEDDED}"),
        format!("--executable_file={}", file.display()),
        format!("--flagfile={}", host_flags("grid3d.basic").display()),
        "--benchmark_min_time=256x".into(),
        "--batch_size=16".into(),
        "--benchmark_format=json".into(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let run = &json["benchmarks"][0];
    assert_eq!(run["name"], "BM_dispatch_4x3x2/process_time/real_time");
    assert_eq!(run["iterations"], 256);
    assert!(run["real_time"].as_f64().unwrap() > 0.0);
    assert_eq!(run["time_unit"], "ns");
    // On local-task (the default device) the workgroups' time is counted, also when the small
    // dispatch runs inline on the submitting thread.
    assert!(run["worker_busy_ns"].as_f64().unwrap() > 0.0, "{run}");
    assert!(run["worker_idle_ns"].is_number(), "{run}");
}

#[test]
fn a_batch_too_large_to_record_is_refused() {
    let file = host_embedded("grid3d");
    for batch in ["0", "4294967295"] {
        let output = halo(&[
            "benchmark-executable".into(),
            format!("--executable_format={EMBEDDED}"),
            format!("--executable_file={}", file.display()),
            format!("--flagfile={}", host_flags("grid3d.basic").display()),
            format!("--batch_size={batch}"),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("--batch_size must be from 1 to 1048576; {batch} was given")),
            "{stderr}"
        );
    }
}

#[test]
fn lists_drivers_and_devices() {
    let drivers = halo(&["drivers".into()]);
    assert!(String::from_utf8_lossy(&drivers.stdout)
        .lines()
        .any(|l| l == "local-sync"));
    let devices = halo(&["devices".into()]);
    assert!(String::from_utf8_lossy(&devices.stdout).contains("local-sync://0"));
}

/// The GPU builds of the fixtures (`<exe>.<format>.fb`) with their own flagfiles
/// (`<format>/<exe>.<case>.flags`: the compiler picks other workgroup counts for GPUs) give the
/// CPU's expected output (benchmark-only cases have none). Returns the failures.
fn gpu_fixture_failures(device: &str, format: &str, envs: &[(&str, &str)]) -> Vec<String> {
    let mut flagfiles: Vec<PathBuf> = std::fs::read_dir(fixtures().join(format))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "flags"))
        .filter(|path| {
            fixtures()
                .join(path.file_name().unwrap())
                .with_extension("expected")
                .exists()
        })
        .collect();
    flagfiles.sort();
    assert!(
        flagfiles.len() >= 10,
        "expected the {format} cases, found {}",
        flagfiles.len()
    );
    let mut failures = Vec::new();
    for flags in &flagfiles {
        let name = flags.file_stem().unwrap().to_string_lossy().to_string();
        let executable = name.split('.').next().unwrap();
        let expected = std::fs::read_to_string(fixtures().join(format!("{name}.expected"))).unwrap();
        let file = fixtures().join(format!("{executable}.{format}.fb"));
        let output = common::halo_command()
            .envs(envs.iter().copied())
            .args([
                "run-executable".to_string(),
                format!("--device={device}"),
                format!("--executable_format={format}"),
                format!("--executable_file={}", file.display()),
                format!("--flagfile={}", flags.display()),
                "--output_max_element_count=1048576".into(),
            ])
            .output()
            .expect("running halo");
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() || stdout.trim_end() != expected.trim_end() {
            failures.push(format!(
                "{name} ({device}): status {}, stderr: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    failures
}

/// The Vulkan builds, under strict validation.
#[test]
fn every_vulkan_fixture_matches_iree_cpu_output() {
    if !common::device_present("vulkan") {
        println!("SKIPPED every_vulkan_fixture_matches_iree_cpu_output: no Vulkan device");
        return;
    }
    let failures = gpu_fixture_failures("vulkan", "vulkan-spirv-fb", &[("HALO_VULKAN_VALIDATION", "strict")]);
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

/// The CUDA builds (PTX for sm_80, JIT-compiled by the driver for the GPU at hand).
#[test]
fn every_cuda_fixture_matches_iree_cpu_output() {
    if !common::device_present("cuda") {
        println!("SKIPPED every_cuda_fixture_matches_iree_cpu_output: no CUDA device");
        return;
    }
    let failures = gpu_fixture_failures("cuda", "cuda-nvptx-fb", &[]);
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

/// The HIP builds (code objects for gfx942).
#[test]
fn every_hip_fixture_matches_iree_cpu_output() {
    if !common::device_present("hip") {
        println!("SKIPPED every_hip_fixture_matches_iree_cpu_output: no HIP device");
        return;
    }
    let failures = gpu_fixture_failures("hip", "rocm-hsaco-fb", &[]);
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}
