//! Activations of 16 sums at once, applied by the AVX-512 kernels before they store a vector.
//!
//! SiLU needs `e^-x`, which AVX-512F has no instruction for: [`exp`] reduces the argument to
//! `n ln 2 + r` with `|r| <= ln 2 / 2`, takes a degree-7 polynomial of `r` (Cephes' minimax
//! coefficients for `expf`, within 2 ulp) and scales by `2^n` with `vscalefps`. The reciprocal
//! in the sigmoid is `vrcp14ps` refined by one Newton step (within 2 ulp), not a division,
//! whose throughput of one vector every 10 cycles would cost as much as a 1x1 convolution's
//! FMAs.

use super::{Activation, ERF_LARGE, ERF_SMALL, ERF_SPLIT};
use std::arch::x86_64::{
    __m512, _mm512_abs_ps, _mm512_add_ps, _mm512_cmp_ps_mask, _mm512_fmadd_ps, _mm512_fnmadd_ps, _mm512_mask_blend_ps,
    _mm512_maskz_mul_ps, _mm512_max_ps, _mm512_min_ps, _mm512_mul_ps, _mm512_rcp14_ps, _mm512_roundscale_ps,
    _mm512_scalef_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_sub_ps, _CMP_LT_OQ, _CMP_NLT_UQ, _MM_FROUND_NO_EXC,
    _MM_FROUND_TO_NEAREST_INT,
};

/// `activation` of each lane of `sum`. `max` gives its second operand where the first is NaN,
/// so ReLU and ReLU6 take NaN to 0 as [`Activation::apply`] does.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn activated(activation: Activation, sum: __m512) -> __m512 {
    let zero = _mm512_setzero_ps();
    match activation {
        Activation::Identity => sum,
        Activation::Relu => _mm512_max_ps(sum, zero),
        Activation::Relu6 => _mm512_min_ps(_mm512_max_ps(sum, zero), _mm512_set1_ps(6.0)),
        Activation::Silu => silu(sum),
        Activation::HardSwish => hard_swish(sum),
        Activation::Gelu => gelu(sum),
    }
}

/// `x · (erf(x · (1/√2)) + 1) · 0.5`, as [`Activation::apply`] computes it.
#[target_feature(enable = "avx512f")]
#[inline]
fn gelu(x: __m512) -> __m512 {
    let e = erf(_mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2)));
    _mm512_mul_ps(
        _mm512_mul_ps(x, _mm512_add_ps(e, _mm512_set1_ps(1.0))),
        _mm512_set1_ps(0.5),
    )
}

/// `erf(x)` by the parent module's fits, both computed and the one for each lane's magnitude
/// kept. A NaN lane gives ±1 (the large fit at `min(NaN, 4) = 4`), which GELU's product by `x`
/// turns back into NaN.
#[target_feature(enable = "avx512f")]
#[inline]
fn erf(x: __m512) -> __m512 {
    let magnitude = _mm512_abs_ps(x);
    let small = _mm512_mul_ps(x, horner(&ERF_SMALL, _mm512_mul_ps(magnitude, magnitude)));
    let a = _mm512_min_ps(magnitude, _mm512_set1_ps(4.0));
    let complement = exp(_mm512_sub_ps(horner(&ERF_LARGE, a), _mm512_mul_ps(a, a)));
    let large = _mm512_sub_ps(_mm512_set1_ps(1.0), complement);
    let negative = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
    let large = _mm512_mask_blend_ps(negative, large, _mm512_sub_ps(_mm512_setzero_ps(), large));
    let is_small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(magnitude, _mm512_set1_ps(ERF_SPLIT));
    _mm512_mask_blend_ps(is_small, large, small)
}

/// The polynomial with `coefficients` (lowest power first) at each lane of `x`.
#[target_feature(enable = "avx512f")]
#[inline]
fn horner(coefficients: &[f32], x: __m512) -> __m512 {
    let (&last, rest) = coefficients.split_last().expect("a polynomial has a coefficient");
    rest.iter()
        .rev()
        .fold(_mm512_set1_ps(last), |p, &c| _mm512_fmadd_ps(p, x, _mm512_set1_ps(c)))
}

