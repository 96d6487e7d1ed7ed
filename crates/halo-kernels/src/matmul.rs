//! `C = activation(A·B + bias)` for f32 row-major matrices.

use crate::matrix::{Matrix, MatrixMut};
use crate::Activation;
use halo_hal::{Error, Result};

/// What is added to the product.
#[derive(Debug, Clone, Copy)]
pub enum Bias<'a> {
    /// Nothing.
    None,
    /// One element per output column, added to every row (a dense layer's bias).
    PerColumn(&'a [f32]),
    /// One element per output row, added to every column (a convolution's bias when the rows
    /// are its output channels).
    PerRow(&'a [f32]),
}

/// What follows the product on each output tile while it is still in cache.
#[derive(Debug, Clone, Copy)]
pub struct Epilogue<'a> {
    /// Added to the product.
    pub bias: Bias<'a>,
    /// Added to the product with the bias: a matrix of the output's size (the other branch of a
    /// residual connection), so that the sum is not written out and read back to be added.
    pub residual: Option<Matrix<'a>>,
    /// Applied after the bias and the residual.
    pub activation: Activation,
}

impl Epilogue<'_> {
    /// The bare product.
    pub const NONE: Epilogue<'static> = Epilogue {
        bias: Bias::None,
        residual: None,
        activation: Activation::Identity,
    };
}

/// Which code computes a product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPath {
    /// halo's own AVX-512 kernel (x86-64 CPUs with AVX-512F).
    Avx512,
    /// Code for any CPU: for products the `gemm` crate, which picks its best path for the CPU at
    /// run time (AVX2+FMA, NEON or plain code); plain Rust for the softmax.
    Portable,
}

impl KernelPath {
    /// Every path.
    pub const ALL: [KernelPath; 2] = [KernelPath::Avx512, KernelPath::Portable];

    /// Whether this CPU runs the path.
    pub fn is_available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx512 => crate::avx512::available(),
            #[cfg(not(target_arch = "x86_64"))]
            KernelPath::Avx512 => false,
            KernelPath::Portable => true,
        }
    }

    /// The fastest path this CPU runs.
    ///
    /// halo's AVX-512 kernel wins at every row count (`examples/matmul_rate`, GFLOP/s against
    /// `gemm`'s): a batch-1 dense layer's workgroup tile, 1x176x1280 of a 1000-column `b`, 38
    /// against 23 from cache and 8.6 against 3.1 from memory; 2x1024x1024 25 against 11; the
    /// whole 1x1024x1024 product 12 against 14 from cache, 5.4 against 5.4 from memory.
    pub fn best() -> KernelPath {
        if KernelPath::Avx512.is_available() {
            KernelPath::Avx512
        } else {
            KernelPath::Portable
        }
    }
}

/// `c = activation(a·b + bias)`, on the calling thread, by the [best](KernelPath::best) path.
///
/// # Errors
/// As [`matmul_on`].
pub fn matmul(a: Matrix<'_>, b: Matrix<'_>, c: MatrixMut<'_>, epilogue: &Epilogue<'_>) -> Result<()> {
    matmul_on(KernelPath::best(), a, b, c, epilogue)
}

