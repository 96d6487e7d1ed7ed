//! Loads arbitrary bytes as a `.vmfb` and, when the container is valid, verifies every function.
//! Either step may reject the input; neither may crash, hang or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(module) = halo_vm::BytecodeModule::from_bytes(data.to_vec()) {
        let _ = halo_vm::context::verify(&module);
    }
});
