//! Test inputs: reproducible pseudo-random floats in [-1, 1), and the activations to draw.

use crate::Activation;
use proptest::prelude::*;

/// `len` values from `seed` (xorshift), the same on every run and machine.
pub(crate) fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Any activation the kernels apply.
pub(crate) fn any_activation() -> impl Strategy<Value = Activation> {
    prop_oneof![
        Just(Activation::Identity),
        Just(Activation::Relu),
        Just(Activation::Relu6),
        Just(Activation::Silu),
        Just(Activation::HardSwish),
        Just(Activation::Gelu)
    ]
}
