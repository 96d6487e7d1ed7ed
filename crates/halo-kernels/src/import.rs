//! The C ABI through which IREE-compiled executables call halo's kernels.
//!
//! An executable declares an import such as
//!
//! ```mlir
//! func.func private @halo_matmul_f32_v0(%a: memref<f32>, %a_offset: index,
//!     %b: memref<f32>, %b_offset: index, %bias: memref<f32>, %bias_offset: index,
//!     %c: memref<f32>, %c_offset: index, %m: index, %n: index, %k: index,
//!     %a_stride: index, %b_stride: index, %c_stride: index, %flags: index)
//!     attributes {llvm.bareptr = true}
//! ```
//!
//! and IREE's compiler packs the arguments into a struct ([`MatmulParamsV0`]) that the kernel
//! receives through the import thunk as `entry(params, context, reserved)`, returning 0 on
//! success. `context` is the driver's [`MemoryCheck`]: the pointers come from compiled code, so
//! every span is checked against the calling dispatch's bindings before it is touched. Offsets, sizes and strides count elements. The version suffix is part of the name: a
//! new layout is a new name, and a program that asks for a name this build lacks fails to load,
//! naming it.

use crate::matrix::span;
use crate::{
    conv2d_tile, depthwise_tile, matmul, row_sums, softmax_rows, Activation, Bias, ConvEpilogue, ConvShape,
    DepthwiseShape, Epilogue, Matrix, MatrixMut, Padding,
};
use std::ffi::{c_int, c_void};
use std::ops::Range;

/// The signature of every entry point (IREE's `iree_hal_executable_import_v0_t`).
pub type EntryPoint = unsafe extern "C" fn(params: *mut c_void, context: *mut c_void, reserved: *mut c_void) -> c_int;

/// Every entry point by the name executables import it by.
pub const ENTRY_POINTS: &[(&str, EntryPoint)] = &[
    ("halo_matmul_f32_v0", matmul_f32_v0),
    ("halo_matmul_f32_v1", matmul_f32_v1),
    ("halo_matmul_f32_v2", matmul_f32_v2),
    ("halo_matmul_f32_v3", matmul_f32_v3),
    ("halo_matmul_f32_v4", matmul_f32_v4),
    ("halo_matmul_f32_v5", matmul_f32_v5),
    ("halo_conv2d_f32_v0", conv2d_f32_v0),
    ("halo_conv2d_f32_v1", conv2d_f32_v1),
    ("halo_conv2d_f32_v2", conv2d_f32_v2),
    ("halo_conv2d_f32_v3", conv2d_f32_v3),
    ("halo_conv2d_f32_v4", conv2d_f32_v4),
    ("halo_depthwise_conv2d_f32_v0", depthwise_conv2d_f32_v0),
    ("halo_depthwise_conv2d_f32_v1", depthwise_conv2d_f32_v1),
    ("halo_depthwise_conv2d_f32_v2", depthwise_conv2d_f32_v2),
    ("halo_softmax_f32_v0", softmax_f32_v0),
    ("halo_row_sums_f32_v0", row_sums_f32_v0),
];

/// `flags` bit: `bias` points at one element per output column, added to every row.
pub const MATMUL_BIAS: usize = 1;
/// `flags` bit: ReLU on the result.
pub const MATMUL_RELU: usize = 2;
/// `flags` bit of `halo_matmul_f32_v1`: `bias` points at one element per output row, added to
/// every column (a 1x1 convolution's, whose rows are its output channels); not with
/// [`MATMUL_BIAS`].
pub const MATMUL_BIAS_PER_ROW: usize = 4;
/// `flags` bit of `halo_matmul_f32_v1`: ReLU6 (`Clip(0, 6)`) on the result; not with
/// [`MATMUL_RELU`].
pub const MATMUL_RELU6: usize = 8;
/// `flags` bit of `halo_matmul_f32_v2`: the residual ([`MatmulParamsV2`]) is added with the bias,
/// before the activation.
pub const MATMUL_RESIDUAL: usize = 16;
/// `flags` bit of `halo_matmul_f32_v3`: SiLU (`x · sigmoid(x)`) on the result; not with another
/// activation.
pub const MATMUL_SILU: usize = 32;
/// `flags` bit of `halo_matmul_f32_v3`: hard-swish (`x · relu6(x + 3) / 6`) on the result; not
/// with another activation.
pub const MATMUL_HARD_SWISH: usize = 64;
/// `flags` bit of `halo_matmul_f32_v4`: GELU (`x · (1 + erf(x / √2)) / 2`) on the result; not
/// with another activation.
pub const MATMUL_GELU: usize = 128;
/// `flags` bit of `halo_matmul_f32_v5`: `a`'s columns are multiplied by the `k` elements of the
/// scale ([`MatmulParamsV5`]) first, which is `b`'s rows multiplied by them: a
/// squeeze-and-excitation's channel weights, applied by the 1x1 convolution after it (to its
/// filters' rows, in cache) instead of by a pass over the whole input.
pub const MATMUL_SCALE_INNER: usize = 256;

/// The `flags` bits each matmul entry knows; it refuses a call with any other.
const MATMUL_V0_FLAGS: usize = MATMUL_BIAS | MATMUL_RELU;
const MATMUL_V1_FLAGS: usize = MATMUL_V0_FLAGS | MATMUL_BIAS_PER_ROW | MATMUL_RELU6;
const MATMUL_V2_FLAGS: usize = MATMUL_V1_FLAGS | MATMUL_RESIDUAL;
const MATMUL_V3_FLAGS: usize = MATMUL_V2_FLAGS | MATMUL_SILU | MATMUL_HARD_SWISH;
const MATMUL_V4_FLAGS: usize = MATMUL_V3_FLAGS | MATMUL_GELU;
const MATMUL_V5_FLAGS: usize = MATMUL_V4_FLAGS | MATMUL_SCALE_INNER;

/// What `halo_matmul_f32_v0` and `_v1` receive: `c = activation(a·b + bias)` for row-major f32
/// matrices, `a` `m`x`k`, `b` `k`x`n`, `c` `m`x`n`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MatmulParamsV0 {
    /// Base of `a`'s binding.
    pub a: *const f32,
    /// First element of `a` in it.
    pub a_offset: usize,
    /// Base of `b`'s binding.
    pub b: *const f32,
    /// First element of `b` in it.
    pub b_offset: usize,
    /// Base of the bias's binding (read only with [`MATMUL_BIAS`]).
    pub bias: *const f32,
    /// First element of the bias in it.
    pub bias_offset: usize,
    /// Base of `c`'s binding.
    pub c: *mut f32,
    /// First element of `c` in it.
    pub c_offset: usize,
    /// Rows of `a` and `c`.
    pub m: usize,
    /// Columns of `b` and `c`.
    pub n: usize,
    /// Columns of `a`, rows of `b`.
    pub k: usize,
    /// Elements between rows of `a`.
    pub a_stride: usize,
    /// Elements between rows of `b`.
    pub b_stride: usize,
    /// Elements between rows of `c`.
    pub c_stride: usize,
    /// [`MATMUL_BIAS`] and [`MATMUL_RELU`] (`_v1`: or [`MATMUL_BIAS_PER_ROW`] and
    /// [`MATMUL_RELU6`]; `_v2`: and [`MATMUL_RESIDUAL`]; `_v3`: or [`MATMUL_SILU`] or
    /// [`MATMUL_HARD_SWISH`]; `_v4`: or [`MATMUL_GELU`]; `_v5`: and [`MATMUL_SCALE_INNER`]).
    pub flags: usize,
}

/// What `halo_matmul_f32_v2`, `_v3` and `_v4` receive: [`MatmulParamsV0`]'s fields, then an
/// `m`x`n` matrix added to the product with the bias ([`MATMUL_RESIDUAL`]): the other branch of a
/// residual connection.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MatmulParamsV2 {
    /// The product, its bias, output and flags.
    pub v0: MatmulParamsV0,
    /// Base of the residual's binding (read only with [`MATMUL_RESIDUAL`]).
    pub residual: *const f32,
    /// First element of the residual in it.
    pub residual_offset: usize,
    /// Elements between rows of the residual.
    pub residual_stride: usize,
}

/// What `halo_matmul_f32_v5` receives: [`MatmulParamsV2`]'s fields, then `k` elements by which
/// `a`'s columns are multiplied ([`MATMUL_SCALE_INNER`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MatmulParamsV5 {
    /// The product, its bias, output, flags and residual.
    pub v2: MatmulParamsV2,
    /// Base of the scale's binding (read only with [`MATMUL_SCALE_INNER`]).
    pub scale: *const f32,
    /// First element of the scale in it.
    pub scale_offset: usize,
}

/// What every entry point's `context` points at: how it learns that the memory a kernel handed
/// it belongs to the dispatch that called it.
///
/// Entry points run as host code, outside the guard that turns a kernel's faults into errors, so
/// they touch nothing before `within` has vouched for it.
#[repr(C)]
#[derive(Debug)]
pub struct MemoryCheck {
    /// Whether `bytes` bytes from `address` lie in one binding of the calling dispatch (one that
    /// allows writes, when `write`).
    pub within: fn(address: usize, bytes: usize, write: bool) -> bool,
}

/// A span of `len` f32 elements from `base + offset`, as addresses (`None` when it overflows).
fn byte_range(base: *const f32, offset: usize, len: usize) -> Option<(usize, usize)> {
    let start = (base as usize).checked_add(offset.checked_mul(4)?)?;
    Some((start, start.checked_add(len.checked_mul(4)?)?))
}

