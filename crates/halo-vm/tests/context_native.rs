//! Linking bytecode against native (Rust) modules: resolution by name and calling convention,
//! optional imports, dependency versions, and calls through imports.

use halo_hal::{Error, StatusCode};
use halo_vm::{BytecodeModule, Context, NativeModule, Value};
use std::path::Path;
use std::sync::Arc;

fn module(name: &str) -> Arc<BytecodeModule> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{name}.vmfb"));
    Arc::new(BytecodeModule::from_file(&path).unwrap())
}

fn other(version: u32, with_maybe: bool) -> Arc<NativeModule> {
    let mut builder = NativeModule::builder("other", version)
        .function("double", "0i_i", |args| {
            Ok(vec![Value::I32(args.i32(0)?.wrapping_mul(2))].into())
        })
        .unwrap();
    if with_maybe {
        builder = builder
            .function("maybe", "0i_i", |args| match args.i32(0)? {
                x if x < 0 => Err(Error::out_of_range("negative")),
                x => Ok(vec![Value::I32(x + 100)].into()),
            })
            .unwrap();
    }
    builder.build()
}

#[test]
fn calls_reach_native_functions() {
    let mut context = Context::new();
    context.add_native(other(2, false)).unwrap();
    context.add_bytecode(module("imports")).unwrap();
    assert_eq!(
        context.invoke("double_it", &[Value::I32(21)]).unwrap(),
        vec![Value::I32(42)]
    );
    // `other.maybe` is optional and absent: calling through it fails with NOT_FOUND, by name.
    let error = context.invoke("use_helper", &[Value::I32(1)]).unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(error.to_string().contains("other.maybe"), "{error}");
}

#[test]
fn native_errors_propagate_with_context() {
    let mut context = Context::new();
    context.add_native(other(3, true)).unwrap();
    let extra = NativeModule::builder("extra", 1)
        .function("probe", "0v_i", |_| Ok(vec![Value::I32(5)].into()))
        .unwrap();
    context.add_native(extra.build()).unwrap();
    context.add_bytecode(module("imports")).unwrap();
    assert_eq!(
        context.invoke("use_helper", &[Value::I32(1)]).unwrap(),
        vec![Value::I32(106)]
    );
    let error = context.invoke("use_helper", &[Value::I32(-1)]).unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange);
    assert!(error.to_string().contains("calling import 'other.maybe'"), "{error}");
}

#[test]
fn missing_or_old_dependencies_are_rejected() {
    let error = Context::new()
        .add_bytecode(module("imports"))
        .err()
        .expect("other is required");
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(error.to_string().contains("other"), "{error}");
    let mut context = Context::new();
    context.add_native(other(1, false)).unwrap();
    let error = context
        .add_bytecode(module("imports"))
        .err()
        .expect("version 1 is too old");
    assert_eq!(error.code(), StatusCode::Incompatible, "{error}");
}

#[test]
fn mismatched_calling_conventions_are_rejected() {
    let wrong = NativeModule::builder("other", 2)
        .function("double", "0I_I", |_| Ok(vec![].into()))
        .unwrap()
        .build();
    let mut context = Context::new();
    context.add_native(wrong).unwrap();
    let error = context.add_bytecode(module("imports")).err().expect("cconv mismatch");
    assert_eq!(error.code(), StatusCode::Incompatible, "{error}");
    assert!(error.to_string().contains("0i_i"), "{error}");
}

#[test]
fn invocation_checks_arguments_and_names() {
    let mut context = Context::new();
    context.add_bytecode(module("add")).unwrap();
    assert_eq!(
        context.invoke("add", &[Value::I32(2), Value::I32(3)]).unwrap(),
        vec![Value::I32(5)]
    );
    assert_eq!(
        context.invoke("m.add", &[Value::I32(-2), Value::I32(3)]).unwrap(),
        vec![Value::I32(1)]
    );
    let error = context.invoke("add", &[Value::I32(2)]).unwrap_err();
    assert!(error.to_string().contains("1 arguments given"), "{error}");
    let error = context.invoke("add", &[Value::F32(2.0), Value::I32(3)]).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    let error = context.invoke("sub", &[]).unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound);
    assert!(error.to_string().contains("exports: add"), "{error}");
    let error = context.add_bytecode(module("add")).err().expect("duplicate module");
    assert_eq!(error.code(), StatusCode::AlreadyExists);
}

#[test]
fn yieldable_calls_resume_at_their_resume_block() {
    let mut context = Context::new();
    context.add_native(other(2, false)).unwrap();
    context.add_bytecode(module("yieldable")).unwrap();
    assert_eq!(
        context.invoke("double_plus_one", &[Value::I32(5)]).unwrap(),
        vec![Value::I32(11)]
    );
    assert_eq!(
        context.invoke("double_plus_one", &[Value::I32(-3)]).unwrap(),
        vec![Value::I32(-1)]
    );
}