/// `c = activation(a·b + bias + residual)`, on the calling thread, by `path`.
///
/// # Errors
/// `InvalidArgument` naming the sizes when `a`'s columns are not `b`'s rows, `c` or the residual
/// is not `a.rows() x b.cols()`, or the bias is not one element per output column (or row);
/// `Unavailable` when this CPU does not run `path`.
pub fn matmul_on(
    path: KernelPath,
    a: Matrix<'_>,
    b: Matrix<'_>,
    mut c: MatrixMut<'_>,
    epilogue: &Epilogue<'_>,
) -> Result<()> {
    if !path.is_available() {
        return Err(Error::unavailable(format!(
            "this CPU does not run the {path:?} matmul kernel"
        )));
    }
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || c.rows != m || c.cols != n {
        return Err(Error::invalid_argument(format!(
            "matmul of {m}x{k} by {}x{n} into {}x{}: the sizes do not match",
            b.rows, c.rows, c.cols
        )));
    }
    match epilogue.bias {
        Bias::PerColumn(bias) if bias.len() != n => {
            return Err(Error::invalid_argument(format!(
                "matmul bias of {} elements for {n} output columns",
                bias.len()
            )))
        }
        Bias::PerRow(bias) if bias.len() != m => {
            return Err(Error::invalid_argument(format!(
                "matmul bias of {} elements for {m} output rows",
                bias.len()
            )))
        }
        _ => {}
    }
    if let Some(residual) = epilogue.residual.filter(|r| r.rows != m || r.cols != n) {
        return Err(Error::invalid_argument(format!(
            "matmul residual of {}x{} for a {m}x{n} output",
            residual.rows, residual.cols
        )));
    }
    match path {
        #[cfg(target_arch = "x86_64")]
        KernelPath::Avx512 if k > 0 && crate::avx512::multiply(&a, &b, &mut c, epilogue) => {}
        _ => multiply_portably(&[(a, b)], &mut c, epilogue),
    }
    Ok(())
}

/// `c = activation(Σ a·b + bias + residual)` over `terms` by `path`, which this CPU runs; the
/// caller checked that the sizes agree (every `a` has `c`'s rows, every `b` its columns, the bias
/// one element per row or column of `c`, the residual `c`'s size).
pub(crate) fn multiply_sum_on(
    path: KernelPath,
    terms: &[(Matrix<'_>, Matrix<'_>)],
    c: &mut MatrixMut<'_>,
    epilogue: &Epilogue<'_>,
) {
    if c.rows == 0 || c.cols == 0 {
        return;
    }
    match path {
        #[cfg(target_arch = "x86_64")]
        KernelPath::Avx512 if crate::avx512::multiply_sum(terms, c, epilogue) => {}
        _ => multiply_portably(terms, c, epilogue),
    }
}

/// [`multiply_sum_on`] through the `gemm` crate: the bias and the residual written, the products
/// added, then the activation.
fn multiply_portably(terms: &[(Matrix<'_>, Matrix<'_>)], c: &mut MatrixMut<'_>, epilogue: &Epilogue<'_>) {
    for row in 0..c.rows {
        match epilogue.bias {
            Bias::None => c.row_mut(row).fill(0.0),
            Bias::PerColumn(bias) => c.row_mut(row).copy_from_slice(bias),
            Bias::PerRow(bias) => c.row_mut(row).fill(bias[row]),
        }
        if let Some(residual) = &epilogue.residual {
            c.row_mut(row)
                .iter_mut()
                .zip(residual.row(row))
                .for_each(|(x, r)| *x += r);
        }
    }
    for (a, b) in terms.iter().filter(|(a, b)| a.rows > 0 && a.cols > 0 && b.cols > 0) {
        product::accumulate(a, b, c);
    }
    activate(c, epilogue.activation);
}

/// Applies `activation` to every element of `c`.
pub(crate) fn activate(c: &mut MatrixMut<'_>, activation: Activation) {
    if activation != Activation::Identity {
        for row in 0..c.rows {
            activation.apply(c.row_mut(row));
        }
    }
}

/// The one call into `gemm`, whose interface takes raw pointers and strides.
mod product {
    use crate::matrix::{Matrix, MatrixMut};

    /// Distance between rows as `gemm` takes it; a single row's stride is never used.
    fn row_step(rows: usize, cols: usize, row_stride: usize) -> isize {
        // A view's span fits its slice, and no slice holds more than isize::MAX bytes.
        (if rows > 1 { row_stride } else { cols }) as isize
    }