/// Whether two address ranges share a byte (empty ones share none).
fn overlap((a0, a1): (usize, usize), (b0, b1): (usize, usize)) -> bool {
    a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1
}

/// An entry's packed parameters, and its memory check (`None` for a null context).
///
/// # Safety
/// `params` points at a `P`, and `context` is null or points at a [`MemoryCheck`] that outlives
/// the call.
unsafe fn entry_args<'a, P: Copy>(params: *mut c_void, context: *mut c_void) -> (P, Option<&'a MemoryCheck>) {
    // SAFETY: `params` points at a `P`, per the caller's contract.
    let p = unsafe { *(params as *const P) };
    // SAFETY: a non-null context points at a `MemoryCheck`, per the caller's contract.
    let check = unsafe { (context as *const MemoryCheck).as_ref() };
    (p, check)
}

/// `halo_matmul_f32_v0`: see [`MatmulParamsV0`]. Returns 0, or 1 when the call cannot be
/// carried out (overflowing spans, unknown flags, overlapping rows, an output overlapping an
/// input, memory outside the calling dispatch's bindings, no [`MemoryCheck`]), which fails the
/// dispatch.
///
/// # Safety
/// `params` points at a [`MatmulParamsV0`], and `context` is null or points at a
/// [`MemoryCheck`] whose `within` only vouches for memory that is valid for the access asked
/// (and, for writes, that nothing else touches during the call).
pub unsafe extern "C" fn matmul_f32_v0(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<MatmulParamsV0>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { matmul_entry(p, MatmulExtras::default(), MATMUL_V0_FLAGS, check) }
}

/// `halo_matmul_f32_v1`: [`matmul_f32_v0`] whose `flags` may also ask for a bias per row
/// ([`MATMUL_BIAS_PER_ROW`]) and ReLU6 ([`MATMUL_RELU6`]).
///
/// # Safety
/// As [`matmul_f32_v0`].
pub unsafe extern "C" fn matmul_f32_v1(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<MatmulParamsV0>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { matmul_entry(p, MatmulExtras::default(), MATMUL_V1_FLAGS, check) }
}

/// `halo_matmul_f32_v2`: [`matmul_f32_v1`] whose `flags` may also ask for a residual
/// ([`MATMUL_RESIDUAL`]); see [`MatmulParamsV2`].
///
/// # Safety
/// As [`matmul_f32_v0`], `params` pointing at a [`MatmulParamsV2`].
pub unsafe extern "C" fn matmul_f32_v2(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { matmul_with_residual(params, context, MATMUL_V2_FLAGS) }
}

/// `halo_matmul_f32_v3`: [`matmul_f32_v2`] whose `flags` may also ask for SiLU
/// ([`MATMUL_SILU`]) or hard-swish ([`MATMUL_HARD_SWISH`]).
///
/// # Safety
/// As [`matmul_f32_v2`].
pub unsafe extern "C" fn matmul_f32_v3(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { matmul_with_residual(params, context, MATMUL_V3_FLAGS) }
}

/// `halo_matmul_f32_v4`: [`matmul_f32_v3`] whose `flags` may also ask for GELU
/// ([`MATMUL_GELU`]).
///
/// # Safety
/// As [`matmul_f32_v2`].
pub unsafe extern "C" fn matmul_f32_v4(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { matmul_with_residual(params, context, MATMUL_V4_FLAGS) }
}

/// `halo_matmul_f32_v5`: [`matmul_f32_v4`] whose `flags` may also ask for `a`'s columns to be
/// scaled ([`MATMUL_SCALE_INNER`]); see [`MatmulParamsV5`].
///
/// # Safety
/// As [`matmul_f32_v0`], `params` pointing at a [`MatmulParamsV5`].
pub unsafe extern "C" fn matmul_f32_v5(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<MatmulParamsV5>(params, context) };
    let extras = MatmulExtras {
        scale: (p.v2.v0.flags & MATMUL_SCALE_INNER != 0).then_some((p.scale, p.scale_offset)),
        ..MatmulExtras::of(&p.v2)
    };
    // SAFETY: forwarded from the caller.
    unsafe { matmul_entry(p.v2.v0, extras, MATMUL_V5_FLAGS, check) }
}

