//! The bytecode verifier on corrupted functions: every defect is an error naming the function,
//! the offset and the reason; nothing panics.

use halo_hal::StatusCode;
use halo_vm::context::verify;
use halo_vm::BytecodeModule;
use proptest::prelude::*;
use std::path::Path;

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/vm")
            .join(format!("{name}.vmfb")),
    )
    .unwrap()
}

/// The file offset of function `ordinal`'s bytecode, found through the loader.
fn function_offset(file: &[u8], ordinal: u32) -> usize {
    let module = BytecodeModule::from_bytes(file.to_vec()).unwrap();
    let code = module.function_bytecode(ordinal).unwrap();
    let base = module.bytes().as_slice().as_ptr() as usize;
    code.as_ptr() as usize - base
}

fn verify_error(file: Vec<u8>) -> String {
    let module = BytecodeModule::from_bytes(file).unwrap();
    let error = verify(&module).expect_err("corrupted bytecode must not verify");
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    error.to_string()
}

#[test]
fn real_modules_verify() {
    for name in ["recursion", "branches", "list_i32", "perf_loop", "calls"] {
        let module = BytecodeModule::from_bytes(bytes(name)).unwrap();
        verify(&module).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn unknown_opcode_is_named_with_its_offset() {
    let mut file = bytes("recursion");
    let at = function_offset(&file, 0);
    file[at + 1] = 0xF7; // first instruction after the block marker
    let error = verify_error(file);
    assert!(
        error.contains("function 'fib' at bytecode offset 1") && error.contains("unknown opcode 0xf7"),
        "{error}"
    );
}

#[test]
fn out_of_range_register_is_rejected() {
    // fib: `const.i32 2, %i1` at offset 1: opcode, 4-byte value, then the result register.
    let mut file = bytes("recursion");
    let at = function_offset(&file, 0);
    file[at + 6] = 0x40;
    let error = verify_error(file);
    assert!(error.contains("register %i64 out of range 4"), "{error}");
}

#[test]
fn branch_into_the_middle_of_a_block_is_rejected() {
    // fib: `cond_br %i2, ^0000001E, (), ^00000024, ()` at offset 0x0F: opcode, register, then the
    // true target.
    let mut file = bytes("recursion");
    let at = function_offset(&file, 0);
    file[at + 0x0F + 3] = 0x20;
    let error = verify_error(file);
    assert!(
        error.contains("branch target 32 is not the start of a block"),
        "{error}"
    );
}

#[test]
fn import_resolved_of_a_function_that_is_not_an_import_is_rejected() {
    // globals: a byte of function 2 (found by a mutation campaign) made `import.resolved` of
    // function 0, which the interpreter looked up in an import table of no entries.
    let mut file = bytes("globals");
    assert_eq!(file[896], 0);
    file[896] = 0x5C;
    let error = verify_error(file);
    assert!(
        error.contains("import.resolved names function 0, not an import"),
        "{error}"
    );
}

#[test]
fn missing_block_marker_is_rejected() {
    let mut file = bytes("recursion");
    let at = function_offset(&file, 0);
    file[at] = 0x22;
    let error = verify_error(file);
    assert!(error.contains("does not start with a block"), "{error}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Random corruption of any function's bytecode gives Ok or Err, never a panic.
    #[test]
    fn corrupted_bytecode_never_panics(flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8)) {
        let mut file = bytes("branches");
        let module = BytecodeModule::from_bytes(file.clone()).unwrap();
        let start = function_offset(&file, 0);
        let length = module.bytecode_data().len();
        for (offset, value) in flips {
            file[start + offset % length] = value;
        }
        if let Ok(module) = BytecodeModule::from_bytes(file) {
            let _ = verify(&module);
        }
    }
}
