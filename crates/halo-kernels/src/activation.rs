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
        }
    }
}