/// The entries that take a [`MatmulParamsV2`], knowing the flags `known`.
///
/// # Safety
/// As [`matmul_f32_v2`].
unsafe fn matmul_with_residual(params: *mut c_void, context: *mut c_void, known: usize) -> c_int {
    // SAFETY: `params` and `context` are as the entry's contract says.
    let (p, check) = unsafe { entry_args::<MatmulParamsV2>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { matmul_entry(p.v0, MatmulExtras::of(&p), known, check) }
}

/// The operands newer matmul entries take besides [`MatmulParamsV0`]'s, each present only when
/// the flags ask for it.
#[derive(Default)]
struct MatmulExtras {
    /// `(base, offset, row stride)` of the residual ([`MATMUL_RESIDUAL`]).
    residual: Option<(*const f32, usize, usize)>,
    /// `(base, offset)` of the scale of `a`'s columns ([`MATMUL_SCALE_INNER`]).
    scale: Option<(*const f32, usize)>,
}

impl MatmulExtras {
    /// The residual of `p`, when its flags ask for one.
    fn of(p: &MatmulParamsV2) -> MatmulExtras {
        MatmulExtras {
            residual: (p.v0.flags & MATMUL_RESIDUAL != 0).then_some((p.residual, p.residual_offset, p.residual_stride)),
            scale: None,
        }
    }
}

thread_local! {
    /// Each thread's copy of `a` with its columns scaled ([`MATMUL_SCALE_INNER`]): a workgroup's
    /// rows of a 1x1 convolution's filters, reused from one call to the next.
    static SCALED_A: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The matmul entries' work, once their parameters are read; flags outside `known`, and flags
/// that disagree with the `extras` given, are refused.
///
/// # Safety
/// As [`matmul_f32_v0`]: `check` vouches only for memory valid for the access asked.
unsafe fn matmul_entry(p: MatmulParamsV0, extras: MatmulExtras, known: usize, check: Option<&MemoryCheck>) -> c_int {
    let Some(check) = check else {
        return 1;
    };
    let activations = MATMUL_RELU | MATMUL_RELU6 | MATMUL_SILU | MATMUL_HARD_SWISH | MATMUL_GELU;
    let activation = match p.flags & activations {
        0 => Activation::Identity,
        MATMUL_RELU => Activation::Relu,
        MATMUL_RELU6 => Activation::Relu6,
        MATMUL_SILU => Activation::Silu,
        MATMUL_HARD_SWISH => Activation::HardSwish,
        MATMUL_GELU => Activation::Gelu,
        _ => return 1,
    };
    let bias_len = match p.flags & (MATMUL_BIAS | MATMUL_BIAS_PER_ROW) {
        0 => 0,
        MATMUL_BIAS => p.n,
        MATMUL_BIAS_PER_ROW => p.m,
        _ => return 1,
    };
    if p.flags & !known != 0
        || (p.flags & MATMUL_RESIDUAL != 0) != extras.residual.is_some()
        || (p.flags & MATMUL_SCALE_INNER != 0) != extras.scale.is_some()
    {
        return 1;
    }
    // An absent residual or scale is an empty span of `a`, which the check vouches for with `a`.
    let (residual, residual_offset, residual_stride, residual_rows) = match extras.residual {
        Some((base, offset, stride)) => (base, offset, stride, p.m),
        None => (p.a, p.a_offset, 0, 0),
    };
    let (scale, scale_offset, scale_len) = match extras.scale {
        Some((base, offset)) => (base, offset, p.k),
        None => (p.a, p.a_offset, 0),
    };
    let (Some(a_len), Some(b_len), Some(c_len), Some(residual_len)) = (
        span(p.m, p.k, p.a_stride),
        span(p.k, p.n, p.b_stride),
        span(p.m, p.n, p.c_stride),
        span(residual_rows, p.n, residual_stride),
    ) else {
        return 1;
    };
    let inputs = [
        (p.a, p.a_offset, a_len),
        (p.b, p.b_offset, b_len),
        (p.bias, p.bias_offset, bias_len),
        (residual, residual_offset, residual_len),
        (scale, scale_offset, scale_len),
    ];
    // SAFETY: forwarded from the caller: `check` vouches only for valid memory.
    let Some(([a, b, bias, residual, scale], c)) = (unsafe { lent(check, inputs, (p.c, p.c_offset, c_len)) }) else {
        return 1;
    };
    let result = match extras.scale {
        None => matmul_lent(&p, activation, [a, b, bias, residual], residual_stride, c),
        Some(_) => SCALED_A.with_borrow_mut(|scratch| {
            let a = scaled_columns(Matrix::new(a, p.m, p.k, p.a_stride)?, scale, scratch)?;
            let p = MatmulParamsV0 { a_stride: p.k, ..p };
            matmul_lent(&p, activation, [a, b, bias, residual], residual_stride, c)
        }),
    };
    c_int::from(result.is_err())
}

/// `a` with each of its columns multiplied by its element of `scale`, in `scratch` (grown only
/// where the allocator agrees: a size it refuses is an error, not an abort).
fn scaled_columns<'s>(a: Matrix<'_>, scale: &[f32], scratch: &'s mut Vec<f32>) -> halo_hal::Result<&'s [f32]> {
    let len = a.rows() * a.cols();
    scratch.clear();
    scratch.try_reserve(len).map_err(|_| {
        halo_hal::Error::resource_exhausted(format!("{len} floats for the filters of a scaled 1x1 convolution"))
    })?;
    for row in 0..a.rows() {
        scratch.extend(a.row(row).iter().zip(scale).map(|(x, s)| x * s));
    }
    Ok(scratch)
}

/// The product of the slices [`matmul_entry`] was lent, with `activation` after it.
fn matmul_lent(
    p: &MatmulParamsV0,
    activation: Activation,
    [a, b, bias, residual]: [&[f32]; 4],
    residual_stride: usize,
    c: &mut [f32],
) -> halo_hal::Result<()> {
    Matrix::new(a, p.m, p.k, p.a_stride).and_then(|a| {
        let b = Matrix::new(b, p.k, p.n, p.b_stride)?;
        let epilogue = Epilogue {
            bias: match p.flags & (MATMUL_BIAS | MATMUL_BIAS_PER_ROW) {
                MATMUL_BIAS => Bias::PerColumn(bias),
                MATMUL_BIAS_PER_ROW => Bias::PerRow(bias),
                _ => Bias::None,
            },
            residual: match p.flags & MATMUL_RESIDUAL {
                0 => None,
                _ => Some(Matrix::new(residual, p.m, p.n, residual_stride)?),
            },
            activation,
        };
        matmul(a, b, MatrixMut::new(c, p.m, p.n, p.c_stride)?, &epilogue)
    })
}

/// `flags` bit of the convolution entries: `bias` points at one element per filter.
pub const CONV_BIAS: usize = 1;
/// `flags` bit of the convolution entries: ReLU on the result.
pub const CONV_RELU: usize = 2;
/// `flags` bit of `halo_conv2d_f32_v2` and the depthwise entry: ReLU6 (`Clip(0, 6)`) on the
/// result; not with [`CONV_RELU`].
pub const CONV_RELU6: usize = 4;
/// `flags` bit of `halo_conv2d_f32_v4` and `halo_depthwise_conv2d_f32_v2`: SiLU
/// (`x · sigmoid(x)`) on the result; not with another activation.
pub const CONV_SILU: usize = 8;
/// `flags` bit of `halo_conv2d_f32_v4` and `halo_depthwise_conv2d_f32_v2`: hard-swish
/// (`x · relu6(x + 3) / 6`) on the result; not with another activation.
pub const CONV_HARD_SWISH: usize = 16;

/// The `flags` bits each convolution entry knows; it refuses a call with any other.
const CONV_V0_FLAGS: usize = CONV_BIAS | CONV_RELU;
const CONV_V2_FLAGS: usize = CONV_V0_FLAGS | CONV_RELU6;
const CONV_V4_FLAGS: usize = CONV_V2_FLAGS | CONV_SILU | CONV_HARD_SWISH;
const DEPTHWISE_V0_FLAGS: usize = CONV_BIAS | CONV_RELU | CONV_RELU6;
const DEPTHWISE_V2_FLAGS: usize = DEPTHWISE_V0_FLAGS | CONV_SILU | CONV_HARD_SWISH;

/// The bias and activation a convolution entry's `flags` ask for (`None` for unknown bits or
/// two activations).
fn conv_epilogue(flags: usize, bias: &[f32]) -> Option<ConvEpilogue<'_>> {
    let activation = match flags & !CONV_BIAS {
        0 => Activation::Identity,
        CONV_RELU => Activation::Relu,
        CONV_RELU6 => Activation::Relu6,
        CONV_SILU => Activation::Silu,
        CONV_HARD_SWISH => Activation::HardSwish,
        _ => return None,
    };
    Some(ConvEpilogue {
        bias: (flags & CONV_BIAS != 0).then_some(bias),
        activation,
    })
}

/// What `halo_conv2d_f32_v0` receives: one tile (output channels `filter_begin..` by output
/// rows `row_begin..`) of a unit-stride convolution of one group over an input padded
/// beforehand, as [`conv2d_tile`] computes it. Offsets count elements.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Conv2dParamsV0 {
    /// Base of the input's binding: `channels` planes of `padded_height` x `padded_width`.
    pub input: *const f32,
    /// First element of the input in it.
    pub input_offset: usize,
    /// Base of the filters' binding, ordered `[kernel_height][kernel_width][filters][channels]`.
    pub weights: *const f32,
    /// First element of the filters in it.
    pub weights_offset: usize,
    /// Base of the bias's binding (read only with [`CONV_BIAS`]).
    pub bias: *const f32,
    /// First element of the bias in it.
    pub bias_offset: usize,
    /// Base of the output's binding: `filters` planes of the output size.
    pub output: *mut f32,
    /// First element of the output in it.
    pub output_offset: usize,
    /// Input channels.
    pub channels: usize,
    /// Output channels.
    pub filters: usize,
    /// Input rows, padding included.
    pub padded_height: usize,
    /// Input columns, padding included.
    pub padded_width: usize,
    /// Filter rows.
    pub kernel_height: usize,
    /// Filter columns.
    pub kernel_width: usize,
    /// First output channel of the tile.
    pub filter_begin: usize,
    /// Output channels in the tile.
    pub filter_count: usize,
    /// First output row of the tile.
    pub row_begin: usize,
    /// Output rows in the tile.
    pub row_count: usize,
    /// [`CONV_BIAS`] and [`CONV_RELU`] (`_v2`, `_v3`: or [`CONV_RELU6`]; `_v4`: or
    /// [`CONV_SILU`] or [`CONV_HARD_SWISH`]).
    pub flags: usize,
}

/// What `halo_conv2d_f32_v1` and `_v2` receive: [`Conv2dParamsV0`] for a convolution of any stride and
/// dilation, whose input arrives split into its `stride x stride` phases as [`conv2d_tile`]
/// takes it (for stride 1, the plain padded input).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Conv2dParamsV1 {
    /// Everything but the stride and dilation; `input` is the phases.
    pub v0: Conv2dParamsV0,
    /// Input rows and columns from one output position to the next.
    pub stride: usize,
    /// Input rows and columns from one filter tap to the next.
    pub dilation: usize,
}

/// `halo_conv2d_f32_v0`: see [`Conv2dParamsV0`]. Returns 0, or 1 when the call cannot be
/// carried out (as [`matmul_f32_v0`], and a tile outside the output).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`Conv2dParamsV0`].
pub unsafe extern "C" fn conv2d_f32_v0(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (v0, check) = unsafe { entry_args::<Conv2dParamsV0>(params, context) };
    let v1 = Conv2dParamsV1 {
        v0,
        stride: 1,
        dilation: 1,
    };
    // SAFETY: forwarded from the caller.
    unsafe { conv2d(Conv2dParamsV3 { v1, groups: 1 }, CONV_V0_FLAGS, check) }
}

