//! Softmax along rows: `y = e^(s·x - m) / Σ e^(s·x - m)` with `m` the row's largest `s·x`, the
//! order of operations of the code IREE generates for ONNX's `Softmax` after a scaling `Mul`
//! (attention's scores). IREE's own code for it ran ViT-S/16's attention softmax at about 3.6 ns
//! an element on this project's AVX-512 machine; the vector path here needs one pass for the
//! maximum, one for the exponentials and their sum, and one for the division.

#[cfg(target_arch = "x86_64")]
mod avx512;

use crate::matrix::{Matrix, MatrixMut};
use crate::KernelPath;
use halo_hal::{Error, Result};

/// `y = softmax(scale · x)` of every row, on the calling thread, by the [best](KernelPath::best)
/// path.
///
/// # Errors
/// As [`softmax_rows_on`].
pub fn softmax_rows(x: Matrix<'_>, scale: f32, y: MatrixMut<'_>) -> Result<()> {
    softmax_rows_on(KernelPath::best(), x, scale, y)
}

/// `y = softmax(scale · x)` of every row, on the calling thread, by `path`. A row holding NaN,
/// or whose largest scaled value is infinite, is NaN throughout wherever IREE's code makes it so
/// (every such row takes the plain path).
///
/// # Errors
/// `InvalidArgument` naming the sizes when `y` is not the size of `x`; `Unavailable` when this
/// CPU does not run `path`.
pub fn softmax_rows_on(path: KernelPath, x: Matrix<'_>, scale: f32, mut y: MatrixMut<'_>) -> Result<()> {
    if !path.is_available() {
        return Err(Error::unavailable(format!(
            "this CPU does not run the {path:?} softmax kernel"
        )));
    }
    if (x.rows, x.cols) != (y.rows, y.cols) {
        return Err(Error::invalid_argument(format!(
            "softmax of {}x{} into {}x{}: the sizes differ",
            x.rows, x.cols, y.rows, y.cols
        )));
    }
    for row in 0..x.rows {
        let (from, to) = (x.row(row), y.row_mut(row));
        match path {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the path is available, so the CPU has AVX-512F.
            KernelPath::Avx512 => unsafe { avx512::softmax_row(from, scale, to) },
            _ => softmax_row_plain(from, scale, to),
        }
    }
    Ok(())
}

/// One row in plain code; `to` is as long as `from`.
pub(crate) fn softmax_row_plain(from: &[f32], scale: f32, to: &mut [f32]) {
    // NaN wins, as arith.maximumf has it.
    let max = from.iter().fold(f32::NEG_INFINITY, |m, &v| {
        let v = v * scale;
        if v.is_nan() || v > m {
            v
        } else {
            m
        }
    });
    let mut sum = 0.0;
    for (t, &f) in to.iter_mut().zip(from) {
        *t = (f * scale - max).exp();
        sum += *t;
    }
    to.iter_mut().for_each(|t| *t /= sum);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_values::values;
    use proptest::prelude::*;

    /// Softmax of `scale · row`: the product and the difference from the maximum rounded to f32
    /// as IREE's code rounds them, the rest in f64.
    fn reference(row: &[f32], scale: f32) -> Vec<f64> {
        let max = row.iter().map(|&v| v * scale).fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f64> = row.iter().map(|&v| f64::from(v * scale - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        e.iter().map(|v| v / sum).collect()
    }

    fn run(path: KernelPath, x: &[f32], rows: usize, cols: usize, stride: usize, scale: f32) -> Vec<f32> {
        let mut y = vec![-7.0; rows * cols];
        softmax_rows_on(
            path,
            Matrix::new(x, rows, cols, stride).unwrap(),
            scale,
            MatrixMut::new(&mut y, rows, cols, cols).unwrap(),
        )
        .unwrap();
        y
    }

    fn available_paths() -> impl Iterator<Item = KernelPath> {
        KernelPath::ALL.into_iter().filter(|path| {
            let available = path.is_available();
            if !available {
                eprintln!("skipped: the {path:?} softmax path, which this CPU does not run");
            }
            available
        })
    }

    proptest! {
        #[test]
        fn every_path_agrees_with_the_definition(
            rows in 1usize..5, cols in 1usize..70, pad in 0usize..3, scale in -4.0f32..4.0, seed in any::<u64>()
        ) {
            let stride = cols + pad;
            let x: Vec<f32> = values(rows * stride, seed).iter().map(|v| v * 20.0).collect();
            for path in available_paths() {
                let y = run(path, &x, rows, cols, stride, scale);
                for row in 0..rows {
                    let want = reference(&x[row * stride..][..cols], scale);
                    for (col, (&got, want)) in y[row * cols..][..cols].iter().zip(want).enumerate() {
                        prop_assert!(
                            (f64::from(got) - want).abs() <= 1e-6 * want.max(1e-30) + 1e-37,
                            "{path:?} row {row} column {col}: {got} against {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_row_with_nan_or_an_infinite_maximum_is_nan_and_minus_infinity_weighs_nothing() {
        let cols = 37;
        let mut x = values(4 * cols, 5);
        x[3] = f32::NAN;
        x[cols + 30] = f32::INFINITY;
        x[2 * cols + 1] = f32::NEG_INFINITY;
        x[3 * cols..].fill(f32::NEG_INFINITY);
        for path in available_paths() {
            let y = run(path, &x, 4, cols, cols, 1.0);
            assert!(
                y[..2 * cols].iter().all(|v| v.is_nan()),
                "{path:?}: {:?}",
                &y[..2 * cols]
            );
            assert_eq!(y[2 * cols + 1], 0.0, "{path:?}: e^-inf");
            let sum: f32 = y[2 * cols..3 * cols].iter().sum();
            assert!((sum - 1.0).abs() < 1e-5, "{path:?}: the row sums to {sum}");
            assert!(y[3 * cols..].iter().all(|v| v.is_nan()), "{path:?}: a row of -inf");
        }
    }

    #[test]
    fn sizes_that_differ_are_refused_naming_both() {
        let x = [0.0f32; 6];
        let mut y = [0.0f32; 6];
        let error = softmax_rows(
            Matrix::new(&x, 2, 3, 3).unwrap(),
            1.0,
            MatrixMut::new(&mut y, 3, 2, 2).unwrap(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("2x3 into 3x2"), "{error}");
    }
}
