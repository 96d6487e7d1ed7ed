//! Interpreter paths no recorded IREE output covers: execution that would leave a function,
//! errors naming the failing instruction, chains longer than the hot loop's budget, and calls
//! cancelled from another thread.

use halo_hal::StatusCode;
use halo_vm::interp::Invocation;
use halo_vm::{BytecodeModule, CancelToken, Context, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn context(name: &str) -> Context {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/vm")
        .join(format!("{name}.vmfb"));
    let mut context = Context::new();
    context
        .add_bytecode(Arc::new(BytecodeModule::from_file(&path).unwrap()))
        .unwrap();
    context
}

#[test]
fn fail_with_status_zero_at_the_end_of_a_function_is_an_error() {
    // `vm.fail` with status 0 does not fail and continues with the next instruction; in these
    // functions there is none.
    let context = context("fail");
    for function in ["fail_with", "fail_plain"] {
        let error = context.invoke(function, &[Value::I32(0)]).unwrap_err();
        assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
        assert!(error.to_string().contains("falls off the end"), "{error}");
        assert!(error.to_string().contains(&format!("'fail.{function}'")), "{error}");
    }
}

#[test]
fn runtime_errors_name_the_bytecode_offset() {
    let context = context("fail");
    let error = context.invoke("fail_with", &[Value::I32(13)]).unwrap_err();
    assert_eq!(error.code(), StatusCode::Internal, "{error}");
    assert!(error.to_string().contains("at bytecode offset 1"), "{error}");
}

/// The values `iree-run-module` printed for a fixture case, in order.
fn recorded_values(case: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/vm/{case}.expected"));
    let text = std::fs::read_to_string(path).unwrap();
    let values = text.lines().filter_map(|line| line.split_once('='));
    values.map(|(_, value)| value.to_string()).collect()
}

fn printed(value: &Value) -> String {
    match value {
        Value::I32(v) => v.to_string(),
        Value::I64(v) => v.to_string(),
        other => panic!("unexpected result {other:?}"),
    }
}

#[test]
fn long_blocks_and_loops_run_past_the_chaining_budget() {
    // 1000 straight-line instructions (a checkpoint every 16 in debug builds, several within one
    // budget) and a loop of 100000 iterations (each a backward jump counted against the budget).
    let context = context("long_block");
    let results = context.invoke("chain", &[Value::I32(7)]).unwrap();
    assert_eq!(printed(&results[0]), recorded_values("long_block.seven")[0]);
    let context = self::context("perf_loop");
    let results = context.invoke("perf_loop", &[Value::I32(100000)]).unwrap();
    let recorded = recorded_values("perf_loop.n_100000");
    for index in [0, 2, 3] {
        assert_eq!(printed(&results[index]), recorded[index], "result {index}");
    }
}

#[test]
fn a_cancelled_call_stops_at_its_next_step_and_an_uncancelled_one_runs_to_its_end() {
    let context = context("perf_loop");
    let (instance, ordinal) = context.lookup("perf_loop").unwrap();
    let token = CancelToken::new();
    let results = instance
        .invoke_cancellable(ordinal, &[Value::I32(100000)], &token)
        .unwrap();
    let recorded = recorded_values("perf_loop.n_100000");
    for index in [0, 2, 3] {
        assert_eq!(printed(&results[index]), recorded[index], "result {index}");
    }
    // About two billion iterations: many minutes of work unless it stops.
    let canceller = {
        let token = token.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            token.cancel();
        })
    };
    let error = instance
        .invoke_cancellable(ordinal, &[Value::I32(i32::MAX)], &token)
        .unwrap_err();
    canceller.join().unwrap();
    assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
    assert!(error.to_string().contains("cancelled by its caller"), "{error}");
    assert!(error.to_string().contains("'perf_loop.perf_loop'"), "{error}");
    // A call that may suspend stops likewise, here before its first instruction.
    let mut invocation = Invocation::new(instance, ordinal, &[Value::I32(1)]).unwrap();
    invocation.cancel_with(token);
    assert_eq!(invocation.resume().unwrap_err().code(), StatusCode::Cancelled);
}

/// `func_util` with one byte of its initializer changed (found by the opcode sweep,
/// `halo-runtime`'s `bytecode_sweep --vm`): `global.store.i32` became `cond_br` back to the function's start,
/// so `__init` loops for ever.
fn looping_initializer() -> BytecodeModule {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vm/func_util.vmfb");
    let mut bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes[2368], 0x01, "the byte the damage is known for");
    bytes[2368] = 0x60;
    BytecodeModule::from_bytes(bytes).unwrap()
}

#[test]
fn an_initializer_that_never_ends_stops_when_its_load_is_cancelled() {
    let token = CancelToken::new();
    let canceller = {
        let token = token.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            token.cancel();
        })
    };
    let mut context = Context::new();
    let Err(error) = context.add_bytecode_cancellable(Arc::new(looping_initializer()), &token) else {
        panic!("the initializer ended");
    };
    canceller.join().unwrap();
    assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
    assert!(error.to_string().contains("initializing module 'func_util'"), "{error}");
    // The module was not added: the context takes it again, here its undamaged self.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vm/func_util.vmfb");
    context
        .add_bytecode_cancellable(Arc::new(BytecodeModule::from_file(&path).unwrap()), &CancelToken::new())
        .unwrap();
}