/// `halo_conv2d_f32_v1`: see [`Conv2dParamsV1`]. Returns 0, or 1 when the call cannot be
/// carried out (as [`conv2d_f32_v0`]).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`Conv2dParamsV1`].
pub unsafe extern "C" fn conv2d_f32_v1(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (v1, check) = unsafe { entry_args::<Conv2dParamsV1>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { conv2d(Conv2dParamsV3 { v1, groups: 1 }, CONV_V0_FLAGS, check) }
}

/// `halo_conv2d_f32_v2`: [`conv2d_f32_v1`] whose `flags` may also ask for ReLU6
/// ([`CONV_RELU6`]).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`Conv2dParamsV1`].
pub unsafe extern "C" fn conv2d_f32_v2(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (v1, check) = unsafe { entry_args::<Conv2dParamsV1>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { conv2d(Conv2dParamsV3 { v1, groups: 1 }, CONV_V2_FLAGS, check) }
}

/// What `halo_conv2d_f32_v3` and `_v4` receive: [`Conv2dParamsV1`] for a convolution of `groups` groups
/// (`channels` and `filters` count all of them; the filters are ordered
/// `[kernel_height][kernel_width][filters][channels / groups]`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Conv2dParamsV3 {
    /// Everything but the groups.
    pub v1: Conv2dParamsV1,
    /// Groups, dividing `channels` and `filters`.
    pub groups: usize,
}

/// `halo_conv2d_f32_v3`: [`conv2d_f32_v2`] for grouped convolutions too (see
/// [`Conv2dParamsV3`]). Returns 0, or 1 when the call cannot be carried out (as
/// [`conv2d_f32_v0`], and groups that do not divide the channels and filters).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`Conv2dParamsV3`].
pub unsafe extern "C" fn conv2d_f32_v3(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<Conv2dParamsV3>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { conv2d(p, CONV_V2_FLAGS, check) }
}

/// `halo_conv2d_f32_v4`: [`conv2d_f32_v3`] whose `flags` may also ask for SiLU ([`CONV_SILU`])
/// or hard-swish ([`CONV_HARD_SWISH`]).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`Conv2dParamsV3`].
pub unsafe extern "C" fn conv2d_f32_v4(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<Conv2dParamsV3>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { conv2d(p, CONV_V4_FLAGS, check) }
}

/// The convolution entries' work, once their parameters are read; flags outside `known` are
/// refused.
///
/// # Safety
/// As [`matmul_f32_v0`]: `check` vouches only for memory valid for the access asked.
unsafe fn conv2d(
    Conv2dParamsV3 {
        v1: Conv2dParamsV1 {
            v0: p,
            stride,
            dilation,
        },
        groups,
    }: Conv2dParamsV3,
    known: usize,
    check: Option<&MemoryCheck>,
) -> c_int {
    let Some(check) = check else {
        return 1;
    };
    if p.flags & !known != 0 {
        return 1;
    }
    let shape = ConvShape {
        channels: p.channels,
        filters: p.filters,
        groups,
        padded_height: p.padded_height,
        padded_width: p.padded_width,
        kernel_height: p.kernel_height,
        kernel_width: p.kernel_width,
        stride,
        dilation,
    };
    let (Some([input_len, weights_len, output_len]), Some(tile)) = (
        shape.lengths(),
        tile_of((p.filter_begin, p.filter_count), (p.row_begin, p.row_count)),
    ) else {
        return 1;
    };
    let inputs = [
        (p.input, p.input_offset, input_len),
        (p.weights, p.weights_offset, weights_len),
        (p.bias, p.bias_offset, p.filters),
    ];
    // SAFETY: forwarded from the caller: `check` vouches only for valid memory.
    let Some(ops) = (unsafe { conv_operands(check, inputs, (p.output, p.output_offset, output_len), p.flags) }) else {
        return 1;
    };
    c_int::from(conv2d_tile(&shape, ops.input, ops.weights, ops.output, &ops.epilogue, tile).is_err())
}

/// The tile `begin..begin + count` of each of two dimensions (`None` on overflow).
fn tile_of((b0, n0): (usize, usize), (b1, n1): (usize, usize)) -> Option<(Range<usize>, Range<usize>)> {
    Some((b0..b0.checked_add(n0)?, b1..b1.checked_add(n1)?))
}

/// A convolution entry's input, filters, epilogue and output as slices (the bias's span read
/// only with [`CONV_BIAS`]): `None` for flags the entries do not know, or when [`lent`] refuses.
///
/// # Safety
/// As [`lent`].
unsafe fn conv_operands<'a>(
    check: &MemoryCheck,
    [input, weights, (bias, bias_offset, bias_len)]: [(*const f32, usize, usize); 3],
    output: (*mut f32, usize, usize),
    flags: usize,
) -> Option<ConvOperands<'a>> {
    conv_epilogue(flags, &[])?;
    let bias_len = if flags & CONV_BIAS != 0 { bias_len } else { 0 };
    // SAFETY: forwarded from the caller.
    let ([input, weights, bias], output) =
        unsafe { lent(check, [input, weights, (bias, bias_offset, bias_len)], output) }?;
    Some(ConvOperands {
        input,
        weights,
        epilogue: conv_epilogue(flags, bias)?,
        output,
    })
}

/// What a convolution entry computes with, lent by the calling dispatch.
struct ConvOperands<'a> {
    input: &'a [f32],
    weights: &'a [f32],
    epilogue: ConvEpilogue<'a>,
    output: &'a mut [f32],
}

/// What `halo_depthwise_conv2d_f32_v0` receives: one tile (channels `channel_begin..` by output
/// rows `row_begin..`) of a depthwise convolution over an input padded beforehand, as
/// [`depthwise_tile`] computes it. Offsets count elements.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DepthwiseParamsV0 {
    /// Base of the input's binding: `channels` planes of `padded_height` x `padded_width`.
    pub input: *const f32,
    /// First element of the input in it.
    pub input_offset: usize,
    /// Base of the filters' binding, ordered `[channels][kernel_height][kernel_width]`.
    pub weights: *const f32,
    /// First element of the filters in it.
    pub weights_offset: usize,
    /// Base of the bias's binding (read only with [`CONV_BIAS`]).
    pub bias: *const f32,
    /// First element of the bias in it.
    pub bias_offset: usize,
    /// Base of the output's binding: `channels` planes of the output size.
    pub output: *mut f32,
    /// First element of the output in it.
    pub output_offset: usize,
    /// Input and output channels.
    pub channels: usize,
    /// Input rows, padding included.
    pub padded_height: usize,
    /// Input columns, padding included.
    pub padded_width: usize,
    /// Filter rows.
    pub kernel_height: usize,
    /// Filter columns.
    pub kernel_width: usize,
    /// Input rows and columns from one output position to the next.
    pub stride: usize,
    /// Input rows and columns from one filter tap to the next.
    pub dilation: usize,
    /// First channel of the tile.
    pub channel_begin: usize,
    /// Channels in the tile.
    pub channel_count: usize,
    /// First output row of the tile.
    pub row_begin: usize,
    /// Output rows in the tile.
    pub row_count: usize,
    /// [`CONV_BIAS`], and [`CONV_RELU`] or [`CONV_RELU6`] (`_v2`: or [`CONV_SILU`] or
    /// [`CONV_HARD_SWISH`]).
    pub flags: usize,
}

/// What `halo_depthwise_conv2d_f32_v1` receives: [`DepthwiseParamsV0`]'s fields, then the
/// zeros around the input that the kernel adds itself ([`Padding`]): the input holds only the
/// part of the padded extent inside them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DepthwiseParamsV1 {
    /// The tile, the padded extent included.
    pub v0: DepthwiseParamsV0,
    /// Rows of zeros above the input.
    pub pad_top: usize,
    /// Rows of zeros below it.
    pub pad_bottom: usize,
    /// Columns of zeros to its left.
    pub pad_left: usize,
    /// Columns of zeros to its right.
    pub pad_right: usize,
}

/// `halo_depthwise_conv2d_f32_v0`: see [`DepthwiseParamsV0`]. Returns 0, or 1 when the call
/// cannot be carried out (as [`conv2d_f32_v0`]).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`DepthwiseParamsV0`].
pub unsafe extern "C" fn depthwise_conv2d_f32_v0(
    params: *mut c_void,
    context: *mut c_void,
    _reserved: *mut c_void,
) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<DepthwiseParamsV0>(params, context) };
    // SAFETY: forwarded from the caller.
    unsafe { depthwise_entry(&p, Padding::NONE, DEPTHWISE_V0_FLAGS, check) }
}

/// `halo_depthwise_conv2d_f32_v1`: see [`DepthwiseParamsV1`]. Returns 0, or 1 when the call
/// cannot be carried out (as [`conv2d_f32_v0`]).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`DepthwiseParamsV1`].
pub unsafe extern "C" fn depthwise_conv2d_f32_v1(
    params: *mut c_void,
    context: *mut c_void,
    _reserved: *mut c_void,
) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    // SAFETY: forwarded from the caller.
    unsafe { depthwise_padded(params, context, DEPTHWISE_V0_FLAGS) }
}

/// `halo_depthwise_conv2d_f32_v2`: [`depthwise_conv2d_f32_v1`] whose `flags` may also ask for
/// SiLU ([`CONV_SILU`]) or hard-swish ([`CONV_HARD_SWISH`]).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`DepthwiseParamsV1`].
pub unsafe extern "C" fn depthwise_conv2d_f32_v2(
    params: *mut c_void,
    context: *mut c_void,
    _reserved: *mut c_void,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { depthwise_padded(params, context, DEPTHWISE_V2_FLAGS) }
}

/// The depthwise entries that take a [`DepthwiseParamsV1`], knowing the flags `known`.
///
/// # Safety
/// As [`depthwise_conv2d_f32_v1`].
unsafe fn depthwise_padded(params: *mut c_void, context: *mut c_void, known: usize) -> c_int {
    // SAFETY: `params` and `context` are as the entry's contract says.
    let (p, check) = unsafe { entry_args::<DepthwiseParamsV1>(params, context) };
    let padding = Padding {
        top: p.pad_top,
        bottom: p.pad_bottom,
        left: p.pad_left,
        right: p.pad_right,
    };
    // SAFETY: forwarded from the caller.
    unsafe { depthwise_entry(&p.v0, padding, known, check) }
}

/// The depthwise entries' work: the tile `p` asks for, its input inside `padding`; flags outside
/// `known` are refused.
///
/// # Safety
/// `check` vouches only for valid memory.
unsafe fn depthwise_entry(p: &DepthwiseParamsV0, padding: Padding, known: usize, check: Option<&MemoryCheck>) -> c_int {
    let Some(check) = check else {
        return 1;
    };
    if p.flags & !known != 0 {
        return 1;
    }
    let shape = DepthwiseShape {
        channels: p.channels,
        padded_height: p.padded_height,
        padded_width: p.padded_width,
        kernel_height: p.kernel_height,
        kernel_width: p.kernel_width,
        stride: p.stride,
        dilation: p.dilation,
        padding,
    };
    let (Some([input_len, weights_len, output_len]), Some(tile)) = (
        shape.lengths(),
        tile_of((p.channel_begin, p.channel_count), (p.row_begin, p.row_count)),
    ) else {
        return 1;
    };
    let inputs = [
        (p.input, p.input_offset, input_len),
        (p.weights, p.weights_offset, weights_len),
        (p.bias, p.bias_offset, p.channels),
    ];
    // SAFETY: forwarded from the caller: `check` vouches only for valid memory.
    let Some(ops) = (unsafe { conv_operands(check, inputs, (p.output, p.output_offset, output_len), p.flags) }) else {
        return 1;
    };
    c_int::from(depthwise_tile(&shape, ops.input, ops.weights, ops.output, &ops.epilogue, tile).is_err())
}

