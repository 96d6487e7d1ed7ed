//! What the CTS cannot know of the OpenCL driver: its URI parameters and what it refuses.

use halo_hal::{Device, DriverRegistry, StatusCode};
use std::sync::Arc;

fn create(uri: &str) -> halo_hal::Result<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_opencl::register_driver(&mut registry);
    registry.create_device(uri)
}

#[test]
fn bad_uri_parameters_are_refused_naming_them() {
    for (uri, named) in [
        ("opencl://?subgroup_size=3", "subgroup_size=3"),
        ("opencl://?subgroup_size=256", "subgroup_size=256"),
        ("opencl://?subgroup_size=", "subgroup_size="),
        ("opencl://?workers=2", "'workers'"),
        ("opencl://?program_cache=", "program_cache"),
        ("opencl://?subgroups=fast", "subgroups=fast"),
        ("opencl://?khr_command_buffer=yes", "khr_command_buffer=yes"),
        ("opencl://?device_local_mappable=maybe", "device_local_mappable=maybe"),
    ] {
        let error = create(uri).err().unwrap_or_else(|| panic!("{uri} was accepted"));
        assert_eq!(error.code(), StatusCode::InvalidArgument, "{uri}: {error}");
        assert!(error.to_string().contains(named), "{uri}: {error}");
    }
}

