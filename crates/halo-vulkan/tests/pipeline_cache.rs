//! Pipelines kept on disk between devices and processes (`pipeline_cache=DIR`): a miss writes
//! the executable's file, the next device loads from it and runs the same kernels, a corrupt file
//! is ignored and replaced, concurrent writers leave a whole file, and `off` keeps nothing.

use halo_cts::cases::dispatch::dispatch_writes_output;
use halo_cts::{CtsDevice, Recording};
use halo_cts::{Isolation, Manifest, Tag};
use halo_hal::{Device, DriverRegistry, ExecutableParams, Result, StatusCode};
use halo_vulkan::Validation;
use std::path::{Path, PathBuf};
use std::sync::Arc;

static MANIFEST: Manifest = Manifest {
    driver: "vulkan",
    device_uri: "vulkan://",
    executable_format: "vulkan-spirv-fb",
    tags: &[Tag::AsyncQueue],
    unsupported: &[],
    expected_failures: &[],
    isolation: Isolation::Alone,
};

fn create_device(uri: &str) -> Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_vulkan::register_driver_with(&mut registry, Validation::Strict);
    registry.create_device(uri)
}

/// A device keeping its pipelines in `dir`, or `None` (saying the test skipped) without Vulkan.
fn device_or_skip(test: &str, dir: &Path) -> Option<Arc<dyn Device>> {
    match create_device(&format!("vulkan://?pipeline_cache={}", dir.display())) {
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED {test}: device unavailable: {error}");
            None
        }
        other => Some(other.expect("creating the Vulkan device")),
    }
}

fn counter(device: &dyn Device, key: &str) -> i64 {
    device.query_i64("vulkan.pipeline_cache", key).unwrap()
}

/// Loads the CTS's `multi_export` executable and runs the CTS case that dispatches it.
fn load_and_run(device: &Arc<dyn Device>) {
    let ctx = CtsDevice::new(device.clone(), &MANIFEST, Recording::Direct, create_device);
    let data = std::fs::read(ctx.executable_path("multi_export")).unwrap();
    let cache = device.create_executable_cache().unwrap();
    let executable = cache
        .prepare_executable(&ExecutableParams {
            format: MANIFEST.executable_format,
            data: &data,
            constants: &[],
        })
        .unwrap();
    assert_eq!(executable.export_count(), 3);
    dispatch_writes_output(&ctx);
}

/// The cache files under `dir` (one folder per device and driver build).
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for folder in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(folder.path()).into_iter().flatten().flatten() {
            files.push(file.path());
        }
    }
    files.sort();
    files
}

#[test]
fn a_second_device_creates_its_pipelines_from_the_file_the_first_wrote() {
    let _alone = halo_cts::run_alone();
    let dir = tempfile::tempdir().unwrap();
    let test = "a_second_device_creates_its_pipelines_from_the_file_the_first_wrote";
    let Some(first) = device_or_skip(test, dir.path()) else {
        return;
    };
    load_and_run(&first);
    // The case loads the executable once more through its own cache: a hit by then.
    assert_eq!(
        (counter(first.as_ref(), "misses"), counter(first.as_ref(), "hits")),
        (1, 1)
    );
    drop(first);
    let files = cache_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(std::fs::read(&files[0]).unwrap().starts_with(b"HALOVKPC"));

    let second = device_or_skip(test, dir.path()).unwrap();
    load_and_run(&second);
    assert_eq!(
        (counter(second.as_ref(), "misses"), counter(second.as_ref(), "hits")),
        (0, 2)
    );
    assert_eq!(counter(second.as_ref(), "write_failures"), 0);
}

#[test]
fn a_corrupt_file_is_ignored_and_replaced() {
    let _alone = halo_cts::run_alone();
    let dir = tempfile::tempdir().unwrap();
    let test = "a_corrupt_file_is_ignored_and_replaced";
    let Some(first) = device_or_skip(test, dir.path()) else {
        return;
    };
    load_and_run(&first);
    drop(first);
    let file = cache_files(dir.path()).remove(0);
    let good = std::fs::read(&file).unwrap();
    let mut corrupt = good.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    for damaged in [corrupt, good[..good.len() / 2].to_vec(), b"not a cache".to_vec()] {
        std::fs::write(&file, &damaged).unwrap();
        let device = device_or_skip(test, dir.path()).unwrap();
        load_and_run(&device);
        assert_eq!(counter(device.as_ref(), "rejected"), 1);
        assert_eq!(counter(device.as_ref(), "misses"), 1);
        drop(device);
        let rewritten = std::fs::read(&file).unwrap();
        assert!(
            rewritten != damaged && rewritten.starts_with(b"HALOVKPC"),
            "the file is written anew"
        );
    }
}

#[test]
fn devices_writing_the_same_file_at_once_leave_a_whole_one() {
    let _alone = halo_cts::run_alone();
    let dir = tempfile::tempdir().unwrap();
    let test = "devices_writing_the_same_file_at_once_leave_a_whole_one";
    if device_or_skip(test, dir.path()).is_none() {
        return;
    }
    // The devices are made and dropped on this thread, their executables prepared (and the file
    // written) on four at once: Debian 12's validation layer crashes when one thread creates or
    // destroys a device while another calls into one (it did here, SIGSEGV in `.ci/run`).
    let devices: Vec<_> = (0..4).map(|_| device_or_skip(test, dir.path()).unwrap()).collect();
    std::thread::scope(|scope| {
        for device in &devices {
            scope.spawn(move || load_and_run(device));
        }
    });
    drop(devices);
    let files = cache_files(dir.path());
    assert_eq!(files.len(), 1, "no temporary file is left: {files:?}");
    let device = device_or_skip(test, dir.path()).unwrap();
    load_and_run(&device);
    assert_eq!(counter(device.as_ref(), "rejected"), 0);
    assert_eq!(counter(device.as_ref(), "misses"), 0);
}

#[test]
fn off_keeps_nothing_and_a_bad_parameter_is_refused() {
    let _alone = halo_cts::run_alone();
    let Ok(device) = create_device("vulkan://?pipeline_cache=off") else {
        println!("SKIPPED off_keeps_nothing_and_a_bad_parameter_is_refused: no Vulkan device");
        return;
    };
    let error = device.query_i64("vulkan.pipeline_cache", "hits").unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    let Err(error) = create_device("vulkan://?pipeline_cache=") else {
        panic!("an empty pipeline_cache was accepted");
    };
    assert!(error.message().contains("pipeline_cache"), "{error}");
}

#[test]
fn an_unwritable_folder_is_counted_and_loading_still_works() {
    let _alone = halo_cts::run_alone();
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"a file where the cache folder would be").unwrap();
    let Some(device) = device_or_skip("an_unwritable_folder_is_counted_and_loading_still_works", &blocker) else {
        return;
    };
    load_and_run(&device);
    assert_eq!(counter(device.as_ref(), "write_failures"), 2);
}