/// What `halo_softmax_f32_v0` receives: `y = softmax(scale · x)` along each of `rows` rows of
/// `cols` elements, as [`softmax_rows`] computes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SoftmaxParamsV0 {
    /// Base of the input's binding.
    pub x: *const f32,
    /// First element of the input in it.
    pub x_offset: usize,
    /// Base of the output's binding.
    pub y: *mut f32,
    /// First element of the output in it.
    pub y_offset: usize,
    /// Rows of the input and the output.
    pub rows: usize,
    /// Elements a row.
    pub cols: usize,
    /// Elements between rows of the input.
    pub x_stride: usize,
    /// Elements between rows of the output.
    pub y_stride: usize,
    /// The scale's f32 bits in the low 32 bits (passed as an index, whose place in the packed
    /// parameters is that of every other field).
    pub scale_bits: usize,
}

/// `halo_softmax_f32_v0`: see [`SoftmaxParamsV0`]. Returns 0, or 1 when the call cannot be
/// carried out (as [`matmul_f32_v0`], and scale bits past 32).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`SoftmaxParamsV0`].
pub unsafe extern "C" fn softmax_f32_v0(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<SoftmaxParamsV0>(params, context) };
    let (Some(check), Ok(scale_bits)) = (check, u32::try_from(p.scale_bits)) else {
        return 1;
    };
    let (Some(x_len), Some(y_len)) = (span(p.rows, p.cols, p.x_stride), span(p.rows, p.cols, p.y_stride)) else {
        return 1;
    };
    // SAFETY: forwarded from the caller: `check` vouches only for valid memory.
    let Some(([x], y)) = (unsafe { lent(check, [(p.x, p.x_offset, x_len)], (p.y, p.y_offset, y_len)) }) else {
        return 1;
    };
    let result = Matrix::new(x, p.rows, p.cols, p.x_stride).and_then(|x| {
        let y = MatrixMut::new(y, p.rows, p.cols, p.y_stride)?;
        softmax_rows(x, f32::from_bits(scale_bits), y)
    });
    c_int::from(result.is_err())
}

/// What `halo_row_sums_f32_v0` receives: the sums of `rows` rows of `cols` elements each (a global
/// average pool's, over a `[C, H * W]` image), as [`row_sums`] computes them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RowSumsParamsV0 {
    /// Base of the input's binding.
    pub x: *const f32,
    /// First element of the input in it.
    pub x_offset: usize,
    /// Base of the sums' binding.
    pub sums: *mut f32,
    /// First sum in it.
    pub sums_offset: usize,
    /// Rows of the input, and sums.
    pub rows: usize,
    /// Elements a row.
    pub cols: usize,
    /// Elements between rows of the input.
    pub x_stride: usize,
}

/// `halo_row_sums_f32_v0`: see [`RowSumsParamsV0`]. Returns 0, or 1 when the call cannot be
/// carried out (as [`matmul_f32_v0`]).
///
/// # Safety
/// As [`matmul_f32_v0`], for a [`RowSumsParamsV0`].
pub unsafe extern "C" fn row_sums_f32_v0(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: `params` and `context` are as this entry's contract says.
    let (p, check) = unsafe { entry_args::<RowSumsParamsV0>(params, context) };
    let (Some(check), Some(x_len)) = (check, span(p.rows, p.cols, p.x_stride)) else {
        return 1;
    };
    // SAFETY: forwarded from the caller: `check` vouches only for valid memory.
    let Some(([x], sums)) = (unsafe { lent(check, [(p.x, p.x_offset, x_len)], (p.sums, p.sums_offset, p.rows)) })
    else {
        return 1;
    };
    let result = Matrix::new(x, p.rows, p.cols, p.x_stride).and_then(|x| row_sums(x, sums));
    c_int::from(result.is_err())
}

/// The input spans and the output span an entry point was handed, each `(base, offset, len)` in
/// elements, as slices: `None` when a span overflows, `check` does not vouch for it (for
/// writes, the output), or the output overlaps an input. Entry points touch nothing before this.
///
/// # Safety
/// `check.within` only vouches for memory that is valid for the access asked (and, for writes,
/// that nothing else touches while the slices live).
unsafe fn lent<'a, const N: usize>(
    check: &MemoryCheck,
    inputs: [(*const f32, usize, usize); N],
    (output, output_offset, output_len): (*mut f32, usize, usize),
) -> Option<([&'a [f32]; N], &'a mut [f32])> {
    let output_bytes = byte_range(output, output_offset, output_len)?;
    let vouched = |(start, end): (usize, usize), write| (check.within)(start, end - start, write);
    for (base, offset, len) in inputs {
        let input_bytes = byte_range(base, offset, len)?;
        if overlap(input_bytes, output_bytes) || !vouched(input_bytes, false) {
            return None;
        }
    }
    if !vouched(output_bytes, true) {
        return None;
    }
    // SAFETY: `check` vouched for every span (reads of the inputs, reads and writes of the
    // output), and the output overlaps no input; empty spans need no memory and are dangling.
    unsafe {
        Some((
            inputs.map(|(base, offset, len)| slice(base, offset, len)),
            slice_mut(output, output_offset, output_len),
        ))
    }
}

/// `len` elements from `base + offset`, or an empty slice.
///
/// # Safety
/// As [`matmul_f32_v0`]: the elements are valid for reads while the slice lives.
unsafe fn slice<'a>(base: *const f32, offset: usize, len: usize) -> &'a [f32] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller guarantees `len` readable elements at `base + offset`.
    unsafe { std::slice::from_raw_parts(base.add(offset), len) }
}