/// `x · min(max(x + 3, 0), 6) / 6`, the division a product by `1 / 6` (within an ulp of it, at
/// a tenth of its cost). NaN stays NaN (the last product is by `x` itself).
#[target_feature(enable = "avx512f")]
#[inline]
fn hard_swish(x: __m512) -> __m512 {
    let shifted = _mm512_add_ps(x, _mm512_set1_ps(3.0));
    let clipped = _mm512_min_ps(_mm512_max_ps(shifted, _mm512_setzero_ps()), _mm512_set1_ps(6.0));
    _mm512_mul_ps(_mm512_mul_ps(clipped, _mm512_set1_ps(1.0 / 6.0)), x)
}

/// `x · sigmoid(x)`. `-x` is held to ±87 first, where `e^-x` and its reciprocal are still normal
/// floats; below -87 the product is under 2e-36 and taken as 0 (`-inf` too, where the definition
/// gives NaN). NaN stays NaN.
#[target_feature(enable = "avx512f")]
#[inline]
fn silu(x: __m512) -> __m512 {
    let limit = _mm512_set1_ps(87.0);
    let minus_x = _mm512_sub_ps(_mm512_setzero_ps(), x);
    let t = _mm512_max_ps(_mm512_min_ps(minus_x, limit), _mm512_sub_ps(_mm512_setzero_ps(), limit));
    let d = _mm512_add_ps(exp(t), _mm512_set1_ps(1.0));
    let guess = _mm512_rcp14_ps(d);
    // r' = r (2 - d r): one Newton step doubles the 14 correct bits.
    let reciprocal = _mm512_mul_ps(guess, _mm512_fnmadd_ps(d, guess, _mm512_set1_ps(2.0)));
    // Unordered compares are true: NaN lanes keep their product.
    let kept = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, _mm512_set1_ps(-87.0));
    _mm512_maskz_mul_ps(kept, x, reciprocal)
}

