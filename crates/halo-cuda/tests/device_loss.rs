//! A kernel that faults (it stores through a null pointer) loses the CUDA device: the
//! submission fails with the driver's error, later submissions fail at once saying the device
//! was lost, and nothing hangs. The fault poisons the process's primary context, so this test
//! has its binary to itself. Without the CUDA driver library or a GPU it says that it skipped.

use halo_hal::{
    BufferParams, BufferRef, CommandBuffer, CommandBufferMode, CommandCategory, Device, DispatchCommand,
    DriverRegistry, ExecutableParams, Fence, QueueAffinity, StatusCode, Timeout, WorkgroupCount,
};
use std::sync::Arc;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(60);

/// The `grid3d` fixture with its output pointer replaced by null (same length, so the
/// FlatBuffer around the PTX stays valid).
fn faulting_executable() -> Vec<u8> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables/grid3d.cuda-nvptx-fb.fb");
    let mut data = std::fs::read(path).unwrap();
    let load: &[u8] = b"ld.param.b64 \t%rd1, [ids_param_0];";
    let at = data
        .windows(load.len())
        .position(|w| w == load)
        .expect("the kernel loads its binding");
    let null = format!("{:<width$}", "mov.b64 %rd1, 0;", width = load.len());
    data[at..at + load.len()].copy_from_slice(null.as_bytes());
    data
}

/// Submits `command_buffer` with a semaphore of its own and waits for it.
fn submit_and_wait(device: &dyn Device, command_buffer: &Arc<CommandBuffer>) -> halo_hal::Result<()> {
    let done = device.create_semaphore(0)?;
    device.queue_execute(
        QueueAffinity::ANY,
        &Fence::new(),
        &Fence::at(done.clone(), 1),
        Some(command_buffer),
        &[],
    )?;
    done.wait(1, Timeout::from(PATIENCE))
}

#[test]
fn a_faulting_kernel_loses_the_device_and_later_work_fails_saying_so() {
    let mut registry = DriverRegistry::new();
    halo_cuda::register_drivers(&mut registry);
    let device: Arc<dyn Device> = match registry.create_device("cuda://") {
        Err(error) if error.is_unavailable() => {
            println!(
                "SKIPPED a_faulting_kernel_loses_the_device_and_later_work_fails_saying_so: device unavailable: {error}"
            );
            return;
        }
        other => other.expect("creating the CUDA device"),
    };
    let executable = device
        .create_executable_cache()
        .unwrap()
        .prepare_executable(&ExecutableParams {
            format: "cuda-nvptx-fb",
            data: &faulting_executable(),
            constants: &[],
        })
        .expect("the changed PTX still compiles");
    let output = device.allocator().allocate_buffer(BufferParams::default(), 96).unwrap();
    let command_buffer = device
        .create_command_buffer(
            CommandBufferMode::ONE_SHOT,
            CommandCategory::DISPATCH,
            QueueAffinity::ANY,
            0,
        )
        .unwrap();
    command_buffer.begin().unwrap();
    command_buffer
        .dispatch(DispatchCommand {
            executable,
            export: 0,
            workgroup_count: WorkgroupCount::Static([4, 3, 2]),
            constants: vec![],
            bindings: vec![BufferRef::whole(&output)],
        })
        .unwrap();
    command_buffer.end().unwrap();

    let fault = submit_and_wait(device.as_ref(), &command_buffer).expect_err("a store through null fails");
    assert_eq!(fault.code(), StatusCode::DataLoss, "{fault}");
    assert!(fault.to_string().contains("CUDA_ERROR_"), "{fault}");

    // Later work fails without reaching the driver, naming the loss and its cause.
    let fill = device.transfer_command_buffer(QueueAffinity::ANY).unwrap();
    fill.fill_buffer(BufferRef::whole(&output), &[7]).unwrap();
    fill.end().unwrap();
    let lost = submit_and_wait(device.as_ref(), &fill).expect_err("a lost device runs nothing");
    assert_eq!(lost.code(), StatusCode::DataLoss, "{lost}");
    assert!(lost.to_string().contains("device was lost"), "{lost}");
    device.wait_idle(Timeout::from(PATIENCE)).unwrap();
}
