//! One row on AVX-512 vectors: the maximum, then the exponentials stored and summed, then each
//! divided by the sum; the row's last partial vector through masks.

use super::softmax_row_plain;
use crate::activation::avx512::exp;
use std::arch::x86_64::{
    __mmask16, _mm512_add_ps, _mm512_cmp_ps_mask, _mm512_div_ps, _mm512_mask_blend_ps, _mm512_mask_storeu_ps,
    _mm512_maskz_loadu_ps, _mm512_maskz_mov_ps, _mm512_max_ps, _mm512_mul_ps, _mm512_reduce_add_ps,
    _mm512_reduce_max_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_sub_ps, _CMP_GE_OQ, _CMP_UNORD_Q,
};

/// The lanes of the vector at `start` that lie in a row of `len`.
fn lanes(start: usize, len: usize) -> __mmask16 {
    match len - start {
        16.. => 0xffff,
        count => (1u16 << count) - 1,
    }
}

/// One row; `to` is as long as `from`.
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn softmax_row(from: &[f32], scale: f32, to: &mut [f32]) {
    let len = from.len();
    let scale_v = _mm512_set1_ps(scale);
    let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut unordered = 0;
    for start in (0..len).step_by(16) {
        let mask = lanes(start, len);
        // SAFETY: the masked lanes lie in `from`.
        let v = _mm512_mul_ps(unsafe { _mm512_maskz_loadu_ps(mask, from[start..].as_ptr()) }, scale_v);
        unordered |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
        // Lanes past the row stay at -inf.
        max = _mm512_mask_blend_ps(mask, max, _mm512_max_ps(v, max));
    }
    let max = _mm512_reduce_max_ps(max);
    // NaN and infinite maxima make NaN where IREE's code does; the plain path follows it exactly.
    if unordered != 0 || !max.is_finite() {
        softmax_row_plain(from, scale, to);
        return;
    }
    let max_v = _mm512_set1_ps(max);
    // Below e^-87 a weight is under 2e-38 of the largest one's, and taken as 0 (as is -inf, a
    // masked score's).
    let floor = _mm512_set1_ps(-87.0);
    let mut sum = _mm512_setzero_ps();
    for start in (0..len).step_by(16) {
        let mask = lanes(start, len);
        // SAFETY: the masked lanes lie in `from`.
        let v = _mm512_mul_ps(unsafe { _mm512_maskz_loadu_ps(mask, from[start..].as_ptr()) }, scale_v);
        let t = _mm512_sub_ps(v, max_v);
        let kept = mask & _mm512_cmp_ps_mask::<_CMP_GE_OQ>(t, floor);
        let e = _mm512_maskz_mov_ps(kept, exp(_mm512_max_ps(t, floor)));
        sum = _mm512_add_ps(sum, e);
        // SAFETY: the masked lanes lie in `to`, which is as long as `from`.
        unsafe { _mm512_mask_storeu_ps(to[start..].as_mut_ptr(), mask, e) };
    }
    let sum = _mm512_set1_ps(_mm512_reduce_add_ps(sum));
    for start in (0..len).step_by(16) {
        let mask = lanes(start, len);
        // SAFETY: the masked lanes lie in `to`.
        unsafe {
            let e = _mm512_maskz_loadu_ps(mask, to[start..].as_ptr());
            _mm512_mask_storeu_ps(to[start..].as_mut_ptr(), mask, _mm512_div_ps(e, sum));
        }
    }
}
