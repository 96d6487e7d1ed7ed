//! Loads arbitrary bytes as a `.vmfb` on a `local-sync` device with the `hal` module, and when it
//! loads (verification included), calls every export with synthesized arguments: zero scalars
//! and a small tensor for every ref. Each invocation may make a bounded number of interpreter
//! steps, so programs that loop for ever end with RESOURCE_EXHAUSTED. Any outcome but a crash,
//! hang or unbounded allocation is fine.
#![no_main]

use halo_runtime::{HostTensor, Instance, Session, Value};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

/// Interpreter steps one invocation may make.
const STEP_LIMIT: u64 = 100_000;

fuzz_target!(|data: &[u8]| {
    let Ok(module) = halo_vm::BytecodeModule::from_bytes(data.to_vec()) else {
        return;
    };
    let module = Arc::new(module);
    let Ok(mut session) = Session::new(&Instance::new(), &["local-sync"]) else {
        return;
    };
    session.context_mut().limit_steps(STEP_LIMIT);
    if session.load_module(module.clone()).is_err() {
        return;
    }
    let names: Vec<String> = module.exports().iter().map(|e| e.local_name.to_string()).collect();
    for name in names {
        let Ok(function) = session.function(&name) else {
            continue;
        };
        let Ok(tensor) = HostTensor::parse("4xf32=1") else {
            return;
        };
        let inputs: Option<Vec<Value>> = function
            .argument_kinds()
            .into_iter()
            .map(|kind| match kind {
                'i' => Some(Value::I32(0)),
                'I' => Some(Value::I64(0)),
                'f' => Some(Value::F32(0.0)),
                'F' => Some(Value::F64(0.0)),
                _ => session.tensor_input(&tensor).ok(),
            })
            .collect();
        if let Some(inputs) = inputs {
            let _ = session.call(&function, &inputs);
        }
    }
});
