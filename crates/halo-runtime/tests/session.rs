//! The embedding API on real compiled programs (fixtures/models): blocking and async calls,
//! coarse-fences functions, input checks against the declaration, device mismatches, and calls
//! cancelled from another thread.

mod common;

use halo_runtime::{tensor, AbiModel, CancelToken, HostTensor, Instance, Session, StatusCode, Value};
use std::path::Path;
use std::sync::Arc;

fn session(device: &str, module: &str) -> Session {
    let mut session = Session::new(&Instance::new(), &[device]).unwrap();
    session.load_module_file(&common::module(module)).unwrap();
    session
}

fn f32s(tensor: &HostTensor) -> Vec<f32> {
    tensor
        .bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn input(session: &Session, text: &str) -> Value {
    session.tensor_input(&HostTensor::parse(text).unwrap()).unwrap()
}

#[test]
fn blocking_call_adds_tensors_on_both_cpu_devices() {
    for device in ["local-sync", "local-task"] {
        let session = session(device, "tiny_add.vmfb");
        let function = session.function("tiny_add").unwrap();
        assert_eq!(function.abi_model(), AbiModel::Sync);
        assert_eq!(function.input_declaration(1).as_deref(), Some("tensor<4xf32>"));
        let (a, b) = ("4xf32=1.5 2 -3 4", "4xf32=10 20 30 0.25");
        let outputs = session
            .call(&function, &[input(&session, a), input(&session, b)])
            .unwrap();
        assert_eq!(outputs.len(), 1);
        let sum: Vec<f32> = f32s(&HostTensor::parse(a).unwrap())
            .iter()
            .zip(f32s(&HostTensor::parse(b).unwrap()))
            .map(|(x, y)| x + y)
            .collect();
        let result = tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap();
        assert_eq!(result.shape, vec![4]);
        assert_eq!(f32s(&result), sum, "on {device}");
    }
}

#[test]
fn coarse_fences_function_completes_through_its_signal_fence() {
    let session = session("local-task", "async_external.vmfb");
    let function = session.function("two_steps").unwrap();
    assert_eq!(function.abi_model(), AbiModel::CoarseFences);
    assert_eq!(function.argument_kinds(), vec!['r', 'r', 'f']);
    let inputs = vec![
        input(&session, "2x3xf32=1 2 3 4 5 6"),
        input(&session, "2x3xf32=0.5 0.5 0.5 -1 -1 -1"),
        Value::F32(2.0),
    ];
    let blocking = session.call(&function, &inputs).unwrap();
    let asynchronous = pollster::block_on(session.call_async(&function, inputs)).unwrap();
    for outputs in [&blocking, &asynchronous] {
        let sum = f32s(&tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap());
        assert_eq!(sum, vec![1.5, 2.5, 3.5, 3.0, 4.0, 5.0]);
        // Row sums of `sum`, scaled by the f32 argument.
        let expected: Vec<f32> = sum.chunks(3).map(|row| row.iter().sum::<f32>() * 2.0).collect();
        assert_eq!(
            f32s(&tensor::to_host(session.device().as_ref(), &outputs[1]).unwrap()),
            expected
        );
    }
}

#[test]
fn sync_function_called_async_runs_off_the_calling_thread() {
    let session = session("local-sync", "tiny_add.vmfb");
    let function = session.function("tiny_add").unwrap();
    let inputs = vec![input(&session, "4xf32=1 2 3 4"), input(&session, "4xf32=4")];
    let outputs = pollster::block_on(session.call_async(&function, inputs)).unwrap();
    assert_eq!(
        f32s(&tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap()),
        vec![5.0, 6.0, 7.0, 8.0]
    );
}

#[test]
fn wrong_inputs_are_reported_against_the_declaration() {
    let session = session("local-sync", "tiny_add.vmfb");
    let function = session.function("tiny_add").unwrap();
    let one = input(&session, "4xf32=1");

    let error = session.call(&function, std::slice::from_ref(&one)).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    let text = error.to_string();
    assert!(text.contains("takes 2 inputs but 1 were given"), "{text}");
    assert!(text.contains("sync func @tiny_add(%input0: tensor<4xf32>"), "{text}");

    let error = session.call(&function, &[one.clone(), Value::I32(3)]).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("input 1 of 'tiny_add' must be tensor<4xf32> but is an i32"),
        "{text}"
    );

    // Shape and element type are checked by the program itself (hal.buffer_view.assert).
    let error = session
        .call(&function, &[one.clone(), input(&session, "2x2xf32=1")])
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    assert!(error.to_string().contains("input1 shape rank mismatch"), "{error}");
    let error = session.call(&function, &[one, input(&session, "4xi32=1")]).unwrap_err();
    assert!(error.to_string().contains("input1 element type mismatch"), "{error}");
}

