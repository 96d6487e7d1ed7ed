//! Row-major f32 matrix views whose extents are checked against their slices once, when made.

use halo_hal::{Error, Result};

/// Elements a `rows` x `cols` matrix with rows `stride` apart spans (`None` when it overflows).
pub(crate) fn span(rows: usize, cols: usize, stride: usize) -> Option<usize> {
    match (rows, cols) {
        (0, _) | (_, 0) => Some(0),
        _ => (rows - 1).checked_mul(stride)?.checked_add(cols),
    }
}

/// Checks that a `rows` x `cols` matrix with rows `row_stride` apart fits `len` elements; an error naming
/// `what` when the layout is impossible or the slice too short.
fn check_fits(what: &str, len: usize, rows: usize, cols: usize, row_stride: usize) -> Result<()> {
    if rows > 1 && row_stride < cols {
        return Err(Error::invalid_argument(format!(
            "{what}: rows {row_stride} elements apart overlap their {cols} columns"
        )));
    }
    let span = span(rows, cols, row_stride)
        .ok_or_else(|| Error::out_of_range(format!("{what}: {rows}x{cols} with row stride {row_stride} overflows")))?;
    if span > len {
        return Err(Error::out_of_range(format!(
            "{what}: {rows}x{cols} with row stride {row_stride} spans {span} elements, the slice holds {len}"
        )));
    }
    Ok(())
}

/// A read-only `rows` x `cols` row-major view, rows `row_stride` elements apart.
#[derive(Debug, Clone, Copy)]
pub struct Matrix<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_stride: usize,
}

impl<'a> Matrix<'a> {
    /// A view of `data`.
    ///
    /// # Errors
    /// `InvalidArgument` when rows would overlap, `OutOfRange` when `data` is too short.
    pub fn new(data: &'a [f32], rows: usize, cols: usize, row_stride: usize) -> Result<Self> {
        check_fits("matrix", data.len(), rows, cols, row_stride)?;
        Ok(Matrix {
            data,
            rows,
            cols,
            row_stride,
        })
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `row`'s `cols` elements.
    pub(crate) fn row(&self, row: usize) -> &'a [f32] {
        let start = row * self.row_stride;
        &self.data[start..start + self.cols]
    }
}

/// A writable `rows` x `cols` row-major view, rows `row_stride` elements apart.
#[derive(Debug)]
pub struct MatrixMut<'a> {
    pub(crate) data: &'a mut [f32],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_stride: usize,
}

impl<'a> MatrixMut<'a> {
    /// A view of `data`.
    ///
    /// # Errors
    /// As [`Matrix::new`].
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize, row_stride: usize) -> Result<Self> {
        check_fits("output matrix", data.len(), rows, cols, row_stride)?;
        Ok(MatrixMut {
            data,
            rows,
            cols,
            row_stride,
        })
    }

    /// Row `row`'s `cols` elements.
    pub(crate) fn row_mut(&mut self, row: usize) -> &mut [f32] {
        let start = row * self.row_stride;
        &mut self.data[start..start + self.cols]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_that_do_not_fit_their_slices_are_refused_with_their_sizes() {
        let data = [0f32; 10];
        assert!(Matrix::new(&data, 2, 5, 5).is_ok());
        assert!(
            Matrix::new(&data, 3, 2, 4).is_ok(),
            "the last row needs only its columns"
        );
        let error = Matrix::new(&data, 3, 4, 4).unwrap_err();
        assert!(
            error.to_string().contains("spans 12 elements, the slice holds 10"),
            "{error}"
        );
        let error = Matrix::new(&data, 2, 4, 3).unwrap_err();
        assert!(error.to_string().contains("overlap"), "{error}");
        assert!(Matrix::new(&data, 0, 100, 0).is_ok(), "empty");
        let error = Matrix::new(&data, usize::MAX, 2, usize::MAX).unwrap_err();
        assert!(error.to_string().contains("overflows"), "{error}");
    }
}
