//! `halo run-module` on every model fixture case (whole programs using the `hal` module), on
//! both CPU devices and the Tenstorrent mock device, against what `iree-run-module` printed for
//! it.

mod common;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// Runs every case with this architecture's build of its program on `device`.
fn check_all_on(device: &str) {
    let cases = common::cases(&fixtures());
    let (modules, same) = common::host_builds(&fixtures());
    let flag = format!("--device={device}");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|flags| common::check_case_in(&fixtures(), &modules, flags, &[&flag], &[], same))
        .collect();
    assert!(cases.len() >= 120, "only {} model cases found", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ on {device}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}

#[test]
fn every_model_fixture_matches_iree_run_module_on_local_task() {
    check_all_on("local-task");
}

#[test]
fn every_model_fixture_matches_iree_run_module_on_local_sync() {
    check_all_on("local-sync");
}

/// Every buffer between guard pages: the answers are unchanged, and no fixture's kernel reaches
/// past a buffer (it would end in `DATA_LOSS`).
#[test]
fn every_model_fixture_matches_iree_run_module_with_guard_pages() {
    check_all_on("local-sync://?guard_pages=true");
}

/// The mock chip's memory cannot be mapped by the host, so every input, output and value the
/// program reads back travels through the transfer queue.
#[test]
fn every_model_fixture_matches_iree_run_module_on_tenstorrent_mock() {
    check_all_on("tenstorrent://mock?dram=512MiB");
}

#[test]
fn module_mode_preload_gives_the_same_answers() {
    // The weights of large_constants are external rodata: read into memory instead of mapped.
    let cases: Vec<PathBuf> = common::cases(&fixtures())
        .into_iter()
        .filter(|flags| flags.to_string_lossy().contains("large_constants."))
        .collect();
    assert_eq!(cases.len(), 4, "large_constants cases");
    for flags in &cases {
        let (modules, same) = common::host_builds(&fixtures());
        let extra = ["--device=local-sync", "--module_mode=preload"];
        let failure = common::check_case_in(&fixtures(), &modules, flags, &extra, &[], same);
        assert!(failure.is_none(), "{}", failure.unwrap_or_default());
    }
    let bad = halo(&[&STATIC_ADD[..], &["--module_mode=copy"]].concat());
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values: mmap, preload"));
}

/// The `--module` flag naming this host's build of fixture `$name`, relative to `fixtures/models`.
macro_rules! module {
    ($name:literal) => {
        if cfg!(target_arch = "aarch64") {
            concat!("--module=arm_64/", $name, ".vmfb")
        } else {
            concat!("--module=", $name, ".vmfb")
        }
    };
}

fn halo(args: &[&str]) -> std::process::Output {
    common::halo_command()
        .current_dir(fixtures())
        .args(args)
        .output()
        .expect("running halo")
}

const STATIC_ADD: [&str; 4] = [
    "run-module",
    module!("errors"),
    "--function=static_add",
    "--input=4xf32=1 2 3 4",
];

#[test]
fn expected_outputs_are_compared_as_iree_run_module_does() {
    // Texts as iree-run-module 3.13 prints them for the same flags.
    let pass = halo(
        &[
            &STATIC_ADD[..],
            &["--input=4xf32=4 3 2 1", "--expected_output=4xf32=5 5 5 5.00001"],
        ]
        .concat(),
    );
    assert!(pass.status.success());
    assert_eq!(
        String::from_utf8_lossy(&pass.stdout),
        "EXEC @static_add\n[SUCCESS] all function outputs matched their expected values.\n"
    );
    let fail = halo(
        &[
            &STATIC_ADD[..],
            &["--input=4xf32=4 3 2 1", "--expected_output=4xf32=5 5 5 6"],
        ]
        .concat(),
    );
    assert!(!fail.status.success());
    assert_eq!(
        String::from_utf8_lossy(&fail.stdout),
        "EXEC @static_add\n[FAILED] result[0]: element at index 3 (5) does not match the expected (6); \
         expected that the view is equal to contents of a view of 4xf32\n  expected:\n4xf32=5 5 5 6\n  actual:\n\
         4xf32=5 5 5 5\n"
    );
    let metadata = halo(
        &[
            &STATIC_ADD[..],
            &["--input=4xf32=4 3 2 1", "--expected_output=4xi32=5 5 5 5"],
        ]
        .concat(),
    );
    assert!(String::from_utf8_lossy(&metadata.stdout)
        .contains("[FAILED] result[0]: metadata is 4xf32; expected that the view matches 4xi32;"));
    let ignored = halo(
        &[
            &STATIC_ADD[..],
            &["--input=4xf32=4 3 2 1", "--expected_output=(ignored)"],
        ]
        .concat(),
    );
    assert!(ignored.status.success());
}

