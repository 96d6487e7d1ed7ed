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
        .function("double", "0i_i", |args| match args {
            [Value::I32(x)] => Ok(vec![Value::I32(x.wrapping_mul(2))]),
            _ => Err(Error::invalid_argument("double takes one i32")),
        })
        .unwrap();
    if with_maybe {
        builder = builder
            .function("maybe", "0i_i", |args| match args {
                [Value::I32(x)] if *x < 0 => Err(Error::out_of_range("negative")),
                [Value::I32(x)] => Ok(vec![Value::I32(x + 100)]),
                _ => Err(Error::invalid_argument("maybe takes one i32")),
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
        .function("probe", "0v_i", |_| Ok(vec![Value::I32(5)]))
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
        .function("double", "0I_I", |_| Ok(vec![]))
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
