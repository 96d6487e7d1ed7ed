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
//! success. Offsets, sizes and strides count elements. The version suffix is part of the name: a
//! new layout is a new name, and a program that asks for a name this build lacks fails to load,
//! naming it.

use crate::{matmul, Activation, Epilogue, Matrix, MatrixMut};
use std::ffi::{c_int, c_void};

/// The signature of every entry point (IREE's `iree_hal_executable_import_v0_t`).
pub type EntryPoint = unsafe extern "C" fn(params: *mut c_void, context: *mut c_void, reserved: *mut c_void) -> c_int;

/// Every entry point by the name executables import it by.
pub const ENTRY_POINTS: &[(&str, EntryPoint)] = &[("halo_matmul_f32_v0", matmul_f32_v0)];

/// `flags` bit: `bias` points at one element per output column, added to every row.
pub const MATMUL_BIAS: usize = 1;
/// `flags` bit: ReLU on the result.
pub const MATMUL_RELU: usize = 2;

/// What `halo_matmul_f32_v0` receives: `c = activation(a·b + bias)` for row-major f32 matrices,
/// `a` `m`x`k`, `b` `k`x`n`, `c` `m`x`n`.
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
    /// [`MATMUL_BIAS`] and [`MATMUL_RELU`].
    pub flags: usize,
}

/// Elements a `rows` x `cols` matrix with rows `stride` apart spans (`None` when it overflows).
fn span(rows: usize, cols: usize, stride: usize) -> Option<usize> {
    match (rows, cols) {
        (0, _) | (_, 0) => Some(0),
        _ => (rows - 1).checked_mul(stride)?.checked_add(cols),
    }
}

/// `halo_matmul_f32_v0`: see [`MatmulParamsV0`]. Returns 0, or 1 when the sizes are
/// impossible (overflowing spans, unknown flags, overlapping rows), which fails the dispatch.
///
/// # Safety
/// `params` points at a [`MatmulParamsV0`] whose pointers, offset by their offsets, are valid
/// for the spans the sizes and strides give (reads of `a`, `b` and, with [`MATMUL_BIAS`], `n`
/// bias elements; reads and writes of `c`), and `c`'s span overlaps none of the others: what a
/// compiled dispatch passes for bindings the runtime checked.
pub unsafe extern "C" fn matmul_f32_v0(params: *mut c_void, _context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: the caller passes a pointer to the packed parameters, per this entry's contract.
    let p = unsafe { *(params as *const MatmulParamsV0) };
    let (Some(a_len), Some(b_len), Some(c_len)) = (
        span(p.m, p.k, p.a_stride),
        span(p.k, p.n, p.b_stride),
        span(p.m, p.n, p.c_stride),
    ) else {
        return 1;
    };
    if p.flags & !(MATMUL_BIAS | MATMUL_RELU) != 0 {
        return 1;
    }
    // SAFETY: the contract makes each pointer plus its offset valid for its span, and `c`'s span
    // disjoint from the others; empty spans need no valid memory, so they use dangling slices.
    let (a, b, bias, c) = unsafe {
        (
            slice(p.a, p.a_offset, a_len),
            slice(p.b, p.b_offset, b_len),
            (p.flags & MATMUL_BIAS != 0).then(|| slice(p.bias, p.bias_offset, p.n)),
            slice_mut(p.c, p.c_offset, c_len),
        )
    };
    let epilogue = Epilogue {
        bias,
        activation: if p.flags & MATMUL_RELU != 0 {
            Activation::Relu
        } else {
            Activation::Identity
        },
    };
    let result = Matrix::new(a, p.m, p.k, p.a_stride).and_then(|a| {
        let b = Matrix::new(b, p.k, p.n, p.b_stride)?;
        matmul(a, b, MatrixMut::new(c, p.m, p.n, p.c_stride)?, &epilogue)
    });
    c_int::from(result.is_err())
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

    fn call(mut params: MatmulParamsV0) -> c_int {
        // SAFETY: the tests' parameters point into live slices that hold their spans.
        unsafe { matmul_f32_v0((&raw mut params).cast(), std::ptr::null_mut(), std::ptr::null_mut()) }
    }

    #[test]
    fn the_entry_point_reads_its_packed_parameters_at_their_offsets() {
        // a = [[1, 2], [3, 4]] after one element, b = [[1, 0, -1], [0, 1, 1]], bias from element 2.
        let a = [9.0, 1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 0.0, -1.0, 0.0, 1.0, 1.0];
        let bias = [7.0, 7.0, 0.5, -10.0, 0.0];
        let mut c = [99.0f32; 9];
        assert_eq!(
            call(params(&a, &b, &bias, &mut c, [2, 3, 2], MATMUL_BIAS | MATMUL_RELU)),
            0
        );
        assert_eq!(c, [99.0, 99.0, 99.0, 1.5, 0.0, 1.0, 3.5, 0.0, 1.0]);
        let mut c = [99.0f32; 9];
        assert_eq!(call(params(&a, &b, &bias, &mut c, [2, 3, 2], 0)), 0);
        assert_eq!(c, [99.0, 99.0, 99.0, 1.0, 2.0, 1.0, 3.0, 4.0, 1.0]);
    }

    #[test]
    fn impossible_sizes_and_unknown_flags_fail_the_call_without_touching_memory() {
        let (a, b, bias) = ([0f32; 4], [0f32; 4], [0f32; 4]);
        let mut c = [5f32; 4];
        assert_eq!(call(params(&a, &b, &bias, &mut c, [1, 1, 1], 4)), 1, "unknown flag");
        assert_eq!(
            call(params(&a, &b, &bias, &mut c, [usize::MAX, 2, 2], 0)),
            1,
            "overflowing span"
        );
        let mut overlapping = params(&a, &b, &bias, &mut c, [2, 2, 2], 0);
        overlapping.c_stride = 1;
        overlapping.c_offset = 0;
        assert_eq!(call(overlapping), 1, "rows overlap");
        assert_eq!(c, [5.0; 4]);
    }
}
