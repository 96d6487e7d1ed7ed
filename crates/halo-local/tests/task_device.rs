//! Behaviour only `local-task` can show: concurrency, ordering under parallelism, failure
//! isolation, stress and shutdown.

use halo_cpu_executable::library::{HostImport, EMBEDDED_ELF_FORMAT};
use halo_hal::{
    Buffer, BufferParams, BufferRef, CommandBufferMode, CommandCategory, Device, DeviceInfo, DispatchCommand,
    Executable, ExecutableParams, Fence, QueueAffinity, Semaphore, StatusCode, Timeout, WorkgroupCount,
};
use halo_local::task::driver::TaskDeviceOptions;
use halo_local::task::TaskDevice;
use std::ffi::{c_int, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const ANY: QueueAffinity = QueueAffinity::ANY;
const WAIT: Duration = Duration::from_secs(30);

fn device_with(options: TaskDeviceOptions) -> Arc<TaskDevice> {
    let info = DeviceInfo {
        id: 0,
        path: "0".into(),
        name: "test".into(),
        details: Vec::new(),
    };
    Arc::new(TaskDevice::new(info, &options).unwrap())
}

/// A device that never runs regions inline, so every dispatch goes through the workers.
fn parallel_device() -> Arc<TaskDevice> {
    let mut options = TaskDeviceOptions::default();
    options.scheduling.inline_ns = Some(0);
    options.executor.worker_count = 2;
    device_with(options)
}

fn load(device: &dyn Device, path: &Path) -> Arc<dyn Executable> {
    let data = std::fs::read(path).unwrap();
    let params = ExecutableParams {
        format: EMBEDDED_ELF_FORMAT,
        data: &data,
        constants: &[],
    };
    device
        .create_executable_cache()
        .unwrap()
        .prepare_executable(&params)
        .unwrap()
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/executables")
        .join(name)
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn independent_submissions_do_not_wait_for_each_other() {
    let device = parallel_device();
    let (gate, first, second) = (
        device.create_semaphore(0).unwrap(),
        device.create_semaphore(0).unwrap(),
        device.create_semaphore(0).unwrap(),
    );
    let (a, b) = (
        device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), 64)
            .unwrap(),
        device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), 64)
            .unwrap(),
    );
    device
        .queue_fill(
            ANY,
            &Fence::at(gate.clone(), 1),
            &Fence::at(first.clone(), 1),
            &a,
            0,
            64,
            &[1],
        )
        .unwrap();
    device
        .queue_fill(ANY, &Fence::new(), &Fence::at(second.clone(), 1), &b, 0, 64, &[2])
        .unwrap();
    second.wait(1, Timeout::from(WAIT)).unwrap();
    assert_eq!(
        first.query().unwrap(),
        0,
        "the gated submission ran before its gate opened"
    );
    assert_eq!(b.read_all().unwrap(), vec![2u8; 64]);
    gate.signal(1).unwrap();
    first.wait(1, Timeout::from(WAIT)).unwrap();
    assert_eq!(a.read_all().unwrap(), vec![1u8; 64]);
}