#[test]
fn devices_are_named_by_ordinal_and_by_platform_and_device() {
    let device = match create("opencl://0") {
        Ok(device) => device,
        Err(error) if error.is_unavailable() => {
            println!("devices_are_named_by_ordinal_and_by_platform_and_device: skipped: {error}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    let path = device.info().path.clone();
    assert!(path.contains('/'), "{path}");
    let same = create(&format!("opencl://{path}?subgroup_size=16")).unwrap();
    assert_eq!(same.info().id, device.info().id);
    assert_eq!(same.query_i64("hal.device.id", "vulkan*").unwrap(), 1);
    assert_eq!(same.query_i64("hal.executable.format", "vulkan-spirv-fb").unwrap(), 1);
    let error = create("opencl://99/99").err().unwrap();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
}

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/executables")
        .join(name);
    std::fs::read(path).unwrap()
}

/// `elementwise_i32`'s executable with its SPIR-V's `LocalSize 1 1 1` made `x 1 1`.
fn with_workgroup_width(x: u32) -> Vec<u8> {
    let mut bytes = fixture("elementwise_i32.vulkan-spirv-fb.fb");
    let local_size: Vec<u8> = [(6u32 << 16) | 16]
        .iter()
        .chain(&[17u32, 1, 1, 1])
        .flat_map(|w| w.to_le_bytes())
        .collect();
    // The instruction is opcode and count, the entry point's id, then the mode and its sizes.
    let at = bytes
        .windows(24)
        .position(|w| w[..4] == local_size[..4] && w[8..] == local_size[4..])
        .expect("LocalSize 1 1 1 in the fixture");
    bytes[at + 12..at + 16].copy_from_slice(&x.to_le_bytes());
    bytes
}

/// A kernel whose workgroup is larger than the device runs is refused when prepared, naming the
/// size, and the device goes on preparing and running others.
#[test]
fn a_workgroup_past_the_device_limit_is_refused_and_the_device_keeps_working() {
    let device = match create("opencl://") {
        Ok(device) => device,
        Err(error) if error.is_unavailable() => {
            println!("a_workgroup_past_the_device_limit_is_refused_and_the_device_keeps_working: skipped: {error}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    let cache = device.create_executable_cache().unwrap();
    let prepare = |data: &[u8]| {
        cache.prepare_executable(&halo_hal::ExecutableParams {
            format: "vulkan-spirv-fb",
            data,
            constants: &[],
        })
    };
    let error = prepare(&with_workgroup_width(60000))
        .err()
        .expect("a 60000-wide workgroup was accepted");
    assert_eq!(error.code(), StatusCode::ResourceExhausted, "{error}");
    assert!(error.to_string().contains("60000x1x1"), "{error}");
    let error = prepare(&with_workgroup_width(70000))
        .err()
        .expect("a 70000-wide workgroup was accepted");
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    let executable = prepare(&fixture("elementwise_i32.vulkan-spirv-fb.fb")).unwrap();
    assert_eq!(executable.export_info(0).unwrap().workgroup_size, [1, 1, 1]);
}

static OPENCL: halo_cts::Manifest = halo_cts::Manifest {
    driver: "opencl",
    device_uri: "opencl://",
    executable_format: "vulkan-spirv-fb",
    tags: &[],
    unsupported: &[],
    expected_failures: &[],
    isolation: halo_cts::Isolation::Shared,
};

/// The program cache's counters, in `CacheCounters::KEYS` order.
fn cache_counts(device: &Arc<dyn Device>) -> [i64; 4] {
    ["hits", "misses", "rejected", "write_failures"].map(|key| device.query_i64("opencl.program_cache", key).unwrap())
}

/// A fresh device on `dir` runs a dispatch (checking its output) and reports its cache counters.
fn dispatch_with_cache(dir: &std::path::Path) -> [i64; 4] {
    let device = create(&format!("opencl://?program_cache={}", dir.display())).unwrap();
    let context = halo_cts::CtsDevice::new(device.clone(), &OPENCL, halo_cts::Recording::Direct, create);
    halo_cts::cases::dispatch::dispatch_writes_output(&context);
    cache_counts(&device)
}

/// A second device builds from the binary the first one stored; a corrupt entry is rebuilt from
/// source and replaced, and the program runs right every time.
#[test]
fn built_programs_are_kept_on_disk_and_corrupt_entries_rebuilt() {
    if let Err(error) = create("opencl://") {
        println!("built_programs_are_kept_on_disk_and_corrupt_entries_rebuilt: skipped: {error}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("halo-opencl-program-cache-{}", std::process::id()));
    assert_eq!(
        dispatch_with_cache(&dir),
        [0, 1, 0, 0],
        "cold: one program built and stored"
    );
    assert_eq!(
        dispatch_with_cache(&dir),
        [1, 0, 0, 0],
        "warm: built from the stored binary"
    );
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flat_map(|folder| std::fs::read_dir(folder.unwrap().path()).unwrap())
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let mut bytes = std::fs::read(&entries[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&entries[0], &bytes).unwrap();
    assert_eq!(dispatch_with_cache(&dir), [0, 1, 1, 0], "corrupt: rejected and rebuilt");
    assert_eq!(dispatch_with_cache(&dir), [1, 0, 0, 0], "the rebuilt entry replaced it");
    let off = create("opencl://?program_cache=off").unwrap();
    let error = off.query_i64("opencl.program_cache", "hits").unwrap_err();
    assert!(error.to_string().contains("off"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An executable loaded twice while the first is alive shares its program: no second lookup.
#[test]
fn a_program_in_use_is_shared_by_later_loads() {
    let dir = std::env::temp_dir().join(format!("halo-opencl-program-share-{}", std::process::id()));
    let device = match create(&format!("opencl://?program_cache={}", dir.display())) {
        Ok(device) => device,
        Err(error) => {
            println!("a_program_in_use_is_shared_by_later_loads: skipped: {error}");
            return;
        }
    };
    let cache = device.create_executable_cache().unwrap();
    let data = fixture("multi_export.vulkan-spirv-fb.fb");
    let params = halo_hal::ExecutableParams {
        format: "vulkan-spirv-fb",
        data: &data,
        constants: &[],
    };
    let first = cache.prepare_executable(&params).unwrap();
    let _second = cache.prepare_executable(&params).unwrap();
    assert_eq!(cache_counts(&device), [0, 1, 0, 0]);
    drop((first, _second));
    let _third = cache.prepare_executable(&params).unwrap();
    assert_eq!(cache_counts(&device), [1, 1, 0, 0], "released, then loaded from disk");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With `device_local_mappable=false` device-local buffers are the device's own memory: not
/// host-visible, not mappable, zeroed, and reached through queue copies (`halo_hal::transfer`);
/// host-visible buffers stay mappable.
#[test]
fn unmapped_device_memory_is_reached_through_the_queue() {
    let device = match create("opencl://?device_local_mappable=false") {
        Ok(device) => device,
        Err(error) => {
            println!("unmapped_device_memory_is_reached_through_the_queue: skipped: {error}");
            return;
        }
    };
    use halo_hal::{transfer, BufferParams, MemoryType};
    let heaps = device.allocator().memory_heaps();
    assert_eq!(heaps.len(), 2, "{heaps:?}");
    let buffer = device
        .allocator()
        .allocate_buffer(BufferParams::device_local(), 13)
        .unwrap();
    assert!(!buffer.memory_type().contains(MemoryType::HOST_VISIBLE));
    assert!(!transfer::host_mappable(&buffer));
    let error = buffer.map_read(0, &mut [0u8; 4]).unwrap_err();
    assert!(error.message().contains("HOST_VISIBLE"), "{error}");
    let mut bytes = [0xAAu8; 13];
    transfer::read(device.as_ref(), &buffer, 0, &mut bytes).unwrap();
    assert_eq!(bytes, [0; 13], "new device memory is zeroed");
    transfer::write(device.as_ref(), &buffer, 3, &[1, 2, 3, 4, 5, 6, 7]).unwrap();
    let mut middle = [0u8; 9];
    transfer::read(device.as_ref(), &buffer, 2, &mut middle).unwrap();
    assert_eq!(middle, [0, 1, 2, 3, 4, 5, 6, 7, 0]);
    let error = transfer::read(device.as_ref(), &buffer, 10, &mut [0u8; 4]).unwrap_err();
    assert!(error.message().contains("[10, 14)"), "{error}");
    let mappable = device
        .allocator()
        .allocate_buffer(BufferParams::host_mappable(), 8)
        .unwrap();
    assert!(transfer::host_mappable(&mappable));
    // Host memory a device with memory of its own may cache: mappings sync it through the queue.
    assert!(!mappable.memory_type().contains(MemoryType::HOST_COHERENT));
    mappable.map_write(0, &[9, 8, 7, 6, 5, 4, 3, 2]).unwrap();
    transfer::write(device.as_ref(), &buffer, 0, &mappable.read_all().unwrap()).unwrap();
    let mut back = [0u8; 8];
    transfer::read(device.as_ref(), &buffer, 0, &mut back).unwrap();
    assert_eq!(back, [9, 8, 7, 6, 5, 4, 3, 2]);
    let statistics = device.allocator().statistics();
    assert_eq!(statistics.bytes_allocated, 21, "{statistics:?}");
    // The default on PoCL, a CPU device: one heap of host memory, device-local buffers mappable.
    let shared = create("opencl://").unwrap();
    assert_eq!(shared.allocator().memory_heaps().len(), 1);
    let local = shared
        .allocator()
        .allocate_buffer(BufferParams::device_local(), 4)
        .unwrap();
    assert!(transfer::host_mappable(&local));
    assert!(local.memory_type().contains(MemoryType::HOST_COHERENT));
}

/// The command buffers' counters, `recorded` and `replayed`.
fn replay_counts(device: &Arc<dyn Device>) -> [i64; 2] {
    ["recorded", "replayed"].map(|key| device.query_i64("opencl.command_buffers", key).unwrap())
}

/// A reusable command buffer that writes `a` (an update), negates it into `out` and fills the
/// last 8 bytes of `out` with 0x7f: through slots 0 and 1 when `slots`, else naming the buffers.
fn negate_program(
    context: &halo_cts::CtsDevice,
    a: &halo_hal::Buffer,
    out: &halo_hal::Buffer,
    slots: bool,
) -> Arc<halo_hal::CommandBuffer> {
    use halo_hal::{BufferRef, CommandBufferMode, CommandCategory, DispatchCommand, QueueAffinity, WorkgroupCount};
    let reference = |slot: u32, buffer: &halo_hal::Buffer, offset: u64, length: u64| {
        if slots {
            BufferRef::slot(slot, offset, length)
        } else {
            BufferRef::direct(buffer, offset, length)
        }
    };
    let command_buffer = context
        .device
        .create_command_buffer(CommandBufferMode::empty(), CommandCategory::ANY, QueueAffinity::ANY, 2)
        .unwrap();
    command_buffer.begin().unwrap();
    let values: Vec<u8> = (1..=8).flat_map(|v| (v as f32).to_le_bytes()).collect();
    command_buffer.update_buffer(&values, reference(0, a, 0, 32)).unwrap();
    command_buffer.execution_barrier().unwrap();
    command_buffer
        .dispatch(DispatchCommand {
            executable: context.executable("multi_export"),
            export: 0,
            workgroup_count: WorkgroupCount::Static([1, 1, 1]),
            constants: Vec::new(),
            bindings: vec![reference(0, a, 0, 32), reference(1, out, 0, 32)],
        })
        .unwrap();
    command_buffer.execution_barrier().unwrap();
    command_buffer.fill_buffer(reference(1, out, 24, 8), &[0x7f]).unwrap();
    command_buffer.end().unwrap();
    command_buffer
}

/// Submits `command_buffer` with `table` after zeroing `out`, and checks what it wrote.
fn submit_and_check(
    context: &halo_cts::CtsDevice,
    command_buffer: &Arc<halo_hal::CommandBuffer>,
    table: &[halo_hal::Binding],
    out: &halo_hal::Buffer,
) {
    out.map_write(0, &[0; 32]).unwrap();
    context.submit_and_wait(command_buffer, table).unwrap();
    let bytes = out.read_all().unwrap();
    let negated: Vec<f32> = bytes[..24]
        .chunks_exact(4)
        .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(negated, [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);
    assert_eq!(bytes[24..], [0x7f; 8]);
}

/// Reusable command buffers are recorded through cl_khr_command_buffer: one naming its buffers at
/// its first submission, one with slots when a table comes back; each later submission enqueues
/// the recording, with the same results as issuing the commands. `khr_command_buffer=false`
/// never records.
#[test]
fn reusable_command_buffers_are_recorded_once_and_replayed() {
    let test = "reusable_command_buffers_are_recorded_once_and_replayed";
    let device = match create("opencl://") {
        Ok(device) => device,
        Err(error) => {
            println!("{test}: skipped: {error}");
            return;
        }
    };
    if device.query_i64("opencl.command_buffers", "recording").unwrap() == 0 {
        println!("{test}: skipped: the device has no cl_khr_command_buffer 0.9.0");
        return;
    }
    let context = halo_cts::CtsDevice::new(device.clone(), &OPENCL, halo_cts::Recording::Direct, create);
    let (a, out) = (context.buffer(32), context.buffer(32));
    let direct = negate_program(&context, &a, &out, false);
    for _ in 0..3 {
        submit_and_check(&context, &direct, &[], &out);
    }
    assert_eq!(replay_counts(&device), [1, 3], "recorded at once, then replayed");

    let with_slots = negate_program(&context, &a, &out, true);
    let table = [halo_hal::Binding::whole(&a), halo_hal::Binding::whole(&out)];
    for _ in 0..3 {
        submit_and_check(&context, &with_slots, &table, &out);
    }
    assert_eq!(replay_counts(&device), [2, 5], "recorded when its table came back");
    let other = context.buffer(32);
    let table = [halo_hal::Binding::whole(&a), halo_hal::Binding::whole(&other)];
    submit_and_check(&context, &with_slots, &table, &other);
    assert_eq!(replay_counts(&device), [2, 5], "a new table runs directly");

    let off = create("opencl://?khr_command_buffer=false").unwrap();
    assert_eq!(off.query_i64("opencl.command_buffers", "recording").unwrap(), 0);
    let context = halo_cts::CtsDevice::new(off.clone(), &OPENCL, halo_cts::Recording::Direct, create);
    let (a, out) = (context.buffer(32), context.buffer(32));
    let direct = negate_program(&context, &a, &out, false);
    for _ in 0..2 {
        submit_and_check(&context, &direct, &[], &out);
    }
    assert_eq!(replay_counts(&off), [0, 0]);
}

/// `subgroups=native` is refused, naming what is missing, by a device that cannot make its
/// subgroups the program's width (PoCL); where one can (Intel's CPU runtime) it runs a model's
/// reductions with the built-ins. `subgroups=emulated` works everywhere.
#[test]
fn native_subgroups_are_used_where_the_device_has_them() {
    let test = "native_subgroups_are_used_where_the_device_has_them";
    if let Err(error) = create("opencl://") {
        println!("{test}: skipped: {error}");
        return;
    }
    create("opencl://?subgroups=emulated").unwrap();
    match create("opencl://?subgroups=native") {
        Ok(device) => {
            let cache = device.create_executable_cache().unwrap();
            let data = fixture("reduction_f32.vulkan-spirv-fb.fb");
            let executable = cache.prepare_executable(&halo_hal::ExecutableParams {
                format: "vulkan-spirv-fb",
                data: &data,
                constants: &[],
            });
            assert!(executable.is_ok(), "{:?}", executable.err());
        }
        Err(error) => {
            assert_eq!(error.code(), StatusCode::Unimplemented, "{error}");
            assert!(error.to_string().contains("cl_intel_required_subgroup_size"), "{error}");
        }
    }
}

/// A submission that waits on a timepoint a submission already on the queue will signal is
/// issued at once, its wait met on the device (the in-order queue runs it after the first), and
/// sees what the first wrote. (A submission held back by a host gate keeps the queue from being
/// idle, so the first is queued rather than run to completion on the calling thread.)
#[test]
fn a_wait_on_queued_work_is_met_on_the_device() {
    use halo_hal::{BufferRef, CommandBufferMode, CommandCategory, Fence, QueueAffinity, Timeout};
    let test = "a_wait_on_queued_work_is_met_on_the_device";
    let device = match create("opencl://") {
        Ok(device) => device,
        Err(error) => {
            println!("{test}: skipped: {error}");
            return;
        }
    };
    let context = halo_cts::CtsDevice::new(device.clone(), &OPENCL, halo_cts::Recording::Direct, create);
    const SIZE: u64 = 64 << 20;
    let (big, small) = (context.buffer(SIZE), context.buffer(16));
    let record = |build: &dyn Fn(&halo_hal::CommandBuffer)| {
        let command_buffer = device
            .create_command_buffer(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, QueueAffinity::ANY, 0)
            .unwrap();
        command_buffer.begin().unwrap();
        build(&command_buffer);
        command_buffer.end().unwrap();
        command_buffer
    };
    let fill = || record(&|cb| cb.fill_buffer(BufferRef::direct(&big, 0, SIZE), &[7]).unwrap());
    let copy = || {
        record(&|cb| {
            let source = BufferRef::direct(&big, SIZE - 16, 16);
            cb.copy_buffer(source, BufferRef::direct(&small, 0, 16)).unwrap()
        })
    };
    // The second is met on the device only while the first is still running: a 64 MiB fill
    // outlasts a submission by far, but a descheduled test thread could miss it, so up to 5 tries.
    for attempt in 1..=5 {
        big.map_write(SIZE - 16, &[0; 16]).unwrap();
        let (first, second) = (device.create_semaphore(0).unwrap(), device.create_semaphore(0).unwrap());
        let (filled, copied) = (Fence::at(first, 1), Fence::at(second, 1));
        let gate = device.create_semaphore(0).unwrap();
        device
            .queue_execute(
                QueueAffinity::ANY,
                &Fence::at(gate.clone(), 1),
                &Fence::new(),
                None,
                &[],
            )
            .unwrap();
        device
            .queue_execute(QueueAffinity::ANY, &Fence::new(), &filled, Some(&fill()), &[])
            .unwrap();
        device
            .queue_execute(QueueAffinity::ANY, &filled, &copied, Some(&copy()), &[])
            .unwrap();
        copied.wait(Timeout::from(std::time::Duration::from_secs(60))).unwrap();
        gate.signal(1).unwrap();
        device
            .wait_idle(Timeout::from(std::time::Duration::from_secs(60)))
            .unwrap();
        assert_eq!(small.read_all().unwrap(), [7; 16], "attempt {attempt}");
        if device.query_i64("opencl.queue", "device_waits").unwrap() > 0 {
            return;
        }
    }
    panic!("no wait was met on the device in 5 tries");
}

/// While a long submission runs (fills of a large buffer), the device is held from when it went
/// onto the queue; once it finishes, the device is free. (A gate keeps the submission off the
/// calling thread, which would otherwise run it and wait for it inside `queue_execute`.)
#[test]
fn the_device_is_held_while_a_long_submission_runs() {
    use halo_hal::{BufferRef, Fence, QueueAffinity, Timeout};
    use std::time::{Duration, Instant};
    let test = "the_device_is_held_while_a_long_submission_runs";
    let device = match create("opencl://") {
        Ok(device) => device,
        Err(error) => {
            println!("{test}: skipped: {error}");
            return;
        }
    };
    let context = halo_cts::CtsDevice::new(device.clone(), &OPENCL, halo_cts::Recording::Direct, create);
    const SIZE: u64 = 256 << 20;
    let big = context.buffer(SIZE);
    let command_buffer = device.transfer_command_buffer(QueueAffinity::ANY).unwrap();
    for pattern in 0u8..16 {
        command_buffer
            .fill_buffer(BufferRef::direct(&big, 0, SIZE), &[pattern])
            .unwrap();
    }
    command_buffer.end().unwrap();
    let (gate, done) = (device.create_semaphore(0).unwrap(), device.create_semaphore(0).unwrap());
    device
        .queue_execute(
            QueueAffinity::ANY,
            &Fence::at(gate.clone(), 1),
            &Fence::at(done.clone(), 1),
            Some(&command_buffer),
            &[],
        )
        .unwrap();
    let gated = device.all_held_for();
    let opened = Instant::now();
    gate.signal(1).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let (held, at_most, running) = (device.all_held_for(), opened.elapsed(), done.query() == Ok(0));
    done.wait(1, Timeout::from(Duration::from_secs(60))).unwrap();
    assert_eq!(gated, Duration::ZERO, "a submission waiting for its gate holds nothing");
    assert!(
        running,
        "4 GiB of fills finished within 50 ms: the test needs longer work"
    );
    assert!(
        held >= Duration::from_millis(20) && held <= at_most,
        "held for {held:?}, {at_most:?} after the gate opened"
    );
    let finished = Instant::now();
    while device.all_held_for() != Duration::ZERO {
        assert!(
            finished.elapsed() < Duration::from_secs(10),
            "held after the submission finished"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
