//! The verifier proves every register that calls and returns touch: argument and result registers
//! against the callee's calling convention (bank, width, aligned pairs inside the frame), return
//! registers against the function's own, and a function's arguments against its frame. Programs
//! that break any of this are rejected at load; programs that keep it run.

use halo_hal::StatusCode;
use halo_vm::cconv::Signature;
use halo_vm::ref_types::Buffer;
use halo_vm::ref_types::Ref;
use halo_vm::{BytecodeModule, Context, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vm")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("{name}.vmfb"))).unwrap()
}

/// Every VM fixture module's bytes, in file-name order.
fn all_fixtures() -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "vmfb"))
        .collect();
    paths.sort();
    paths.iter().map(|path| std::fs::read(path).unwrap()).collect()
}

/// File offsets of every function's calling-convention string.
fn cconv_positions(file: &[u8]) -> Vec<(usize, usize)> {
    let module = BytecodeModule::from_bytes(file.to_vec()).unwrap();
    let base = module.bytes().as_slice().as_ptr() as usize;
    (0..module.function_count())
        .filter_map(|ordinal| module.function_signature(ordinal)?.calling_convention)
        .map(|cconv| (cconv.as_ptr() as usize - base, cconv.len()))
        .collect()
}

/// A value of each calling-convention kind, for calling exports of mutated modules. Scalars are
/// zero: a mutant may read two i32 arguments as one i64 size, and any other pair of values makes
/// sizes of gigabytes that a program may then fill (a correct run, but not a quick one).
fn synthesized(kind: char) -> Value {
    match kind {
        'i' => Value::I32(0),
        'I' => Value::I64(0),
        'f' => Value::F32(0.0),
        'F' => Value::F64(0.0),
        _ => Value::Ref(Some(Ref::new(Buffer::zeroed(16).unwrap()))),
    }
}

/// Loads, verifies and links `file`, then calls every export with synthesized arguments under a
/// step limit. Any outcome but a panic is fine; returns whether the module linked.
fn run_every_export(file: Vec<u8>) -> bool {
    let Ok(module) = BytecodeModule::from_bytes(file) else {
        return false;
    };
    let module = Arc::new(module);
    let mut context = Context::new();
    context.limit_steps(10_000);
    let Ok(instance) = context.add_bytecode(module.clone()) else {
        return false;
    };
    for export in module.exports() {
        let Some(kinds) = module
            .function_signature(export.internal_ordinal)
            .and_then(|s| s.calling_convention)
            .and_then(|cconv| Signature::parse(cconv).ok())
            .and_then(|s| s.fixed_argument_kinds().map(<[char]>::to_vec))
        else {
            continue;
        };
        let args: Vec<Value> = kinds.iter().map(|&kind| synthesized(kind)).collect();
        let _ = instance.invoke(export.internal_ordinal, &args);
    }
    true
}

#[test]
fn every_one_letter_change_of_a_calling_convention_loads_or_fails_cleanly() {
    let (mut mutants, mut linked) = (0, 0);
    for file in all_fixtures() {
        for (at, len) in cconv_positions(&file) {
            for offset in 1..len {
                for letter in *b"iIfFrv_" {
                    if file[at + offset] == letter {
                        continue;
                    }
                    let mut mutant = file.clone();
                    mutant[at + offset] = letter;
                    mutants += 1;
                    linked += usize::from(run_every_export(mutant));
                }
            }
        }
    }
    assert!(mutants > 2000, "only {mutants} mutants");
    println!("{mutants} mutated calling conventions, {linked} of them linked and ran");
}

/// `calls` with the calling convention of function `ordinal` (`from`) replaced by `to`.
fn calls_with_cconv(ordinal: usize, from: &str, to: &str) -> halo_hal::Error {
    let mut file = fixture("calls");
    let (at, len) = cconv_positions(&file)[ordinal];
    assert_eq!(&file[at..at + len], from.as_bytes(), "function {ordinal} of 'calls'");
    file[at..at + len].copy_from_slice(to.as_bytes());
    let module = Arc::new(BytecodeModule::from_bytes(file).unwrap());
    match Context::new().add_bytecode(module) {
        Ok(_) => panic!("'calls' with '{to}' for '{from}' linked"),
        Err(error) => error,
    }
}

