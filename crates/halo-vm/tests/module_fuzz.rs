//! Property tests: corrupted and random input gives `Ok` or `Err`, never a panic or a hang, and
//! whatever loads can be read in full.

mod module_support;

use halo_vm::module::BytecodeModule;
use module_support::{module_bytes, touch_everything, Synth, MODULES};
use proptest::prelude::*;
use std::time::{Duration, Instant};

/// Loading must stay far below this however hostile the bytes (the largest test module is 9 KiB).
const LOAD_BUDGET: Duration = Duration::from_millis(500);

fn load_and_read(bytes: Vec<u8>) {
    let start = Instant::now();
    if let Ok(module) = BytecodeModule::from_bytes(bytes) {
        touch_everything(&module);
    }
    assert!(start.elapsed() < LOAD_BUDGET, "load took {:?}", start.elapsed());
}

fn flips() -> impl Strategy<Value = (usize, Vec<(usize, u8)>)> {
    (
        0..MODULES.len(),
        prop::collection::vec((any::<usize>(), 1..=255u8), 1..16),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random byte flips of the real modules.
    #[test]
    fn flipped_bytes_never_panic((module, flips) in flips()) {
        let mut bytes = module_bytes(MODULES[module]);
        let len = bytes.len();
        for (at, xor) in flips {
            bytes[at % len] ^= xor;
        }
        load_and_read(bytes);
    }

    /// Flips aimed at the FlatBuffer's first 1 KiB, where the root table, vtables and most
    /// offsets of these small modules are.
    #[test]
    fn flipped_flatbuffer_header_never_panics((module, flips) in flips()) {
        let mut bytes = module_bytes(MODULES[module]);
        let start = BytecodeModule::from_bytes(bytes.clone()).unwrap().layout().flatbuffer.start;
        let span = (bytes.len() - start).min(1024);
        for (at, xor) in flips {
            bytes[start + at % span] ^= xor;
        }
        load_and_read(bytes);
    }

    /// Random 32-bit values written over aligned words: plausible-looking but wrong offsets,
    /// lengths and counts.
    #[test]
    fn overwritten_words_never_panic(
        module in 0..MODULES.len(),
        words in prop::collection::vec((any::<usize>(), any::<u32>()), 1..6),
    ) {
        let mut bytes = module_bytes(MODULES[module]);
        let len = bytes.len() / 4;
        for (at, value) in words {
            let at = (at % len) * 4;
            bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        }
        load_and_read(bytes);
    }

    /// Arbitrary bytes, bare and behind a valid size prefix and identifier (so they reach the
    /// FlatBuffer verifier).
    #[test]
    fn random_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..4096), framed in any::<bool>()) {
        let bytes = if framed && body.len() >= 8 {
            let mut bytes = (body.len() as u32).to_le_bytes().to_vec();
            bytes.extend(&body);
            bytes[8..12].copy_from_slice(b"IREE");
            bytes
        } else {
            body
        };
        load_and_read(bytes);
    }

    /// Random descriptor fields, checked against the rules directly.
    #[test]
    fn descriptor_fields_are_checked(
        offset in -4i32..16,
        length in -4i32..16,
        blocks in -2i16..3,
        i32_registers in prop_oneof![Just(0x7FFFi16), Just(-0x8000i16), -2i16..4],
        ref_registers in prop_oneof![Just(0x3FFFi16), Just(0x4000i16), -2i16..4],
    ) {
        let mut synth = Synth::default();
        let f = &mut synth.functions[0];
        (f.offset, f.length, f.block_count, f.i32_registers, f.ref_registers) =
            (offset, length, blocks, i32_registers, ref_registers);
        let valid = offset >= 0
            && length > 0
            && offset + length <= synth.bytecode.len() as i32
            && blocks > 0
            && (0..=0x7FFF).contains(&i32_registers)
            && (0..=0x3FFF).contains(&ref_registers);
        let result = synth.load();
        prop_assert_eq!(result.is_ok(), valid, "{:?}", result.err());
    }
}