#[test]
fn outputs_go_to_npy_files_and_npy_files_feed_inputs() {
    let dir = std::env::temp_dir().join(format!("halo-cli-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.npy");
    let target = format!("--output=@{}", file.display());
    let append = format!("--output=+{}", file.display());
    // Two results into one file: written, then appended.
    let out = halo(&[
        "run-module",
        module!("cnn"),
        "--function=cnn",
        "--input=@cnn.basic.0.npy",
        &target,
        &append,
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "EXEC @cnn\n");
    let arrays = halo_runtime::npy::read_all(&file).unwrap();
    let printed: Vec<String> = arrays.iter().map(|t| t.format(1024)).collect();
    let expected = std::fs::read_to_string(fixtures().join("cnn.basic.expected")).unwrap();
    let same = common::host_comparison();
    for text in &printed {
        assert!(
            expected.lines().any(|line| same(text, line)),
            "{text} not in\n{expected}"
        );
    }
    assert_eq!(printed.len(), 2);
    // Both arrays of the file become the two inputs of static_add.
    let sums = dir.join("sums.npy");
    halo_runtime::npy::write(&sums, &halo_hal::HostTensor::parse("4xf32=1 2 3 4").unwrap(), false).unwrap();
    halo_runtime::npy::write(&sums, &halo_hal::HostTensor::parse("4xf32=10 20 30 40").unwrap(), true).unwrap();
    let out = halo(&[
        "run-module",
        module!("errors"),
        "--function=static_add",
        &format!("--input=@{}", sums.display()),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "EXEC @static_add\nresult[0]: hal.buffer_view\n4xf32=11 22 33 44\n"
    );
    // Raw bytes with a shape.
    let raw = dir.join("in.bin");
    let bytes: Vec<u8> = [0.5f32, 1.0, 1.5, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).unwrap();
    let out = halo(&[&STATIC_ADD[..], &[&format!("--input=4xf32=@{}", raw.display())]].concat());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "EXEC @static_add\nresult[0]: hal.buffer_view\n4xf32=1.5 3 4.5 6\n"
    );
    let short = halo(&[&STATIC_ADD[..], &[&format!("--input=8xf32=@{}", raw.display())]].concat());
    assert!(String::from_utf8_lossy(&short.stderr).contains("holds 16 bytes but 8xf32 needs 32"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn benchmark_module_reports_one_run_per_repetition() {
    let out = halo(&[
        "benchmark-module",
        "--device=local-sync",
        module!("tiny_add"),
        "--flagfile=tiny_add.basic.flags",
        "--benchmark_min_time=20x",
        "--benchmark_repetitions=2",
        "--benchmark_format=json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    let runs: Vec<&serde_json::Value> = json["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["run_type"] == "iteration")
        .collect();
    assert_eq!(runs.len(), 2, "{text}");
    for run in runs {
        assert_eq!(run["name"], "BM_tiny_add/process_time/real_time");
        assert_eq!(run["iterations"], 20);
        assert!(run["real_time"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn benchmark_module_reports_worker_time_on_local_task_only() {
    let run = |device: &str| {
        let out = halo(&[
            "benchmark-module",
            device,
            module!("cnn"),
            "--flagfile=cnn.basic.flags",
            "--benchmark_min_time=20x",
            "--benchmark_format=json",
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let json: serde_json::Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
        json["benchmarks"][0].clone()
    };
    let task = run("--device=local-task");
    let busy = task["worker_busy_ns"].as_f64().expect("local-task counts busy time");
    let idle = task["worker_idle_ns"].as_f64().expect("and idle time");
    let wall = task["real_time"].as_f64().unwrap();
    // The workers ran the convolution's workgroups, for no more than their whole time (the last
    // job of a call may be counted a little late, in the next call).
    assert!(busy > 0.0, "{task}");
    assert!(idle > -0.05 * busy, "{task}");
    assert!(busy + idle >= wall * 0.99, "at least one worker: {task}");
    let sync = run("--device=local-sync");
    assert!(sync.get("worker_busy_ns").is_none(), "{sync}");
}