// The register numbers below are those of `iree-dump-module --output=disassembly calls.vmfb`.

#[test]
fn a_return_that_does_not_match_the_functions_results_is_rejected() {
    // inc returns %i1; as an i64 that would be half of the pair %i0:1.
    let error = calls_with_cconv(3, "0i_i", "0i_I");
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    let text = error.to_string();
    assert!(
        text.contains("result 0 of '0i_I' ('I')") && text.contains("aligned pair"),
        "{text}"
    );
}

#[test]
fn arguments_that_do_not_fit_the_frame_are_rejected() {
    // swap(i32, i32) uses two registers; two f64 arguments would need four.
    let error = calls_with_cconv(1, "0ii_ii", "0FF_ii");
    let text = error.to_string();
    assert!(text.contains("the arguments of '0FF_ii' need 4 i32"), "{text}");
}

#[test]
fn a_call_whose_registers_do_not_match_the_callee_is_rejected() {
    // divmod_all calls divmod(%i0, %i1); as (i32, i64) its second argument would have to be an
    // aligned pair, which %i1 is not. divmod itself still fits its frame.
    let error = calls_with_cconv(0, "0ii_ii", "0iI_ii");
    let text = error.to_string();
    assert!(text.contains("call"), "{text}");
    assert!(
        text.contains("argument 1 of '0iI_ii' ('I')") && text.contains("aligned pair"),
        "{text}"
    );
}

#[test]
fn a_callee_may_declare_fewer_registers_than_its_arguments_fill() {
    // asm_edges.ignores_its_i32 declares no register; its banks round up to one each.
    let module = Arc::new(BytecodeModule::from_bytes(fixture("asm_edges")).unwrap());
    let instance = Context::new().add_bytecode(module).unwrap();
    let ordinal = instance.module().find_export("call_with_unused_argument").unwrap();
    let results = instance.invoke(ordinal.internal_ordinal, &[Value::I32(5)]).unwrap();
    assert_eq!(format!("{results:?}"), "[i32=5, i32=1]");
}

#[test]
fn a_variant_list_item_of_another_type_reads_as_null() {
    let module = Arc::new(BytecodeModule::from_bytes(fixture("asm_edges")).unwrap());
    let instance = Context::new().add_bytecode(module).unwrap();
    let export = instance.module().find_export("variant_list_ref").unwrap();
    let results = instance.invoke(export.internal_ordinal, &[]).unwrap();
    // As a buffer it is the same buffer; as a list it is null.
    assert_eq!(format!("{results:?}"), "[i32=1, i32=0]");
}

#[test]
fn a_step_limit_ends_an_endless_loop() {
    // branches.collatz never reaches 1 from 0.
    let module = Arc::new(BytecodeModule::from_bytes(fixture("branches")).unwrap());
    let mut context = Context::new();
    context.limit_steps(1000);
    let instance = context.add_bytecode(module).unwrap();
    let export = instance.module().find_export("collatz").unwrap();
    let error = instance.invoke(export.internal_ordinal, &[Value::I64(0)]).unwrap_err();
    assert_eq!(error.code(), StatusCode::ResourceExhausted);
    assert!(error.to_string().contains("step limit"), "{error}");
    let finite = instance.invoke(export.internal_ordinal, &[Value::I64(6)]).unwrap();
    // The peak is 16; the step count reads back as 16 too, exactly as IREE's runtime returns it
    // (fixtures/vm/branches.collatz_27.expected), because iree-compile gives both the same register.
    assert_eq!(format!("{finite:?}"), "[i32=16, i64=16]");
}