#[test]
fn barriers_order_parallel_dispatches() {
    let device = parallel_device();
    let executable = load(
        device.as_ref(),
        &fixture(&format!("multi_export.{EMBEDDED_ELF_FORMAT}.so")),
    );
    let buffers: Vec<_> = (0..2)
        .map(|_| {
            device
                .allocator()
                .allocate_buffer(BufferParams::host_mappable(), 32)
                .unwrap()
        })
        .collect();
    buffers[0]
        .map_write(
            0,
            &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
                .map(f32::to_le_bytes)
                .concat(),
        )
        .unwrap();
    let cb = device
        .create_command_buffer(CommandBufferMode::empty(), CommandCategory::ANY, ANY, 0)
        .unwrap();
    cb.begin().unwrap();
    // Ten rounds of: double buffer 0 in place (2 workgroups), then negate it into buffer 1 and
    // back; each step reads what the previous one wrote, so a missing order shows in the result.
    for _ in 0..10 {
        let double = DispatchCommand {
            executable: executable.clone(),
            export: 1,
            workgroup_count: WorkgroupCount::Static([2, 1, 1]),
            constants: vec![],
            bindings: vec![BufferRef::whole(&buffers[0])],
        };
        cb.dispatch(double).unwrap();
        cb.execution_barrier().unwrap();
        for (from, to) in [(0, 1), (1, 0)] {
            let negate = DispatchCommand {
                executable: executable.clone(),
                export: 0,
                workgroup_count: WorkgroupCount::Static([1, 1, 1]),
                constants: vec![],
                bindings: vec![BufferRef::whole(&buffers[from]), BufferRef::whole(&buffers[to])],
            };
            cb.dispatch(negate).unwrap();
            cb.execution_barrier().unwrap();
        }
    }
    cb.end().unwrap();
    let done = device.create_semaphore(0).unwrap();
    for round in 1..=3u64 {
        device
            .queue_execute(ANY, &Fence::new(), &Fence::at(done.clone(), round), Some(&cb), &[])
            .unwrap();
        done.wait(round, Timeout::from(WAIT)).unwrap();
        let scale = 2f32.powi(10 * round as i32);
        assert_eq!(
            f32s(&buffers[0].read_all().unwrap()),
            (1..=8).map(|i| i as f32 * scale).collect::<Vec<_>>()
        );
    }
}