/// `len` elements from `base + offset` for writing, or an empty slice.
///
/// # Safety
/// As [`matmul_f32_v0`]: the elements are valid for reads and writes, and nothing else reads
/// or writes them, while the slice lives.
unsafe fn slice_mut<'a>(base: *mut f32, offset: usize, len: usize) -> &'a mut [f32] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: the caller guarantees `len` exclusively writable elements at `base + offset`.
    unsafe { std::slice::from_raw_parts_mut(base.add(offset), len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(a: &[f32], b: &[f32], bias: &[f32], c: &mut [f32], mnk: [usize; 3], flags: usize) -> MatmulParamsV0 {
        let [m, n, k] = mnk;
        MatmulParamsV0 {
            a: a.as_ptr(),
            a_offset: 1,
            b: b.as_ptr(),
            b_offset: 0,
            bias: bias.as_ptr(),
            bias_offset: 2,
            c: c.as_mut_ptr(),
            c_offset: 3,
            m,
            n,
            k,
            a_stride: k,
            b_stride: n,
            c_stride: n,
            flags,
        }
    }

    thread_local! {
        /// The address ranges the test's "dispatch" has, as (start, end, writable).
        static BINDINGS: std::cell::RefCell<Vec<(usize, usize, bool)>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    fn lend(bytes: &[f32], writable: bool) {
        let start = bytes.as_ptr() as usize;
        BINDINGS.with(|b| b.borrow_mut().push((start, start + 4 * bytes.len(), writable)));
    }

    fn within(address: usize, bytes: usize, write: bool) -> bool {
        let end = address + bytes;
        BINDINGS.with(|b| (b.borrow().iter()).any(|&(s, e, w)| address >= s && end <= e && (w || !write)))
    }

    static CHECK: MemoryCheck = MemoryCheck { within };

    fn call(mut params: MatmulParamsV0) -> c_int {
        let context = (&raw const CHECK).cast_mut().cast();
        // SAFETY: the check vouches only for the live slices the test lent.
        unsafe { matmul_f32_v0((&raw mut params).cast(), context, std::ptr::null_mut()) }
    }

    #[test]
    fn the_entry_point_reads_its_packed_parameters_at_their_offsets() {
        // a = [[1, 2], [3, 4]] after one element, b = [[1, 0, -1], [0, 1, 1]], bias from element 2.
        let a = [9.0, 1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 0.0, -1.0, 0.0, 1.0, 1.0];
        let bias = [7.0, 7.0, 0.5, -10.0, 0.0];
        let mut c = [99.0f32; 9];
        for input in [&a[..], &b, &bias] {
            lend(input, false);
        }
        lend(&c, true);
        assert_eq!(
            call(params(&a, &b, &bias, &mut c, [2, 3, 2], MATMUL_BIAS | MATMUL_RELU)),
            0
        );
        assert_eq!(c, [99.0, 99.0, 99.0, 1.5, 0.0, 1.0, 3.5, 0.0, 1.0]);
        c = [99.0f32; 9];
        assert_eq!(call(params(&a, &b, &bias, &mut c, [2, 3, 2], 0)), 0);
        assert_eq!(c, [99.0, 99.0, 99.0, 1.0, 2.0, 1.0, 3.0, 4.0, 1.0]);
        // _v1: a bias per row (0.5 and -10 from element 2) and ReLU6; v0 refuses those flags.
        let call_v1 = |mut params: MatmulParamsV0| {
            let context = (&raw const CHECK).cast_mut().cast();
            // SAFETY: the check vouches only for the live slices the test lent.
            unsafe { matmul_f32_v1((&raw mut params).cast(), context, std::ptr::null_mut()) }
        };
        let b2 = [4.0, 0.0, -1.0, 0.0, 1.0, 1.0];
        lend(&b2, false);
        c = [99.0f32; 9];
        let per_row = MATMUL_BIAS_PER_ROW | MATMUL_RELU6;
        assert_eq!(call_v1(params(&a, &b2, &bias, &mut c, [2, 3, 2], per_row)), 0);
        assert_eq!(c, [99.0, 99.0, 99.0, 4.5, 2.5, 1.5, 2.0, 0.0, 0.0]);
        assert_eq!(call(params(&a, &b2, &bias, &mut c, [2, 3, 2], per_row)), 1, "v0");
        for both in [MATMUL_BIAS | MATMUL_BIAS_PER_ROW, MATMUL_RELU | MATMUL_RELU6, 16] {
            assert_eq!(call_v1(params(&a, &b2, &bias, &mut c, [2, 3, 2], both)), 1, "{both}");
        }
    }

    #[test]
    fn the_v2_entry_point_adds_the_residual_it_is_lent_and_refuses_one_it_is_not() {
        // a·b = [[1, 2, 1], [3, 4, 1]] (as above), a bias per row (0.5 and -10 from element 2),
        // then a residual of rows 4 elements apart, then ReLU.
        let a = [9.0, 1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 0.0, -1.0, 0.0, 1.0, 1.0];
        let bias = [7.0, 7.0, 0.5, -10.0, 0.0];
        let residual = [1.0, 1.0, -5.0, 99.0, 20.0, 20.0, 20.0];
        let mut c = [99.0f32; 9];
        let call_v2 = |c: &mut [f32], flags: usize| {
            let mut params = MatmulParamsV2 {
                v0: params(&a, &b, &bias, c, [2, 3, 2], flags),
                residual: residual.as_ptr(),
                residual_offset: 0,
                residual_stride: 4,
            };
            let context = (&raw const CHECK).cast_mut().cast();
            // SAFETY: the check vouches only for the live slices the test lent.
            unsafe { matmul_f32_v2((&raw mut params).cast(), context, std::ptr::null_mut()) }
        };
        for input in [&a[..], &b, &bias] {
            lend(input, false);
        }
        lend(&c, true);
        let flags = MATMUL_BIAS_PER_ROW | MATMUL_RELU | MATMUL_RESIDUAL;
        assert_eq!(call_v2(&mut c, flags), 1, "the residual is not lent");
        assert_eq!(c, [99.0; 9]);
        lend(&residual, false);
        assert_eq!(call_v2(&mut c, flags), 0);
        assert_eq!(c, [99.0, 99.0, 99.0, 2.5, 3.5, 0.0, 13.0, 14.0, 11.0]);
        assert_eq!(call_v2(&mut c, MATMUL_BIAS_PER_ROW), 0, "no residual without its flag");
        assert_eq!(c, [99.0, 99.0, 99.0, 1.5, 2.5, 1.5, -7.0, -6.0, -9.0]);
        let mut v1 = params(&a, &b, &bias, &mut c, [2, 3, 2], flags);
        let context = (&raw const CHECK).cast_mut().cast();
        // SAFETY: the check vouches only for the live slices the test lent.
        let rc = unsafe { matmul_f32_v1((&raw mut v1).cast(), context, std::ptr::null_mut()) };
        assert_eq!(rc, 1, "v1 has no residual to add");
    }

    #[test]
    fn calls_the_dispatch_does_not_vouch_for_fail_without_touching_memory() {
        let (a, b, bias) = ([1f32; 4], [1f32; 4], [1f32; 4]);
        let mut c = [5f32; 4];
        let valid = |c: &mut [f32]| params(&a, &b, &bias, c, [1, 1, 1], MATMUL_BIAS);
        assert_eq!(call(valid(&mut c)), 1, "nothing lent");
        for input in [&a[..], &b, &bias] {
            lend(input, false);
        }
        assert_eq!(call(valid(&mut c)), 1, "the output is not writable");
        lend(&c, true);
        assert_eq!(call(valid(&mut c)), 0);
        c = [5.0; 4];
        assert_eq!(call(params(&a, &b, &bias, &mut c, [1, 1, 1], 4)), 1, "unknown flag");
        assert_eq!(
            call(params(&a, &b, &bias, &mut c, [usize::MAX, 2, 2], 0)),
            1,
            "overflowing span"
        );
        assert_eq!(
            call(params(&a, &b, &bias, &mut c, [2, 2, 2], 0)),
            1,
            "a reaches past its binding"
        );
        let mut overlapping = valid(&mut c);
        (overlapping.c_stride, overlapping.c_offset, overlapping.m, overlapping.n) = (1, 0, 2, 2);
        assert_eq!(call(overlapping), 1, "rows overlap");
        let mut aliased = valid(&mut c);
        aliased.a = aliased.c;
        aliased.a_offset = aliased.c_offset;
        assert_eq!(call(aliased), 1, "the output is an input");
        let mut unchecked = valid(&mut c);
        // SAFETY: no check is given, so the entry point must refuse before touching anything.
        let rc = unsafe { matmul_f32_v0((&raw mut unchecked).cast(), std::ptr::null_mut(), std::ptr::null_mut()) };
        assert_eq!(rc, 1, "no memory check");
        assert_eq!(c, [5.0; 4]);
    }

    /// A convolution call over `channels` input planes of `side` x `side` to `filters` filters
    /// of `kernel` x `kernel`, every filter and `rows` output rows, each slice from its start,
    /// no flags: the tests change what they need from there.
    fn conv_params(
        (input, weights, bias): (&[f32], &[f32], &[f32]),
        output: &mut [f32],
        [channels, filters, side, kernel]: [usize; 4],
        rows: usize,
    ) -> Conv2dParamsV0 {
        Conv2dParamsV0 {
            input: input.as_ptr(),
            input_offset: 0,
            weights: weights.as_ptr(),
            weights_offset: 0,
            bias: bias.as_ptr(),
            bias_offset: 0,
            output: output.as_mut_ptr(),
            output_offset: 0,
            channels,
            filters,
            padded_height: side,
            padded_width: side,
            kernel_height: kernel,
            kernel_width: kernel,
            filter_begin: 0,
            filter_count: filters,
            row_begin: 0,
            row_count: rows,
            flags: 0,
        }
    }

    #[test]
    fn the_convolution_entry_point_computes_its_tile_and_refuses_what_it_is_not_lent() {
        // One channel, 3x3 input, a 2x2 filter of ones after one element, bias 0.5, ReLU:
        // output 2x2 of the windows' sums, written from element 1, in two one-row tiles.
        let input = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -40.0, 9.0];
        let weights = [9.0, 1.0, 1.0, 1.0, 1.0];
        let bias = [0.5];
        let mut output = [99.0f32; 5];
        for lent in [&input[..], &weights, &bias] {
            lend(lent, false);
        }
        lend(&output, true);
        let params = |output: &mut [f32], row_begin, flags| Conv2dParamsV0 {
            weights_offset: 1,
            output_offset: 1,
            row_begin,
            flags,
            ..conv_params((&input, &weights, &bias), output, [1, 1, 3, 2], 1)
        };
        let call = |mut params: Conv2dParamsV0| {
            let context = (&raw const CHECK).cast_mut().cast();
            // SAFETY: the check vouches only for the live slices the test lent.
            unsafe { conv2d_f32_v0((&raw mut params).cast(), context, std::ptr::null_mut()) }
        };
        assert_eq!(call(params(&mut output, 0, CONV_BIAS | CONV_RELU)), 0);
        assert_eq!(call(params(&mut output, 1, CONV_BIAS | CONV_RELU)), 0);
        assert_eq!(output, [99.0, 12.5, 16.5, 0.0, 0.0]);
        assert_eq!(call(params(&mut output, 2, 0)), 1, "a row past the output");
        // No channels: an empty input and filters, an output of the bias alone, and no panic
        // (which would abort the process from this C entry point).
        let mut no_channels = params(&mut output, 1, CONV_BIAS);
        (no_channels.channels, no_channels.input_offset) = (0, 9);
        assert_eq!(call(no_channels), 0);
        assert_eq!(output, [99.0, 12.5, 16.5, 0.5, 0.5]);
        assert_eq!(call(params(&mut output, 0, 8)), 1, "unknown flag");
        assert_eq!(
            call(params(&mut output, 0, CONV_RELU | CONV_RELU6)),
            1,
            "two activations"
        );
        let mut unlent = [0f32; 5];
        assert_eq!(call(params(&mut unlent, 0, 0)), 1, "the output is not lent");
        assert_eq!(unlent, [0.0; 5]);
    }

    #[test]
    fn the_strided_convolution_entry_point_reads_the_phases_of_its_input() {
        // The 4x4 input 1..=16 split into its four 2x2 phases; a 2x2 filter of ones at stride 2
        // sums each of the four disjoint windows.
        let input = [
            1.0, 3.0, 9.0, 11.0, 2.0, 4.0, 10.0, 12.0, 5.0, 7.0, 13.0, 15.0, 6.0, 8.0, 14.0, 16.0,
        ];
        let weights = [1.0f32; 4];
        let mut output = [0f32; 4];
        for lent in [&input[..], &weights] {
            lend(lent, false);
        }
        lend(&output, true);
        let params = |output: &mut [f32], stride| Conv2dParamsV1 {
            v0: conv_params((&input, &weights, &weights), output, [1, 1, 4, 2], 2),
            stride,
            dilation: 1,
        };
        let call = |mut params: Conv2dParamsV1| {
            let context = (&raw const CHECK).cast_mut().cast();
            // SAFETY: the check vouches only for the live slices the test lent.
            unsafe { conv2d_f32_v1((&raw mut params).cast(), context, std::ptr::null_mut()) }
        };
        assert_eq!(call(params(&mut output, 2)), 0);
        assert_eq!(output, [14.0, 22.0, 46.0, 54.0]);
        assert_eq!(call(params(&mut output, 0)), 1, "stride 0");
        // ReLU6 is _v2's: _v1 refuses it.
        let mut relu6 = params(&mut output, 2);
        relu6.v0.flags = CONV_RELU6;
        assert_eq!(call(relu6), 1, "v1 with ReLU6");
        // SAFETY: the check vouches only for the live slices the test lent.
        let rc = unsafe {
            conv2d_f32_v2(
                (&raw mut relu6).cast(),
                (&raw const CHECK).cast_mut().cast(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(output, [6.0; 4]);
    }

    #[test]
    fn the_grouped_convolution_entry_point_gives_each_group_its_own_channels() {
        // Two groups of one channel to one filter over 3x3 planes, 2x2 filters of 1s and of 2s:
        // filter 0 sums channel 0's windows, filter 1 doubles channel 1's (10 times channel 0).
        let plane = [1.0, 2.0, 0.0, 0.5, 1.0, 1.0, 0.0, -1.0, 2.0];
        let input: Vec<f32> = plane.iter().chain(&plane.map(|v| 10.0 * v)).copied().collect();
        let weights = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0];
        let mut output = [0f32; 8];
        for lent in [&input[..], &weights] {
            lend(lent, false);
        }
        lend(&output, true);
        let params = |output: &mut [f32], groups| Conv2dParamsV3 {
            v1: Conv2dParamsV1 {
                v0: conv_params((&input, &weights, &weights), output, [2, 2, 3, 2], 2),
                stride: 1,
                dilation: 1,
            },
            groups,
        };
        let call = |mut params: Conv2dParamsV3| {
            let context = (&raw const CHECK).cast_mut().cast();
            // SAFETY: the check vouches only for the live slices the test lent.
            unsafe { conv2d_f32_v3((&raw mut params).cast(), context, std::ptr::null_mut()) }
        };
        assert_eq!(call(params(&mut output, 2)), 0);
        let sums = [4.5, 4.0, 0.5, 3.0];
        let doubled = sums.map(|v| 20.0 * v);
        assert_eq!(output[..4], sums);
        assert_eq!(output[4..], doubled);
        assert_eq!(call(params(&mut output, 3)), 1, "3 groups of 2 channels");
        assert_eq!(call(params(&mut output, 0)), 1, "no groups");
    }

    #[test]
    fn the_depthwise_entry_point_computes_its_tile_and_refuses_what_it_is_not_lent() {
        // Two channels of a 3x3 input (the second the first's negation, 10 times over), 2x2
        // filters of ones after one element, biases 0.5 and 1: channel 0 gives the windows' sums
        // plus 0.5, clipped to 6 by ReLU6; channel 1 is negative, clipped to 0. Written from
        // element 1, one tile per channel.
        let plane = [1.0, 2.0, 0.0, 0.5, 1.0, 1.0, 0.0, -1.0, 2.0];
        let input: Vec<f32> = plane.iter().chain(&plane.map(|v| -10.0 * v)).copied().collect();
        let weights = [9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let bias = [0.5, 1.0];
        let mut output = [99.0f32; 9];
        for lent in [&input[..], &weights, &bias] {
            lend(lent, false);
        }
        lend(&output, true);
        let params = |output: &mut [f32], channel_begin, stride, flags| DepthwiseParamsV0 {
            input: input.as_ptr(),
            input_offset: 0,
            weights: weights.as_ptr(),
            weights_offset: 1,
            bias: bias.as_ptr(),
            bias_offset: 0,
            output: output.as_mut_ptr(),
            output_offset: 1,
            channels: 2,
            padded_height: 3,
            padded_width: 3,
            kernel_height: 2,
            kernel_width: 2,
            stride,
            dilation: 1,
            channel_begin,
            channel_count: 1,
            row_begin: 0,
            row_count: if stride == 1 { 2 } else { 1 },
            flags,
        };
        let call = |mut params: DepthwiseParamsV0| {
            let context = (&raw const CHECK).cast_mut().cast();
            // SAFETY: the check vouches only for the live slices the test lent.
            unsafe { depthwise_conv2d_f32_v0((&raw mut params).cast(), context, std::ptr::null_mut()) }
        };
        assert_eq!(call(params(&mut output, 0, 1, CONV_BIAS | CONV_RELU6)), 0);
        assert_eq!(call(params(&mut output, 1, 1, CONV_BIAS | CONV_RELU6)), 0);
        assert_eq!(output, [99.0, 5.0, 4.5, 1.0, 3.5, 0.0, 0.0, 0.0, 0.0]);
        // Stride 2: one output per channel (channel 1's right after channel 0's), the top-left
        // window; no bias, no activation.
        assert_eq!(call(params(&mut output, 1, 2, 0)), 0);
        assert_eq!(output[1..4], [5.0, -45.0, 1.0]);
        assert_eq!(call(params(&mut output, 2, 1, 0)), 1, "a channel past the input");
        assert_eq!(call(params(&mut output, 0, 0, 0)), 1, "stride 0");
        assert_eq!(call(params(&mut output, 0, 1, 8)), 1, "unknown flag");
        assert_eq!(
            call(params(&mut output, 0, 1, CONV_RELU | CONV_RELU6)),
            1,
            "two activations"
        );
        let mut unlent = [0f32; 9];
        assert_eq!(call(params(&mut unlent, 0, 1, 0)), 1, "the output is not lent");
        assert_eq!(unlent, [0.0; 9]);
        // _v1 adds the zeros itself: the 3x3 input padded by one row above and one column on
        // each side is a 4x5 extent, whose 3x4 outputs per channel are those of the library call.
        let mut padded = [99.0f32; 24];
        lend(&padded, true);
        let padding = Padding {
            top: 1,
            bottom: 0,
            left: 1,
            right: 1,
        };
        let v0 = DepthwiseParamsV0 {
            padded_height: 4,
            padded_width: 5,
            row_count: 3,
            output_offset: 0,
            channel_count: 2,
            ..params(&mut padded, 0, 1, CONV_BIAS)
        };
        let mut v1 = DepthwiseParamsV1 {
            v0,
            pad_top: 1,
            pad_bottom: 0,
            pad_left: 1,
            pad_right: 1,
        };
        let context = (&raw const CHECK).cast_mut().cast();
        // SAFETY: the check vouches only for the live slices the test lent.
        let rc = unsafe { depthwise_conv2d_f32_v1((&raw mut v1).cast(), context, std::ptr::null_mut()) };
        assert_eq!(rc, 0);
        let shape = DepthwiseShape {
            channels: 2,
            padded_height: 4,
            padded_width: 5,
            kernel_height: 2,
            kernel_width: 2,
            stride: 1,
            dilation: 1,
            padding,
        };
        let mut expected = [0f32; 24];
        let epilogue = ConvEpilogue {
            bias: Some(&bias),
            activation: Activation::Identity,
        };
        depthwise_tile(&shape, &input, &weights[1..], &mut expected, &epilogue, (0..2, 0..3)).unwrap();
        assert_eq!(padded, expected);
        // The first output is the top-left window: zeros but for input[0] under the last tap.
        assert_eq!(padded[0], 0.5 + 1.0);
        v1.pad_left = 5;
        // SAFETY: as above.
        let rc = unsafe { depthwise_conv2d_f32_v1((&raw mut v1).cast(), context, std::ptr::null_mut()) };
        assert_eq!(rc, 1, "padding wider than the extent");
    }

    /// Calls `entry` with `params` and the test's memory check.
    fn call_entry<P>(entry: EntryPoint, params: &mut P) -> c_int {
        let context = (&raw const CHECK).cast_mut().cast();
        // SAFETY: `entry` reads a prefix of `P` (every entry's parameters begin with those of
        // the entries before it), and the check vouches only for the live slices the test lent.
        unsafe { entry((params as *mut P).cast(), context, std::ptr::null_mut()) }
    }

    #[test]
    fn the_softmax_entry_point_weighs_each_row_and_refuses_what_it_is_not_lent() {
        // Two rows of 3 from element 1, 4 apart; a scale of 2; out 3 apart from element 0.
        let x = [9.0, 0.0, 0.5, 1.0, 9.0, -1.0, -1.0, -1.0];
        let mut y = [5.0f32; 7];
        let mut params = SoftmaxParamsV0 {
            x: x.as_ptr(),
            x_offset: 1,
            y: y.as_mut_ptr(),
            y_offset: 0,
            rows: 2,
            cols: 3,
            x_stride: 4,
            y_stride: 3,
            scale_bits: 2.0f32.to_bits() as usize,
        };
        assert_eq!(call_entry(softmax_f32_v0, &mut params), 1, "nothing lent yet");
        assert_eq!(y, [5.0; 7]);
        lend(&x, false);
        lend(&y, true);
        assert_eq!(call_entry(softmax_f32_v0, &mut params), 0);
        let sum = 1.0 + 1.0f32.exp() + 2.0f32.exp();
        let want = [
            1.0 / sum,
            1.0f32.exp() / sum,
            2.0f32.exp() / sum,
            1.0 / 3.0,
            1.0 / 3.0,
            1.0 / 3.0,
            5.0,
        ];
        for (got, want) in y.iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{y:?} against {want:?}");
        }
        params.rows = 3;
        assert_eq!(call_entry(softmax_f32_v0, &mut params), 1, "a third row past the input");
        params.rows = 2;
        params.scale_bits = 1 << 32;
        assert_eq!(call_entry(softmax_f32_v0, &mut params), 1, "scale bits past 32");
    }

    #[test]
    fn the_row_sums_entry_sums_the_rows_it_is_lent_into_the_sums_it_is_lent() {
        // Two rows of 3 from element 1, rows 4 apart: [1, 2, 3] and [5, 6, 7]; sums from element 1.
        let x = [9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        let mut sums = [99.0f32; 3];
        lend(&x, false);
        let mut params = RowSumsParamsV0 {
            x: x.as_ptr(),
            x_offset: 1,
            sums: sums.as_mut_ptr(),
            sums_offset: 1,
            rows: 2,
            cols: 3,
            x_stride: 4,
        };
        assert_eq!(call_entry(row_sums_f32_v0, &mut params), 1, "the sums are not lent");
        lend(&sums, true);
        assert_eq!(call_entry(row_sums_f32_v0, &mut params), 0);
        assert_eq!(sums, [99.0, 6.0, 18.0]);
        params.rows = 3;
        assert_eq!(
            call_entry(row_sums_f32_v0, &mut params),
            1,
            "a third row past the input"
        );
        params.rows = 2;
        params.sums_offset = 2;
        assert_eq!(call_entry(row_sums_f32_v0, &mut params), 1, "sums past their binding");
        assert_eq!(sums, [99.0, 6.0, 18.0]);
    }

    #[test]
    fn silu_is_applied_by_the_newest_entries_and_refused_by_the_older_ones() {
        let silu_of_2 = 2.0 / (1.0 + (-2.0f32).exp());
        only_the_newest_entries_apply(MATMUL_SILU, CONV_SILU, silu_of_2);
    }

    #[test]
    fn hard_swish_is_applied_by_the_newest_entries_and_refused_by_the_older_ones() {
        // 2 · relu6(2 + 3) / 6
        only_the_newest_entries_apply(MATMUL_HARD_SWISH, CONV_HARD_SWISH, 5.0 / 3.0);
    }

    /// Checks that the activation of the flags `matmul_flag` and `conv_flag` is refused by every
    /// entry older than the newest of its kind, and gives `activated_2` for a sum of 2 by them.
    #[test]
    fn gelu_is_applied_by_the_v4_matmul_entry_and_refused_by_the_older_ones() {
        // One element, 2 · 1 before the activation, then a residual of -2.5: GELU(-0.5).
        let (two, one, zero, residual) = ([2.0f32; 3], [1.0f32; 1], [0.0f32; 3], [-2.5f32; 1]);
        let mut out = [9.0f32; 4];
        for lent in [&two[..], &one, &zero, &residual] {
            lend(lent, false);
        }
        lend(&out, true);
        let mut matmul = MatmulParamsV2 {
            v0: params(
                &two,
                &one,
                &zero,
                &mut out,
                [1, 1, 1],
                MATMUL_BIAS | MATMUL_RESIDUAL | MATMUL_GELU,
            ),
            residual: residual.as_ptr(),
            residual_offset: 0,
            residual_stride: 1,
        };
        for old in [matmul_f32_v0, matmul_f32_v1, matmul_f32_v2, matmul_f32_v3] {
            assert_eq!(call_entry(old, &mut matmul), 1);
        }
        assert_eq!(out, [9.0; 4]);
        assert_eq!(call_entry(matmul_f32_v4, &mut matmul), 0);
        // -0.5 · (1 + erf(-0.5 / √2)) / 2
        let want = -0.154_268_77;
        assert!((out[3] - want).abs() < 1e-6, "{out:?}");
        matmul.v0.flags |= MATMUL_SILU;
        assert_eq!(call_entry(matmul_f32_v4, &mut matmul), 1, "two activations");
    }

    #[test]
    fn the_v5_entry_scales_the_columns_of_a_by_the_scale_it_is_lent_and_older_entries_refuse_to() {
        // a = [[1, 2], [3, 4]] after one element, its columns scaled by [2, -1] from element 1:
        // [[2, -2], [6, -4]]; times b = [[1, 0, -1], [0, 1, 1]], plus a bias per row (0.5, -10).
        let a = [9.0, 1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 0.0, -1.0, 0.0, 1.0, 1.0];
        let bias = [7.0, 7.0, 0.5, -10.0, 0.0];
        let scale = [5.0, 2.0, -1.0];
        let mut c = [99.0f32; 9];
        for input in [&a[..], &b, &bias] {
            lend(input, false);
        }
        lend(&c, true);
        let flags = MATMUL_BIAS_PER_ROW | MATMUL_SCALE_INNER;
        let mut v5 = MatmulParamsV5 {
            v2: MatmulParamsV2 {
                v0: params(&a, &b, &bias, &mut c, [2, 3, 2], flags),
                residual: a.as_ptr(),
                residual_offset: 0,
                residual_stride: 0,
            },
            scale: scale.as_ptr(),
            scale_offset: 1,
        };
        assert_eq!(call_entry(matmul_f32_v5, &mut v5), 1, "the scale is not lent");
        lend(&scale, false);
        for old in [matmul_f32_v2, matmul_f32_v3, matmul_f32_v4] {
            assert_eq!(call_entry(old, &mut v5), 1, "an older entry has no scale");
        }
        assert_eq!(c, [99.0; 9]);
        assert_eq!(call_entry(matmul_f32_v5, &mut v5), 0);
        assert_eq!(c, [99.0, 99.0, 99.0, 2.5, -1.5, -3.5, -4.0, -14.0, -20.0]);
        // Without the flag the scale is not read, and a is as it is.
        v5.v2.v0.flags = MATMUL_BIAS_PER_ROW;
        v5.scale_offset = usize::MAX;
        assert_eq!(call_entry(matmul_f32_v5, &mut v5), 0);
        assert_eq!(c, [99.0, 99.0, 99.0, 1.5, 2.5, 1.5, -7.0, -6.0, -9.0]);
        // A scale running past its binding (k elements from element 2 of 3) is refused.
        v5.v2.v0.flags = flags;
        v5.scale_offset = 2;
        assert_eq!(call_entry(matmul_f32_v5, &mut v5), 1);
    }

    fn only_the_newest_entries_apply(matmul_flag: usize, conv_flag: usize, activated_2: f32) {
        // One element, 2 · 1 before the activation (plus a bias of 0 where there is one).
        let (two, one, zero) = ([2.0f32; 3], [1.0f32; 1], [0.0f32; 3]);
        let mut out = [9.0f32; 4];
        for lent in [&two[..], &one, &zero] {
            lend(lent, false);
        }
        lend(&out, true);

        let mut matmul = MatmulParamsV2 {
            v0: params(&two, &one, &zero, &mut out, [1, 1, 1], MATMUL_BIAS | matmul_flag),
            residual: zero.as_ptr(),
            residual_offset: 0,
            residual_stride: 1,
        };
        for old in [matmul_f32_v0, matmul_f32_v1, matmul_f32_v2] {
            assert_eq!(call_entry(old, &mut matmul), 1);
        }
        assert_eq!(out, [9.0; 4]);
        assert_eq!(call_entry(matmul_f32_v3, &mut matmul), 0);
        assert!((out[3] - activated_2).abs() < 1e-6, "matmul: {out:?}");
        matmul.v0.flags |= MATMUL_RELU;
        assert_eq!(call_entry(matmul_f32_v3, &mut matmul), 1, "two activations");

        out = [9.0; 4];
        let v0 = Conv2dParamsV0 {
            flags: CONV_BIAS | conv_flag,
            ..conv_params((&two, &one, &zero), &mut out, [1, 1, 1, 1], 1)
        };
        let mut conv = Conv2dParamsV3 {
            v1: Conv2dParamsV1 {
                v0,
                stride: 1,
                dilation: 1,
            },
            groups: 1,
        };
        for old in [conv2d_f32_v0, conv2d_f32_v1, conv2d_f32_v2, conv2d_f32_v3] {
            assert_eq!(call_entry(old, &mut conv), 1);
        }
        assert_eq!(out, [9.0; 4]);
        assert_eq!(call_entry(conv2d_f32_v4, &mut conv), 0);
        assert!((out[0] - activated_2).abs() < 1e-6, "conv: {out:?}");

        out = [9.0; 4];
        let mut depthwise = DepthwiseParamsV1 {
            v0: DepthwiseParamsV0 {
                input: two.as_ptr(),
                input_offset: 0,
                weights: one.as_ptr(),
                weights_offset: 0,
                bias: zero.as_ptr(),
                bias_offset: 0,
                output: out.as_mut_ptr(),
                output_offset: 0,
                channels: 1,
                padded_height: 1,
                padded_width: 1,
                kernel_height: 1,
                kernel_width: 1,
                stride: 1,
                dilation: 1,
                channel_begin: 0,
                channel_count: 1,
                row_begin: 0,
                row_count: 1,
                flags: conv_flag,
            },
            pad_top: 0,
            pad_bottom: 0,
            pad_left: 0,
            pad_right: 0,
        };
        for old in [depthwise_conv2d_f32_v0, depthwise_conv2d_f32_v1] {
            assert_eq!(call_entry(old, &mut depthwise), 1);
        }
        assert_eq!(out, [9.0; 4]);
        assert_eq!(call_entry(depthwise_conv2d_f32_v2, &mut depthwise), 0);
        assert!((out[0] - activated_2).abs() < 1e-6, "depthwise: {out:?}");
    }
}