/// `e^t` for `|t| <= 87`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn exp(t: __m512) -> __m512 {
    // ln 2 in two parts: `n · LN2_HIGH` is exact for the `n` that occur, so `r` keeps its bits.
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    const POLYNOMIAL: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ];
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(
        t,
        _mm512_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HIGH), t);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LOW), r);
    let p = POLYNOMIAL[1..].iter().fold(_mm512_set1_ps(POLYNOMIAL[0]), |p, &c| {
        _mm512_fmadd_ps(p, r, _mm512_set1_ps(c))
    });
    // e^r = 1 + r + r² p(r)
    let e_r = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(r, r), p, r), _mm512_set1_ps(1.0));
    _mm512_scalef_ps(e_r, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::arch::x86_64::{_mm512_loadu_ps, _mm512_storeu_ps};

    /// The lanes of `activated(activation, x)` for 16 values of `x`.
    fn lanes(activation: Activation, x: [f32; 16]) -> [f32; 16] {
        let mut out = [0.0; 16];
        // SAFETY: the test runs only where the CPU has AVX-512F; both arrays hold 16 floats.
        unsafe {
            let v = activated(activation, _mm512_loadu_ps(x.as_ptr()));
            _mm512_storeu_ps(out.as_mut_ptr(), v);
        }
        out
    }

    /// Calls `check(x, activation(x))` for every 997th float of either sign below 6e29 and for
    /// `edges`, computed 16 lanes at a time.
    fn for_sampled_floats(activation: Activation, edges: &[f32], mut check: impl FnMut(f32, f32)) {
        let values: Vec<f32> = (0..0x7100_0000u32)
            .step_by(997)
            .flat_map(|bits| [f32::from_bits(bits), -f32::from_bits(bits)])
            .chain(edges.iter().copied())
            .collect();
        for chunk in values.chunks(16) {
            let mut x = [0.0f32; 16];
            x[..chunk.len()].copy_from_slice(chunk);
            for (&got, &x) in lanes(activation, x).iter().zip(&x) {
                check(x, got);
            }
        }
    }

    /// An f32 ulp at `value` (at least the smallest normal's).
    fn ulp_at(value: f64) -> f64 {
        f64::from(f32::EPSILON) * value.abs().max(f64::from(f32::MIN_POSITIVE))
    }

    /// Asserts that `got` is within `ulps` ulp of `activation`'s definition at `x`.
    fn assert_within_ulps(activation: Activation, x: f32, got: f32, ulps: f64) {
        let want = activation.reference(f64::from(x));
        assert!(
            (f64::from(got) - want).abs() <= ulps * ulp_at(want),
            "{activation:?}({x:e}) = {got:e}, want {want:e}"
        );
    }

    #[test]
    fn silu_is_within_4_ulp_of_its_definition_and_0_below_minus_87() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: SiLU on AVX-512 vectors, which this CPU does not have");
            return;
        }
        // The edges of the clamp besides the samples.
        let edges = [87.0, -87.0, 88.0, -88.0, 1e30, -1e30, f32::MAX, f32::MIN, 0.0, -0.0];
        for_sampled_floats(Activation::Silu, &edges, |x, got| {
            if x < -87.0 {
                assert_eq!(got, 0.0, "silu({x:e})");
            } else {
                assert_within_ulps(Activation::Silu, x, got, 4.0);
            }
        });
    }

    #[test]
    fn hard_swish_is_within_2_ulp_of_its_definition() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: hard-swish on AVX-512 vectors, which this CPU does not have");
            return;
        }
        // The bends at -3 and 3 besides the samples, and a NaN.
        let edges = [-3.0, 3.0, -3.000_001, 2.999_999, f32::NAN];
        for_sampled_floats(Activation::HardSwish, &edges, |x, got| {
            if x.is_nan() {
                assert!(got.is_nan(), "hard_swish(NaN) = {got}");
            } else {
                assert_within_ulps(Activation::HardSwish, x, got, 2.0);
            }
        });
    }

    #[test]
    fn gelu_is_within_2e_7_of_x_and_2_ulp_of_its_definition_and_matches_the_plain_path() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: GELU on AVX-512 vectors, which this CPU does not have");
            return;
        }
        // Both sides of the split between the fits and of the clamp at 4 (times √2), and a NaN.
        let edges = [1.272_792, 1.272_793, -1.272_792, 5.656_854, -5.656_854, -5.7, f32::NAN];
        for_sampled_floats(Activation::Gelu, &edges, |x, got| {
            let mut plain = [x];
            Activation::Gelu.apply(&mut plain);
            if x.is_nan() {
                assert!(got.is_nan() && plain[0].is_nan(), "gelu(NaN) = {got}, {}", plain[0]);
                return;
            }
            // erf is within 1.3e-7 absolutely: its sum with 1 cancels for large negative x,
            // as it does in IREE's code.
            let want = Activation::Gelu.reference(f64::from(x));
            let bound = 2e-7 * f64::from(x.abs()) + 2.0 * ulp_at(want);
            for (path, value) in [("vector", got), ("plain", plain[0])] {
                assert!(
                    (f64::from(value) - want).abs() <= bound,
                    "{path} gelu({x:e}) = {value:e}, want {want:e}"
                );
            }
        });
    }

    #[test]
    fn silu_keeps_nan_and_takes_the_infinities_to_themselves_or_0() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: SiLU on AVX-512 vectors, which this CPU does not have");
            return;
        }
        let mut x = [1.0f32; 16];
        x[..3].copy_from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
        let out = lanes(Activation::Silu, x);
        assert!(out[0].is_nan());
        assert_eq!(out[1..3], [f32::INFINITY, 0.0]);
        assert!((f64::from(out[3]) - Activation::Silu.reference(1.0)).abs() < 1e-7);
    }
}