    /// `c += a·b`; the views' sizes agree and none is empty.
    pub(super) fn accumulate(a: &Matrix<'_>, b: &Matrix<'_>, c: &mut MatrixMut<'_>) {
        let (m, k, n) = (a.rows, a.cols, b.cols);
        // SAFETY: every view's extent was checked against its slice when it was made, so each
        // pointer is valid for `rows` rows `row_step` apart of `cols` elements; `c` is borrowed
        // mutably and `a`, `b` shared, so the output aliases neither input; the sizes agree
        // (checked by `matmul`), and `Parallelism::None` keeps the work on this thread.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.data.as_mut_ptr(),
                1,
                row_step(c.rows, c.cols, c.row_stride),
                true,
                a.data.as_ptr(),
                1,
                row_step(a.rows, a.cols, a.row_stride),
                b.data.as_ptr(),
                1,
                row_step(b.rows, b.cols, b.row_stride),
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_values::{any_activation, values};
    use proptest::prelude::*;

    /// The plain triple loop, in f64.
    fn reference(a: &Matrix<'_>, b: &Matrix<'_>, epilogue: &Epilogue<'_>) -> Vec<f64> {
        let mut out = Vec::with_capacity(a.rows * b.cols);
        for i in 0..a.rows {
            for j in 0..b.cols {
                let mut sum = match epilogue.bias {
                    Bias::None => 0.0,
                    Bias::PerColumn(bias) => f64::from(bias[j]),
                    Bias::PerRow(bias) => f64::from(bias[i]),
                };
                if let Some(residual) = &epilogue.residual {
                    sum += f64::from(residual.data[i * residual.row_stride + j]);
                }
                for p in 0..a.cols {
                    sum += f64::from(a.data[i * a.row_stride + p]) * f64::from(b.data[p * b.row_stride + j]);
                }
                out.push(epilogue.activation.reference(sum));
            }
        }
        out
    }

    /// The paths this CPU runs; says by name which it skips.
    fn paths_here() -> Vec<KernelPath> {
        KernelPath::ALL
            .into_iter()
            .filter(|path| {
                let here = path.is_available();
                if !here {
                    eprintln!("skipped: the {path:?} matmul path, which this CPU does not run");
                }
                here
            })
            .collect()
    }

    /// Which [`Bias`] a test case adds.
    #[derive(Debug, Clone, Copy)]
    enum BiasKind {
        None,
        PerColumn,
        PerRow,
    }

    fn bias_kind() -> impl Strategy<Value = BiasKind> {
        prop_oneof![Just(BiasKind::None), Just(BiasKind::PerColumn), Just(BiasKind::PerRow)]
    }

    /// One product of the given shape on `path` against [`reference`], padding of `c` untouched;
    /// with `residual`, a residual whose rows are `pad_b` elements longer than `c`'s.
    #[allow(clippy::too_many_arguments)]
    fn check_product(
        path: KernelPath,
        (m, n, k): (usize, usize, usize),
        (pad_a, pad_b, pad_c): (usize, usize, usize),
        (bias, residual): (BiasKind, bool),
        activation: Activation,
        seed: u64,
    ) -> std::result::Result<(), TestCaseError> {
        let (lda, ldb, ldc) = (k + pad_a, n + pad_b, n + pad_c);
        let a_data = values(m * lda, seed);
        let b_data = values(k * ldb, seed ^ 1);
        let bias_data = values(m.max(n), seed ^ 2);
        let residual_data = values(m * ldb, seed ^ 3);
        let sentinel = 12345.0f32;
        let mut c_data = vec![sentinel; m * ldc];
        let a = Matrix::new(&a_data, m, k, lda).unwrap();
        let b = Matrix::new(&b_data, k, n, ldb).unwrap();
        let epilogue = Epilogue {
            bias: match bias {
                BiasKind::None => Bias::None,
                BiasKind::PerColumn => Bias::PerColumn(&bias_data[..n]),
                BiasKind::PerRow => Bias::PerRow(&bias_data[..m]),
            },
            residual: residual.then(|| Matrix::new(&residual_data, m, n, ldb).unwrap()),
            activation,
        };
        matmul_on(path, a, b, MatrixMut::new(&mut c_data, m, n, ldc).unwrap(), &epilogue).unwrap();
        let expected = reference(&a, &b, &epilogue);
        for i in 0..m {
            for j in 0..n {
                let got = f64::from(c_data[i * ldc + j]);
                let want = expected[i * n + j];
                prop_assert!(
                    (got - want).abs() <= 1e-5 * (k as f64 + 1.0),
                    "{path:?} {m}x{n}x{k} ({i}, {j}): {got} against {want}"
                );
            }
            for j in n..ldc {
                prop_assert_eq!(
                    c_data[i * ldc + j],
                    sentinel,
                    "{:?}: padding of row {} was written",
                    path,
                    i
                );
            }
        }
        Ok(())
    }

    /// As IREE's code for ONNX's `Relu` and `Clip` has it, whichever path computes the product.
    #[test]
    fn a_nan_sum_is_zero_after_relu_and_relu6_on_every_path() {
        let (m, n, k) = (3, 37, 5);
        let a = vec![f32::NAN; m * k];
        let b = vec![1.0; k * n];
        for path in paths_here() {
            for activation in [Activation::Relu, Activation::Relu6] {
                let mut c = vec![1.0; m * n];
                let epilogue = Epilogue {
                    activation,
                    ..Epilogue::NONE
                };
                let (a, b) = (Matrix::new(&a, m, k, k).unwrap(), Matrix::new(&b, k, n, n).unwrap());
                matmul_on(path, a, b, MatrixMut::new(&mut c, m, n, n).unwrap(), &epilogue).unwrap();
                assert!(c.iter().all(|&x| x == 0.0), "{path:?} {activation:?}: {c:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn products_match_the_triple_loop_for_any_sizes_strides_and_epilogue(
            m in 0usize..20, n in 0usize..40, k in 0usize..40,
            pads in (0usize..5, 0usize..5, 0usize..5),
            bias in bias_kind(), residual in any::<bool>(), activation in any_activation(), seed in any::<u64>(),
        ) {
            for path in paths_here() {
                check_product(path, (m, n, k), pads, (bias, residual), activation, seed)?;
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]
        /// Sizes that cross the AVX-512 kernel's blocks: 12 rows, 256 inner indices, 32 and
        /// 1024 columns, and 192 rows, from which it packs `b`.
        #[test]
        fn products_across_kernel_blocks_match_the_triple_loop(
            m in prop_oneof![1usize..3, 8usize..40, 190usize..200], n in prop_oneof![30usize..70, 1000usize..1090], k in 250usize..530,
            pads in (0usize..3, 0usize..3, 0usize..3),
            bias in bias_kind(), residual in any::<bool>(), activation in any_activation(), seed in any::<u64>(),
        ) {
            for path in paths_here() {
                check_product(path, (m, n, k), pads, (bias, residual), activation, seed)?;
            }
        }
    }

    #[test]
    fn mismatched_sizes_and_bias_are_errors_naming_them() {
        let data = [1f32; 64];
        let mut out = [0f32; 64];
        let a = Matrix::new(&data, 2, 3, 3).unwrap();
        let b = Matrix::new(&data, 4, 2, 2).unwrap();
        let error = matmul(a, b, MatrixMut::new(&mut out, 2, 2, 2).unwrap(), &Epilogue::NONE).unwrap_err();
        assert!(error.to_string().contains("matmul of 2x3 by 4x2 into 2x2"), "{error}");
        let b = Matrix::new(&data, 3, 2, 2).unwrap();
        let short_bias = Epilogue {
            bias: Bias::PerColumn(&data[..3]),
            ..Epilogue::NONE
        };
        let error = matmul(a, b, MatrixMut::new(&mut out, 2, 2, 2).unwrap(), &short_bias).unwrap_err();
        assert!(
            error.to_string().contains("bias of 3 elements for 2 output columns"),
            "{error}"
        );
        let long_row_bias = Epilogue {
            bias: Bias::PerRow(&data[..3]),
            ..Epilogue::NONE
        };
        let error = matmul(a, b, MatrixMut::new(&mut out, 2, 2, 2).unwrap(), &long_row_bias).unwrap_err();
        assert!(
            error.to_string().contains("bias of 3 elements for 2 output rows"),
            "{error}"
        );
        let narrow_residual = Epilogue {
            residual: Some(Matrix::new(&data, 2, 1, 1).unwrap()),
            ..Epilogue::NONE
        };
        let error = matmul(a, b, MatrixMut::new(&mut out, 2, 2, 2).unwrap(), &narrow_residual).unwrap_err();
        assert!(
            error.to_string().contains("residual of 2x1 for a 2x2 output"),
            "{error}"
        );
    }
}