#[test]
fn ten_thousand_cross_dependent_submissions_from_four_threads() {
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 2500;
    let device = device_with(TaskDeviceOptions::default());
    let semaphores: Arc<Vec<Arc<dyn Semaphore>>> =
        Arc::new((0..THREADS).map(|_| device.create_semaphore(0).unwrap()).collect());
    let buffers: Arc<Vec<_>> = Arc::new(
        (0..THREADS)
            .map(|_| {
                device
                    .allocator()
                    .allocate_buffer(BufferParams::host_mappable(), PER_THREAD * 4)
                    .unwrap()
            })
            .collect(),
    );
    // Submission (t, i) copies element i-1 of thread t+1's buffer into element i of its own, after
    // its own previous submission and thread t+1's submission i-1; (t, 0) fills element 0 with t+1.
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (device, semaphores, buffers) = (device.clone(), semaphores.clone(), buffers.clone());
            thread::spawn(move || {
                let next = (t + 1) % THREADS;
                for i in 0..PER_THREAD {
                    let wait = Fence::join([
                        &Fence::at(semaphores[t].clone(), i),
                        &Fence::at(semaphores[next].clone(), i),
                    ]);
                    let signal = Fence::at(semaphores[t].clone(), i + 1);
                    if i == 0 {
                        device
                            .queue_fill(ANY, &wait, &signal, &buffers[t], 0, 4, &(t as u32 + 1).to_le_bytes())
                            .unwrap();
                    } else {
                        device
                            .queue_copy(ANY, &wait, &signal, &buffers[next], (i - 1) * 4, &buffers[t], i * 4, 4)
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    for (t, semaphore) in semaphores.iter().enumerate() {
        semaphore.wait(PER_THREAD, Timeout::from(WAIT)).unwrap();
        let values: Vec<u32> = buffers[t]
            .read_all()
            .unwrap()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let expected: Vec<u32> = (0..PER_THREAD as usize)
            .map(|i| ((t + i) % THREADS) as u32 + 1)
            .collect();
        assert_eq!(values, expected, "thread {t}");
    }
    device.wait_idle(Timeout::from(WAIT)).unwrap();
}

#[test]
fn dropping_the_device_cancels_waiting_work_and_finishes_running_work() {
    let device = parallel_device();
    let (gate, waiting, running) = (
        device.create_semaphore(0).unwrap(),
        device.create_semaphore(0).unwrap(),
        device.create_semaphore(0).unwrap(),
    );
    let big = device
        .allocator()
        .allocate_buffer(BufferParams::host_mappable(), 64 << 20)
        .unwrap();
    device
        .queue_fill(
            ANY,
            &Fence::new(),
            &Fence::at(running.clone(), 1),
            &big,
            0,
            64 << 20,
            &[7],
        )
        .unwrap();
    device
        .queue_fill(
            ANY,
            &Fence::at(gate.clone(), 1),
            &Fence::at(waiting.clone(), 1),
            &big,
            0,
            4,
            &[9],
        )
        .unwrap();
    drop(device);
    assert_eq!(
        running.query().unwrap(),
        1,
        "started work finishes before the device goes away"
    );
    let error = waiting.wait(1, Timeout::from(WAIT)).unwrap_err();
    assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
    // Opening the gate later must not run the cancelled work.
    gate.signal(1).unwrap();
    assert_eq!(&big.read_all().unwrap()[..4], &[7; 4]);
}

/// `out = halo_test_mul_add(i, k)`; fails with code 7 when k is 99.
unsafe extern "C" fn mul_add(params: *mut c_void, _context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: the kernel passes its packed `{ i32 result; i32 a; i32 b; }` params.
    unsafe {
        let p = params.cast::<i32>();
        let (a, b) = (*p.add(1), *p.add(2));
        if b == 99 {
            return 7;
        }
        *p = a * b + 1;
    }
    0
}

/// `library_import`'s executable (`out[i] = halo_test_mul_add(i, k)` for eight i32s).
fn import_executable(device: &dyn Device) -> Arc<dyn Executable> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../halo-cpu-executable/tests/data/library_import.{EMBEDDED_ELF_FORMAT}.so"
    ));
    load(device, &path)
}

/// Queues `executable` (from [`import_executable`]) with constant `k` over `workgroups`
/// workgroups, each writing the same eight values, to signal `signal` at 1; returns the output.
fn run_import(
    device: &TaskDevice,
    executable: &Arc<dyn Executable>,
    workgroups: u32,
    k: u32,
    signal: &Arc<dyn Semaphore>,
) -> Buffer {
    let out = device
        .allocator()
        .allocate_buffer(BufferParams::host_mappable(), 32)
        .unwrap();
    let cb = device
        .create_command_buffer(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, ANY, 0)
        .unwrap();
    cb.begin().unwrap();
    cb.dispatch(DispatchCommand {
        executable: executable.clone(),
        export: 0,
        workgroup_count: WorkgroupCount::Static([workgroups, 1, 1]),
        constants: vec![k],
        bindings: vec![BufferRef::whole(&out)],
    })
    .unwrap();
    cb.end().unwrap();
    device
        .queue_execute(ANY, &Fence::new(), &Fence::at(signal.clone(), 1), Some(&cb), &[])
        .unwrap();
    out
}

#[test]
fn a_failing_kernel_fails_only_its_submission() {
    let options = TaskDeviceOptions {
        imports: Arc::from([HostImport::new("halo_test_mul_add", mul_add)]),
        ..Default::default()
    };
    let device = device_with(options);
    let executable = import_executable(device.as_ref());
    let run = |k: u32, signal: &Arc<dyn Semaphore>| run_import(&device, &executable, 1, k, signal);
    let (failing, fine, after) = (
        device.create_semaphore(0).unwrap(),
        device.create_semaphore(0).unwrap(),
        device.create_semaphore(0).unwrap(),
    );
    let downstream = device.create_semaphore(0).unwrap();
    device
        .queue_barrier(ANY, &Fence::at(failing.clone(), 1), &Fence::at(downstream.clone(), 1))
        .unwrap();
    run(99, &failing);
    let out = run(3, &fine);
    let error = failing.wait(1, Timeout::from(WAIT)).unwrap_err();
    assert_eq!(error.code(), StatusCode::Internal, "{error}");
    assert!(
        error.to_string().contains("call_import") && error.to_string().contains("code 7"),
        "{error}"
    );
    assert_eq!(
        downstream.wait(1, Timeout::from(WAIT)).unwrap_err().code(),
        StatusCode::Internal
    );
    fine.wait(1, Timeout::from(WAIT)).unwrap();
    let values = i32s(&out.read_all().unwrap());
    assert_eq!(values, (0..8).map(|i| 3 * i + 1).collect::<Vec<_>>());
    let out = run(5, &after);
    after.wait(1, Timeout::from(WAIT)).unwrap();
    assert_eq!(
        &out.read_all().unwrap()[4..8],
        &6i32.to_le_bytes(),
        "the device stays usable"
    );
}

#[test]
fn finished_work_lets_go_of_its_buffers_before_it_signals() {
    // A program's next call asks for memory the moment the previous call's last signal is
    // reached; whatever the queue still held then would be taken twice over. Two dispatches
    // split by a barrier: the second is posted by the worker that finished the first, and may
    // finish (and signal) on the other worker before that post returns.
    let device = parallel_device();
    let executable = load(
        device.as_ref(),
        &fixture(&format!("multi_export.{EMBEDDED_ELF_FORMAT}.so")),
    );
    let params = BufferParams::host_mappable();
    for round in 0..5000 {
        let (gate, ran, released) = (
            device.create_semaphore(0).unwrap(),
            device.create_semaphore(0).unwrap(),
            device.create_semaphore(0).unwrap(),
        );
        let buffer = device
            .queue_alloca(ANY, &Fence::new(), &Fence::new(), params, 32)
            .unwrap();
        let memory = Arc::downgrade(buffer.allocation());
        let cb = device
            .create_command_buffer(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, ANY, 1)
            .unwrap();
        cb.begin().unwrap();
        for second in [false, true] {
            if second {
                cb.execution_barrier().unwrap();
            }
            cb.dispatch(DispatchCommand {
                executable: executable.clone(),
                export: 1,
                workgroup_count: WorkgroupCount::Static([2, 1, 1]),
                constants: vec![],
                bindings: vec![BufferRef::slot(0, 0, 32)],
            })
            .unwrap();
        }
        cb.end().unwrap();
        let table = [halo_hal::Binding::new(&buffer, 0, 32)];
        device
            .queue_execute(
                ANY,
                &Fence::at(gate.clone(), 1),
                &Fence::at(ran.clone(), 1),
                Some(&cb),
                &table,
            )
            .unwrap();
        let deallocated = round % 2 == 0;
        if deallocated {
            device
                .queue_dealloca(
                    ANY,
                    &Fence::at(ran.clone(), 1),
                    &Fence::at(released.clone(), 1),
                    &buffer,
                )
                .unwrap();
        }
        drop((cb, buffer));
        gate.signal(1).unwrap();
        let last = if deallocated { &released } else { &ran };
        last.wait(1, Timeout::from(WAIT)).unwrap();
        assert!(
            memory.upgrade().is_none(),
            "round {round}: the queue still held the buffer when it signalled"
        );
    }
}

/// Fills and copies larger than a transfer tile are cut into pieces the workers share: every byte
/// lands where one transfer would put it, at offsets that are not piece-aligned, and the bytes
/// around the range stay untouched.
#[test]
fn large_fills_and_copies_cut_into_pieces_write_every_byte_once() {
    let device = parallel_device();
    let size = 1_000_004usize;
    let allocate = || {
        device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), size as u64)
            .unwrap()
    };
    let (source, filled, copied) = (allocate(), allocate(), allocate());
    let pattern: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    source
        .map_range(halo_hal::MemoryAccess::WRITE, 0, size as u64)
        .unwrap()
        .write(0, &pattern)
        .unwrap();
    let done = device.create_semaphore(0).unwrap();
    let (fill_at, fill_len) = (12usize, 700_000usize);
    device
        .queue_fill(
            ANY,
            &Fence::new(),
            &Fence::at(done.clone(), 1),
            &filled,
            fill_at as u64,
            fill_len as u64,
            &[1, 2, 3, 4],
        )
        .unwrap();
    let (from, to, length) = (3usize, 100_001usize, 850_003usize);
    device
        .queue_copy(
            ANY,
            &Fence::at(done.clone(), 1),
            &Fence::at(done.clone(), 2),
            &source,
            from as u64,
            &copied,
            to as u64,
            length as u64,
        )
        .unwrap();
    done.wait(2, Timeout::from(WAIT)).unwrap();

    let mut expected = vec![0u8; size];
    for (i, byte) in expected[fill_at..fill_at + fill_len].iter_mut().enumerate() {
        *byte = [1, 2, 3, 4][i % 4];
    }
    assert!(filled.read_all().unwrap() == expected, "the fill's bytes differ");
    let mut expected = vec![0u8; size];
    expected[to..to + length].copy_from_slice(&pattern[from..from + length]);
    assert!(copied.read_all().unwrap() == expected, "the copy's bytes differ");
}

