//! What is applied to each output element last, after the bias and the residual: on plain
//! slices here, on AVX-512 vectors in [`avx512`].

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;

/// What is applied to each output element last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// Nothing.
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, 0), 6)`: ONNX's `Clip(0, 6)` (MobileNet's activation).
    Relu6,
    /// `x · sigmoid(x)`: SiLU, or Swish (EfficientNet's activation; ONNX's `Sigmoid` and `Mul`).
    Silu,
    /// `x · min(max(x + 3, 0), 6) / 6`: hard-swish (MobileNet-v3's activation; ONNX's
    /// `HardSwish`).
    HardSwish,
    /// `x · (1 + erf(x / √2)) / 2`: GELU (transformers' activation; ONNX's `Erf` between a `Mul`
    /// by `1/√2`, an `Add` of 1, a `Mul` by `x` and one by `0.5`).
    Gelu,
}

impl Activation {
    /// Applies the activation to every element of `values`.
    pub(crate) fn apply(self, values: &mut [f32]) {
        match self {
            Activation::Identity => {}
            Activation::Relu => values.iter_mut().for_each(|x| *x = x.max(0.0)),
            Activation::Relu6 => values.iter_mut().for_each(|x| *x = relu6(*x)),
            Activation::Silu => values.iter_mut().for_each(|x| *x = silu(*x)),
            Activation::HardSwish => values.iter_mut().for_each(|x| *x = hard_swish(*x)),
            Activation::Gelu => values.iter_mut().for_each(|x| *x = gelu(*x)),
        }
    }

    /// `to` = `from` with the activation applied (in one pass, so short rows are not copied by
    /// a library call and then read again).
    #[inline(always)]
    pub(crate) fn copy(self, from: &[f32], to: &mut [f32]) {
        let pairs = to.iter_mut().zip(from);
        match self {
            Activation::Identity => pairs.for_each(|(t, &f)| *t = f),
            Activation::Relu => pairs.for_each(|(t, &f)| *t = f.max(0.0)),
            Activation::Relu6 => pairs.for_each(|(t, &f)| *t = relu6(f)),
            Activation::Silu => pairs.for_each(|(t, &f)| *t = silu(f)),
            Activation::HardSwish => pairs.for_each(|(t, &f)| *t = hard_swish(f)),
            Activation::Gelu => pairs.for_each(|(t, &f)| *t = gelu(f)),
        }
    }
}

/// `min(max(x, 0), 6)`, NaN going to 0 as in the code IREE generates for ONNX's `Clip` (its
/// first comparison is unordered, so NaN takes the lower bound), which `f32::clamp` would keep.
#[inline(always)]
#[allow(clippy::manual_clamp)]
fn relu6(x: f32) -> f32 {
    x.max(0.0).min(6.0)
}

/// `x · sigmoid(x)`, in the order of operations of IREE's code for ONNX's `Sigmoid` then `Mul`.
#[inline(always)]
fn silu(x: f32) -> f32 {
    x * (1.0 / (1.0 + (-x).exp()))
}

/// `x · relu6(x + 3) / 6`, in the order of operations of IREE's code for ONNX's `HardSwish`.
#[inline(always)]
fn hard_swish(x: f32) -> f32 {
    relu6(x + 3.0) / 6.0 * x
}

/// `x · (erf(x · (1/√2)) + 1) · 0.5`, in the order of operations of IREE's code for ONNX's
/// `Mul`, `Erf`, `Add`, `Mul`, `Mul`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    x * (erf(x * std::f32::consts::FRAC_1_SQRT_2) + 1.0) * 0.5
}

/// Below this magnitude `erf(x) = x · P(x²)` ([`ERF_SMALL`]); from it on
/// `erf(x) = ±(1 - e^(Q(a) - a²))` with `a = min(|x|, 4)` ([`ERF_LARGE`]), since `erfc(a) e^(a²)`
/// varies slowly and `1 - erfc` keeps the precision near 1. At 4, `1 - erfc` rounds to 1 in f32.
pub(crate) const ERF_SPLIT: f32 = 0.9;

/// `P`, lowest power first: least-squares fits on Chebyshev nodes by `scripts/fit-erf`, within
/// 1.3e-7 of erf absolutely and 2.2e-7 relatively with f32 arithmetic (checked there, and by the
/// kernels' tests).
pub(crate) const ERF_SMALL: [f32; 7] = [
    // The fit's constant term is 2/√π's f32.
    std::f32::consts::FRAC_2_SQRT_PI,
    -0.376_126_35,
    0.112_837_19,
    -0.026_860_708,
    0.005_204_331_6,
    -0.000_818_078_1,
    8.534_121e-5,
];

/// `Q` for `a` in `[ERF_SPLIT, 4]`, lowest power first: `ln(erfc(a)) + a²`, fitted as [`ERF_SMALL`].
pub(crate) const ERF_LARGE: [f32; 10] = [
    0.000_334_540_88,
    -1.130_317_7,
    0.368_374,
    -0.110_338_15,
    0.026_622_739,
    -0.004_859_320_4,
    0.000_628_239_65,
    -5.217_786e-5,
    2.307_801_2e-6,
    -3.163_541_3e-8,
];

/// `erf(x)` by the fits above; NaN stays NaN.
fn erf(x: f32) -> f32 {
    let a = x.abs();
    if a < ERF_SPLIT {
        return x * horner(&ERF_SMALL, a * a);
    }
    if x.is_nan() {
        return x;
    }
    let a = a.min(4.0);
    let complement = (horner(&ERF_LARGE, a) - a * a).exp();
    (1.0 - complement).copysign(x)
}

/// The polynomial with `coefficients` (lowest power first) at `x`, by Horner's rule with fused
/// multiply-adds, as the vector path evaluates it.
fn horner(coefficients: &[f32], x: f32) -> f32 {
    coefficients.iter().rev().fold(0.0, |p, &c| p.mul_add(x, c))
}

#[cfg(test)]
impl Activation {
    /// The activation of `x` in f64, the kernels' tests' definition.
    pub(crate) fn reference(self, x: f64) -> f64 {
        match self {
            Activation::Identity => x,
            Activation::Relu => x.max(0.0),
            Activation::Relu6 => x.clamp(0.0, 6.0),
            Activation::Silu => x / (1.0 + (-x).exp()),
            Activation::HardSwish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            Activation::Gelu => x * (1.0 + erf_reference(x * std::f64::consts::FRAC_1_SQRT_2)) / 2.0,
        }
    }
}

/// `erf(z)` in f64 to about 1e-13, for the tests: its Taylor series up to 3, and beyond the
/// continued fraction of `erfc`.
#[cfg(test)]
pub(crate) fn erf_reference(z: f64) -> f64 {
    let a = z.abs();
    if a.is_nan() {
        return z;
    }
    if a <= 3.0 {
        // 2/√π Σ (-1)^n z^(2n+1) / (n! (2n+1))
        let (mut term, mut sum, mut n) = (z, z, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -z * z / n;
            sum += term / (2.0 * n + 1.0);
        }
        return sum * std::f64::consts::FRAC_2_SQRT_PI;
    }
    // erfc(a) = e^(-a²)/√π / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))), from 80 terms down.
    let fraction = (1..=80).rev().fold(a, |tail, k| a + f64::from(k) / 2.0 / tail);
    let complement = (-a * a).exp() / std::f64::consts::PI.sqrt() / fraction;
    (1.0 - complement).copysign(z)
}