/// `other.double` as a waiting function that waits for `fence` and counts its calls.
fn waiting_other(fence: halo_hal::Fence, calls: Arc<std::sync::atomic::AtomicUsize>) -> Arc<NativeModule> {
    NativeModule::builder("other", 2)
        .waiting_function(
            "double",
            "0i_i",
            move |_| Ok(Some(fence.clone())),
            move |args| {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(vec![Value::I32(args.i32(0)? * 2)].into())
            },
        )
        .unwrap()
        .build()
}

#[test]
fn invocations_suspend_at_waiting_functions_until_the_fence_is_reached() {
    use halo_hal::{Fence, Semaphore, TimelineSemaphore};
    use halo_vm::interp::{Invocation, Step};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let semaphore = TimelineSemaphore::new(0);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut context = Context::new();
    context
        .add_native(waiting_other(Fence::at(semaphore.clone(), 1), calls.clone()))
        .unwrap();
    let instance = context.add_bytecode(module("yieldable")).unwrap();
    let (_, ordinal) = context.lookup("double_plus_one").unwrap();

    let mut invocation = Invocation::new(instance.clone(), ordinal, &[Value::I32(5)]).unwrap();
    for _ in 0..2 {
        match invocation.resume().unwrap() {
            Step::Wait(fence) => assert!(!fence.query().unwrap()),
            Step::Done(_) => panic!("finished before its fence was reached"),
        }
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the waiting function ran before its fence"
    );
    semaphore.signal(1).unwrap();
    match invocation.resume().unwrap() {
        Step::Done(results) => assert_eq!(results, vec![Value::I32(11)]),
        Step::Wait(_) => panic!("still waiting after the fence was reached"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // A failed fence fails the suspended invocation with the fence's error.
    let failing = TimelineSemaphore::new(0);
    let mut context = Context::new();
    context
        .add_native(waiting_other(Fence::at(failing.clone(), 1), calls.clone()))
        .unwrap();
    let instance = context.add_bytecode(module("yieldable")).unwrap();
    let mut invocation = Invocation::new(instance, ordinal, &[Value::I32(5)]).unwrap();
    assert!(matches!(invocation.resume().unwrap(), Step::Wait(_)));
    failing.fail(Error::new(StatusCode::DataLoss, "device fell over"));
    let error = invocation.resume().unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    assert!(error.to_string().contains("device fell over"), "{error}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// `other.double` in a leaf module, blocking until two calls are inside it at once or `patience`
/// passes; returns the doubled value if they were, -1 if not.
fn rendezvous_other(blocking: bool, patience: std::time::Duration) -> Arc<NativeModule> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    let inside = Arc::new(AtomicUsize::new(0));
    let double = move |args: &halo_vm::Args<'_>| {
        inside.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + patience;
        while inside.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let met = inside.load(Ordering::SeqCst) >= 2;
        Ok(vec![Value::I32(if met { args.i32(0)? * 2 } else { -1 })].into())
    };
    let builder = NativeModule::builder("other", 2).leaf();
    let builder = if blocking {
        builder.blocking_function("double", "0i_i", double)
    } else {
        builder.function("double", "0i_i", double)
    };
    builder.unwrap().build()
}

/// Results of `double_it(1)` and `double_it(2)` invoked at once on two threads.
fn concurrent_doubles(other: Arc<NativeModule>) -> Vec<i32> {
    let mut context = Context::new();
    context.add_native(other).unwrap();
    context.add_bytecode(module("imports")).unwrap();
    let context = Arc::new(context);
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let context = context.clone();
            std::thread::spawn(move || context.invoke("double_it", &[Value::I32(i + 1)]).unwrap())
        })
        .collect();
    let mut results: Vec<i32> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .map(|value| match value {
            Value::I32(x) => x,
            other => panic!("double_it returned {other:?}"),
        })
        .collect();
    results.sort();
    results
}

#[test]
fn invocations_overlap_inside_blocking_functions() {
    // Both invocations are inside `double` at once: the module state is not held across it.
    let results = concurrent_doubles(rendezvous_other(true, std::time::Duration::from_secs(10)));
    assert_eq!(results, vec![2, 4]);
}

#[test]
fn invocations_serialize_inside_leaf_functions() {
    // A plain leaf function keeps the module state locked: the first call gives up waiting for
    // the second, which enters only after it and finds the first's count.
    let results = concurrent_doubles(rendezvous_other(false, std::time::Duration::from_millis(200)));
    assert_eq!(results.len(), 2);
    assert_eq!(results[0], -1, "{results:?}");
    assert!(results[1] == 2 || results[1] == 4, "{results:?}");
}