#[test]
fn with_one_core_the_submitting_thread_does_the_work_itself() {
    // On a thread allowed one core, the default device has one worker that could only take turns
    // with this thread: a 64 MiB fill (1024 pieces, milliseconds of work) is done by the time
    // queue_fill returns.
    let Some(core) = core_affinity::get_core_ids().and_then(|cores| cores.first().copied()) else {
        eprintln!("skipped with_one_core_the_submitting_thread_does_the_work_itself: no core list");
        return;
    };
    thread::spawn(move || {
        assert!(core_affinity::set_for_current(core), "cannot bind the test thread");
        let device = device_with(TaskDeviceOptions::default());
        assert_eq!(device.worker_count(), 1);
        let size = 64 << 20;
        let buffer = device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), size)
            .unwrap();
        let done = device.create_semaphore(0).unwrap();
        device
            .queue_fill(ANY, &Fence::new(), &Fence::at(done.clone(), 1), &buffer, 0, size, &[9])
            .unwrap();
        assert_eq!(done.query().unwrap(), 1, "the fill was left to the worker");
        assert!(buffer.read_all().unwrap().iter().all(|&b| b == 9));
    })
    .join()
    .unwrap();
}

/// Set once [`never_returning_mul_add`] is running; it returns only once `RELEASE` is set.
static STARTED: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);

