//! Sums of rows: a global average pool's, which ONNX's `GlobalAveragePool` becomes (a sum over
//! each channel's whole plane, then a division by its size). IREE 3.13 compiles that sum to a
//! reduction that ran EfficientNet-B0's at well under a float a nanosecond (its [480, 196] and
//! [1152, 49] ones, one core); here a row is summed in vector-wide partial sums, at the speed of
//! reading it.

use crate::matrix::Matrix;
use halo_hal::{Error, Result};

/// Partial sums a row is split into: element `j` goes to sum `j % LANES`, so the adds of one
/// stretch are independent and the compiler keeps them in vector registers.
const LANES: usize = 16;

/// `sums[r]` = the sum of row `r` of `x`, for every row, on the calling thread.
///
/// # Errors
/// `InvalidArgument` naming both sizes when `sums` does not hold one element a row.
pub fn row_sums(x: Matrix<'_>, sums: &mut [f32]) -> Result<()> {
    if sums.len() != x.rows() {
        return Err(Error::invalid_argument(format!(
            "sums of {} rows into {} elements",
            x.rows(),
            sums.len()
        )));
    }
    for (row, sum) in sums.iter_mut().enumerate() {
        *sum = row_sum(x.row(row));
    }
    Ok(())
}

/// The sum of `row`: [`LANES`] partial sums, then those added pairwise.
fn row_sum(row: &[f32]) -> f32 {
    let mut partial = [0f32; LANES];
    let mut stretches = row.chunks_exact(LANES);
    for stretch in &mut stretches {
        partial.iter_mut().zip(stretch).for_each(|(sum, value)| *sum += value);
    }
    partial
        .iter_mut()
        .zip(stretches.remainder())
        .for_each(|(sum, value)| *sum += value);
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for lane in 0..width {
            partial[lane] += partial[lane + width];
        }
    }
    partial[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn each_row_sums_to_its_exact_sum_within_rounding(
            rows in 1usize..6,
            cols in 0usize..300,
            pad in 0usize..20,
            seed in any::<u64>(),
        ) {
            let stride = cols + pad;
            let mut state = seed | 1;
            let data: Vec<f32> = (0..rows * stride)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 2001) as f32 / 100.0 - 10.0
                })
                .collect();
            let x = Matrix::new(&data, rows, cols, stride).unwrap();
            let mut sums = vec![f32::NAN; rows];
            row_sums(x, &mut sums).unwrap();
            for (r, &got) in sums.iter().enumerate() {
                let row = &data[r * stride..][..cols];
                let exact: f64 = row.iter().map(|&v| f64::from(v)).sum();
                let magnitude: f64 = row.iter().map(|&v| f64::from(v).abs()).sum();
                // An element passes through at most cols / 16 adds in its lane and 4 in the
                // pairwise sum of the lanes, each rounding by at most one epsilon of the
                // magnitudes summed so far.
                let bound = magnitude * f64::from(f32::EPSILON) * ((cols / LANES) as f64 + 5.0);
                prop_assert!((f64::from(got) - exact).abs() <= bound, "row {r}: {got} against {exact}");
            }
        }
    }

    #[test]
    fn special_values_carry_through_and_the_sizes_must_agree() {
        let data = [1.0, f32::NAN, 2.0, 3.0, f32::INFINITY, 1.0, -4.0, 0.5, 0.25];
        let x = Matrix::new(&data, 3, 3, 3).unwrap();
        let mut sums = [0.0; 3];
        row_sums(x, &mut sums).unwrap();
        assert!(sums[0].is_nan());
        assert_eq!(sums[1], f32::INFINITY);
        assert_eq!(sums[2], -3.25);
        let mut short = [0.0; 2];
        let error = row_sums(x, &mut short).unwrap_err();
        assert!(error.to_string().contains("3 rows into 2 elements"), "{error}");
    }
}