#[test]
fn unknown_function_lists_the_exports() {
    let session = session("local-sync", "tiny_add.vmfb");
    let error = session.function("tiny_sub").err().unwrap();
    assert_eq!(error.code(), StatusCode::NotFound);
    assert!(error.to_string().contains("exports: tiny_add"), "{error}");
}

#[test]
fn module_for_another_device_lists_the_session_devices() {
    let mut session = Session::new(&Instance::new(), &["local-sync"]).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny_add_vulkan.vmfb");
    let error = session.load_module_file(&path).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("not found or unavailable"), "{text}");
    let arch = if cfg!(target_arch = "aarch64") {
        "arm_64"
    } else {
        "x86_64"
    };
    let devices = format!("session's devices: local-sync (executable formats: embedded-elf-{arch}");
    assert!(text.contains(&devices), "{text}");
}

#[test]
fn unknown_driver_is_an_error_naming_it() {
    let error = Session::new(&Instance::new(), &["warp-drive"]).err().unwrap();
    assert!(error.to_string().contains("warp-drive"), "{error}");
}

#[test]
fn corrupt_module_is_rejected_by_the_loader() {
    let bytes = std::fs::read(common::module("tiny_add.vmfb")).unwrap();
    let dir = std::env::temp_dir().join(format!("halo-runtime-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut session = Session::new(&Instance::new(), &["local-sync"]).unwrap();
    // The last cut lands in the external rodata (the executable); the ZIP directory after it
    // is not needed, so cutting only that would be fine.
    for cut in [8, bytes.len() / 3, bytes.len() - 1000] {
        let path = dir.join(format!("cut{cut}.vmfb"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let error = session.load_module_file(&path).unwrap_err();
        assert!(error.to_string().contains(&format!("cut{cut}.vmfb")), "{error}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn printed_results_read_back_only_what_they_show() {
    for device in ["local-sync", "local-task"] {
        let session = session(device, "tiny_add.vmfb");
        let function = session.function("tiny_add").unwrap();
        let (a, b) = ("4xf32=1.5 2 -3 4", "4xf32=10 20 30 0.25");
        let outputs = session
            .call(&function, &[input(&session, a), input(&session, b)])
            .unwrap();
        let whole = tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap();
        for max in 0..=5 {
            let printed = halo_runtime::format_output(session.device().as_ref(), &outputs[0], max).unwrap();
            assert_eq!(
                printed,
                format!("hal.buffer_view\n{}", whole.format(max)),
                "max {max} on {device}"
            );
        }
    }
}

#[test]
fn a_call_waiting_on_local_sync_lets_the_call_it_waits_for_run() {
    use halo_hal::Fence;
    use halo_hal_module::HalFence;
    use halo_vm::ref_types::Ref;
    use std::sync::mpsc;
    use std::time::Duration;

    // Wait before signal across threads: the first call blocks inside its queue operation (on
    // local-sync, queue work runs on the calling thread) until the second call's signal. The
    // first must not hold the program while it waits, or the second could never run.
    let mut session = session("local-sync", "async_external.vmfb");
    let device = session.device().clone();
    let inputs = vec![
        input(&session, "2x3xf32=1 2 3 4 5 6"),
        input(&session, "2x3xf32=0.5 0.5 0.5 -1 -1 -1"),
        Value::F32(2.0),
    ];
    let fence = |fence: Option<Fence>| Value::Ref(fence.map(|f| Ref::new(HalFence(f))));
    let between = Fence::at(device.create_semaphore(0).unwrap(), 1);
    let done = Fence::at(device.create_semaphore(0).unwrap(), 1);
    let first: Vec<Value> = [
        inputs.clone(),
        vec![fence(Some(between.clone())), fence(Some(done.clone()))],
    ]
    .concat();
    let second: Vec<Value> = [inputs, vec![fence(None), fence(Some(between))]].concat();
    let context = Arc::new(std::mem::take(session.context_mut()));
    let (sender, finished) = mpsc::channel();
    for (name, arguments) in [("waiting", first), ("signalling", second)] {
        let (context, sender) = (context.clone(), sender.clone());
        std::thread::spawn(move || {
            let outcome = context.invoke("two_steps", &arguments);
            let _ = sender.send((name, outcome.map(|results| results.len())));
        });
        // The waiting call is inside its wait before the signalling one starts.
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..2 {
        let (name, outcome) = finished
            .recv_timeout(Duration::from_secs(30))
            .expect("both calls finish: the waiting call let the signalling one run");
        assert_eq!(outcome.unwrap(), 2, "the {name} call");
    }
    assert!(done.query().unwrap());
}

#[test]
fn an_asynchronous_call_looping_for_ever_stops_when_its_token_is_cancelled() {
    let session = session("local-sync", "control_flow.vmfb");
    let function = session.function("halve_until").unwrap();
    let endless = vec![input(&session, "4xf32=inf 20 30 40"), Value::F32(5.0)];
    let call = session.call_async(&function, endless);
    let token = CancelToken::new();
    call.cancel_with(token.clone());
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        token.cancel();
    });
    let error = pollster::block_on(call).unwrap_err();
    canceller.join().unwrap();
    assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
}

#[test]
fn a_program_looping_for_ever_on_its_input_stops_when_cancelled_and_the_session_goes_on() {
    for device in ["local-sync", "local-task"] {
        let session = Arc::new(session(device, "control_flow.vmfb"));
        let function = session.function("halve_until").unwrap();
        // Halving until the sum drops below 5 never ends when an element is infinite.
        let endless = vec![input(&session, "4xf32=inf 20 30 40"), Value::F32(5.0)];
        let token = CancelToken::new();
        let (done, outcome) = std::sync::mpsc::channel();
        let call = {
            let (session, function, token) = (session.clone(), function.clone(), token.clone());
            std::thread::spawn(move || done.send(session.call_cancellable(&function, &endless, &token)))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(outcome.try_recv().is_err(), "the endless call returned on {device}");
        token.cancel();
        let error = outcome
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the cancelled call still runs on {device}"))
            .unwrap_err();
        call.join().unwrap().unwrap();
        assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
        assert!(error.to_string().contains("calling 'halve_until'"), "{error}");
        // 100 halves five times before its sum is below 5.
        let inputs = [input(&session, "4xf32=10 20 30 40"), Value::F32(5.0)];
        let outputs = session
            .call_cancellable(&function, &inputs, &CancelToken::new())
            .unwrap();
        assert_eq!(outputs[1], Value::I32(5), "on {device}");
        let halved = f32s(&tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap());
        assert_eq!(halved, vec![0.3125, 0.625, 0.9375, 1.25], "on {device}");
    }
}

#[test]
fn a_call_waiting_for_a_long_kernel_gives_up_when_cancelled() {
    // The kernel steps 1024 values 2^21 times each (about a second on two cores): the call gives
    // up on it, in the program's own fence wait (sync) or in the caller's wait on the signal
    // fence (coarse fences).
    for (module, model) in [
        ("kernel_loop.vmfb", AbiModel::Sync),
        ("kernel_loop_async.vmfb", AbiModel::CoarseFences),
    ] {
        let session = Arc::new(session("local-task", module));
        let function = session.function("kernel_loop").unwrap();
        assert_eq!(function.abi_model(), model, "{module}");
        let inputs = vec![input(&session, "1024xi64=7"), input(&session, "i64=2097152")];
        let token = CancelToken::new();
        let (done, outcome) = std::sync::mpsc::channel();
        let call = {
            let (session, function, token) = (session.clone(), function.clone(), token.clone());
            std::thread::spawn(move || done.send(session.call_cancellable(&function, &inputs, &token)))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        token.cancel();
        let error = outcome
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the cancelled call in {module} still runs"))
            .expect_err("the call gave up before its kernel ended");
        call.join().unwrap().unwrap();
        assert_eq!(error.code(), StatusCode::Cancelled, "{module}: {error}");
        assert!(error.to_string().contains("'kernel_loop'"), "{error}");
    }
}