/// `mul_add` for a kernel that does not return: blocks until the test releases it.
unsafe extern "C" fn never_returning_mul_add(
    params: *mut c_void,
    context: *mut c_void,
    reserved: *mut c_void,
) -> c_int {
    STARTED.store(true, Ordering::Release);
    while !RELEASE.load(Ordering::Acquire) {
        thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: the kernel's own arguments, passed on unchanged.
    unsafe { mul_add(params, context, reserved) }
}

#[test]
fn a_kernel_that_does_not_return_cannot_keep_the_device_from_dropping() {
    // A damaged kernel that loops for ever on the workers: the caller gives up (Ctrl-C), and the
    // program must still be able to drop its device and exit. Two workgroups, each writing the
    // same eight values, so that the dispatch goes to the workers (one would run inline).
    let mut options = TaskDeviceOptions {
        imports: Arc::from([HostImport::new("halo_test_mul_add", never_returning_mul_add)]),
        ..Default::default()
    };
    options.scheduling.inline_ns = Some(0);
    options.executor.worker_count = 2;
    options.executor.stop_wait = Duration::from_millis(300);
    let device = device_with(options);
    let executable = import_executable(device.as_ref());
    let done = device.create_semaphore(0).unwrap();
    let out = run_import(&device, &executable, 2, 4, &done);
    let begun = std::time::Instant::now();
    while !STARTED.load(Ordering::Acquire) {
        assert!(begun.elapsed() < WAIT, "the kernel never started");
        thread::sleep(Duration::from_millis(1));
    }
    let (dropped, dropping) = std::sync::mpsc::channel();
    thread::spawn(move || {
        drop(device);
        let _ = dropped.send(());
    });
    let outcome = dropping.recv_timeout(Duration::from_secs(20));
    // Read before the release: once released, the kernel may finish and signal at any moment
    // (under qemu it did, between the release and a later read).
    let before_release = done.query();
    RELEASE.store(true, Ordering::Release);
    assert!(
        outcome.is_ok(),
        "dropping the device waited for a kernel that does not return"
    );
    assert_eq!(
        before_release.unwrap(),
        0,
        "the kernel cannot have finished before its release"
    );
    // Released, the kernel left behind still finishes its work and signals.
    done.wait(1, Timeout::from(WAIT)).unwrap();
    let values = i32s(&out.read_all().unwrap());
    assert_eq!(values, (0..8).map(|i| 4 * i + 1).collect::<Vec<_>>());
}
