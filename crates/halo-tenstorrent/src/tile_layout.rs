//! The tile layout of Tenstorrent's compute: a matrix is cut into 32×32 tiles, stored one after
//! another in row-major tile order, and each tile is four 16×16 faces (top-left, top-right,
//! bottom-left, bottom-right), each face row-major.
//!
//! A tensor's last two dimensions are the matrix (a vector is one row, a scalar a 1×1 matrix);
//! the dimensions before them are a batch of matrices, stored one after another. Rows and
//! columns are padded with zeros up to multiples of 32, so a tiled buffer is larger than the
//! row-major one for shapes that are not multiples of 32.
//!
//! The conversions move bytes, so they are the same for every element type of one size; the
//! types Tensix cores compute in are accepted: `f32`, `f16`, `bf16` and `i32`.

use halo_hal::{ElementType, Error, NumericalType, Result};

/// A tile's side, in elements.
pub const TILE: u64 = 32;
/// A face's side, in elements.
pub const FACE: u64 = 16;

/// A tensor seen as a batch of matrices, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixBatch {
    /// How many matrices.
    pub batch: u64,
    /// Rows of each.
    pub rows: u64,
    /// Columns of each.
    pub cols: u64,
}

impl MatrixBatch {
    /// The matrices of a tensor of `shape`.
    ///
    /// # Errors
    /// `InvalidArgument` when the element count overflows.
    pub fn of_shape(shape: &[u64]) -> Result<MatrixBatch> {
        let (batch_dims, rows, cols) = match shape {
            [] => (&[][..], 1, 1),
            [cols] => (&[][..], 1, *cols),
            [batch @ .., rows, cols] => (batch, *rows, *cols),
        };
        let batch = batch_dims
            .iter()
            .try_fold(1u64, |product, &dim| product.checked_mul(dim))
            .ok_or_else(|| too_large(shape))?;
        Ok(MatrixBatch { batch, rows, cols })
    }

    fn padded(value: u64) -> Option<u64> {
        value.checked_next_multiple_of(TILE)
    }

    /// Elements of the tiled form, padding included.
    ///
    /// # Errors
    /// `InvalidArgument` when the count overflows.
    pub fn tiled_elements(&self) -> Result<u64> {
        Self::padded(self.rows)
            .zip(Self::padded(self.cols))
            .and_then(|(rows, cols)| rows.checked_mul(cols))
            .and_then(|matrix| matrix.checked_mul(self.batch))
            .ok_or_else(|| too_large(&[self.batch, self.rows, self.cols]))
    }

    /// Elements of the row-major form.
    ///
    /// # Errors
    /// `InvalidArgument` when the count overflows.
    pub fn row_major_elements(&self) -> Result<u64> {
        self.rows
            .checked_mul(self.cols)
            .and_then(|matrix| matrix.checked_mul(self.batch))
            .ok_or_else(|| too_large(&[self.batch, self.rows, self.cols]))
    }

    /// The tiled form's element index of row `row`, column `col` (a multiple of [`FACE`] or
    /// not) of matrix `matrix`.
    pub fn tiled_index(&self, matrix: u64, row: u64, col: u64) -> u64 {
        let tiles_per_row = self.cols.div_ceil(TILE);
        let tiles_per_matrix = self.rows.div_ceil(TILE) * tiles_per_row;
        let tile = matrix * tiles_per_matrix + (row / TILE) * tiles_per_row + col / TILE;
        let face = ((row % TILE) / FACE) * 2 + (col % TILE) / FACE;
        tile * TILE * TILE + face * FACE * FACE + (row % FACE) * FACE + col % FACE
    }
}

fn too_large(shape: &[u64]) -> Error {
    Error::invalid_argument(format!("a tensor of shape {shape:?} is too large to tile"))
}

/// The byte size of an element of the types tiles hold.
///
/// # Errors
/// `Unimplemented` naming the type for any other.
pub fn tile_element_size(element_type: ElementType) -> Result<usize> {
    match (element_type.numerical_type(), element_type.bit_count()) {
        (NumericalType::FloatIeee, 32 | 16)
        | (NumericalType::FloatBrain, 16)
        | (NumericalType::IntegerSigned | NumericalType::Integer, 32) => Ok(element_type.byte_size()),
        _ => Err(Error::unimplemented(format!(
            "the tile layout holds f32, f16, bf16 and i32 elements, not element type {:#x}",
            element_type.raw()
        ))),
    }
}

/// Byte lengths of both forms of a tensor, checked against the buffers given.
fn checked_lengths(
    shape: &[u64],
    element_type: ElementType,
    row_major: usize,
    tiled: usize,
) -> Result<(MatrixBatch, usize)> {
    let size = tile_element_size(element_type)?;
    let matrices = MatrixBatch::of_shape(shape)?;
    let bytes = |elements: u64| {
        usize::try_from(elements)
            .ok()
            .and_then(|e| e.checked_mul(size))
            .ok_or_else(|| too_large(shape))
    };
    let want_row_major = bytes(matrices.row_major_elements()?)?;
    let want_tiled = bytes(matrices.tiled_elements()?)?;
    if row_major != want_row_major || tiled != want_tiled {
        return Err(Error::invalid_argument(format!(
            "a tensor of shape {shape:?} takes {want_row_major} bytes row-major and {want_tiled} tiled, \
             not {row_major} and {tiled}"
        )));
    }
    Ok((matrices, size))
}

/// The byte length of the tiled form of a tensor of `shape` and `element_type`.
///
/// # Errors
/// As [`tile_element_size`]; `InvalidArgument` when the size overflows.
pub fn tiled_byte_length(shape: &[u64], element_type: ElementType) -> Result<u64> {
    let size = tile_element_size(element_type)? as u64;
    MatrixBatch::of_shape(shape)?
        .tiled_elements()?
        .checked_mul(size)
        .ok_or_else(|| too_large(shape))
}

/// Each run of up to [`FACE`] elements a row of a matrix holds within one face: (matrix, row,
/// first column, length).
fn face_runs(matrices: MatrixBatch) -> impl Iterator<Item = (u64, u64, u64, u64)> {
    (0..matrices.batch).flat_map(move |matrix| {
        (0..matrices.rows).flat_map(move |row| {
            (0..matrices.cols)
                .step_by(FACE as usize)
                .map(move |col| (matrix, row, col, FACE.min(matrices.cols - col)))
        })
    })
}

/// Writes the tiled form of the row-major `row_major` into `tiled`, zeros in the padding.
///
/// # Errors
/// As [`tile_element_size`]; `InvalidArgument` when a buffer's length is not its form's.
pub fn tilize(shape: &[u64], element_type: ElementType, row_major: &[u8], tiled: &mut [u8]) -> Result<()> {
    let (matrices, size) = checked_lengths(shape, element_type, row_major.len(), tiled.len())?;
    tiled.fill(0);
    for (matrix, row, col, length) in face_runs(matrices) {
        let from = ((matrix * matrices.rows + row) * matrices.cols + col) as usize * size;
        let to = matrices.tiled_index(matrix, row, col) as usize * size;
        let bytes = length as usize * size;
        tiled[to..to + bytes].copy_from_slice(&row_major[from..from + bytes]);
    }
    Ok(())
}

/// Writes the row-major form of the tiled `tiled` into `row_major`, leaving the padding out.
///
/// # Errors
/// As [`tile_element_size`]; `InvalidArgument` when a buffer's length is not its form's.
pub fn untilize(shape: &[u64], element_type: ElementType, tiled: &[u8], row_major: &mut [u8]) -> Result<()> {
    let (matrices, size) = checked_lengths(shape, element_type, row_major.len(), tiled.len())?;
    for (matrix, row, col, length) in face_runs(matrices) {
        let to = ((matrix * matrices.rows + row) * matrices.cols + col) as usize * size;
        let from = matrices.tiled_index(matrix, row, col) as usize * size;
        let bytes = length as usize * size;
        row_major[to..to + bytes].copy_from_slice(&tiled[from..from + bytes]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn element_type(name: &str) -> ElementType {
        ElementType::parse(name).unwrap()
    }

    const TYPES: [&str; 4] = ["f32", "f16", "bf16", "i32"];

    /// A row-major tensor whose every element is distinct (its index, in the element's bytes).
    fn numbered(elements: u64, size: usize) -> Vec<u8> {
        (0..elements).flat_map(|i| i.to_le_bytes()[..size].to_vec()).collect()
    }

    fn tiled_of(shape: &[u64], name: &str) -> (Vec<u8>, Vec<u8>) {
        let ty = element_type(name);
        let size = tile_element_size(ty).unwrap();
        let elements = MatrixBatch::of_shape(shape).unwrap().row_major_elements().unwrap();
        let row_major = numbered(elements, size);
        let mut tiled = vec![0xAB; tiled_byte_length(shape, ty).unwrap() as usize];
        tilize(shape, ty, &row_major, &mut tiled).unwrap();
        (row_major, tiled)
    }

    #[test]
    fn one_tile_is_four_row_major_faces() {
        let (_, tiled) = tiled_of(&[32, 32], "i32");
        let at = |index: usize| i32::from_le_bytes(tiled[index * 4..index * 4 + 4].try_into().unwrap());
        // Face 0 starts with row 0, columns 0..16; its second row is row 1.
        assert_eq!((0..16).map(at).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
        assert_eq!(at(16), 32);
        // Face 1 holds columns 16..32 of rows 0..16; face 2 rows 16..32 of columns 0..16.
        assert_eq!(at(256), 16);
        assert_eq!(at(512), 16 * 32);
        assert_eq!(at(768), 16 * 32 + 16);
        assert_eq!(at(1023), 32 * 32 - 1);
    }

    #[test]
    fn padding_is_zero_and_shapes_are_seen_as_batches_of_matrices() {
        let (_, tiled) = tiled_of(&[3, 5], "f32");
        assert_eq!(tiled.len(), 32 * 32 * 4);
        let nonzero = tiled.chunks(4).filter(|e| e.iter().any(|&b| b != 0)).count();
        assert_eq!(
            nonzero,
            3 * 5 - 1,
            "every element but the zeroth is nonzero, padding is zero"
        );
        assert_eq!(
            MatrixBatch::of_shape(&[2, 3, 40, 70]).unwrap(),
            MatrixBatch {
                batch: 6,
                rows: 40,
                cols: 70
            }
        );
        assert_eq!(
            MatrixBatch::of_shape(&[7]).unwrap(),
            MatrixBatch {
                batch: 1,
                rows: 1,
                cols: 7
            }
        );
        assert_eq!(
            MatrixBatch::of_shape(&[]).unwrap(),
            MatrixBatch {
                batch: 1,
                rows: 1,
                cols: 1
            }
        );
        assert_eq!(
            tiled_byte_length(&[2, 3, 40, 70], element_type("bf16")).unwrap(),
            6 * 64 * 96 * 2
        );
    }

    #[test]
    fn wrong_lengths_types_and_huge_shapes_are_refused_by_name() {
        let ty = element_type("f32");
        let error = tilize(&[2, 2], ty, &[0; 16], &mut [0; 8]).unwrap_err();
        assert!(
            error.to_string().contains("takes 16 bytes row-major and 4096 tiled"),
            "{error}"
        );
        let error = tiled_byte_length(&[4], element_type("i8")).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::Unimplemented);
        assert!(tiled_byte_length(&[u64::MAX, 2, 2], ty).is_err());
        assert!(tiled_byte_length(&[u64::MAX], ty).is_err());
        let mut out = [0u8; 16];
        assert!(untilize(&[2, 2], ty, &[0; 8], &mut out).is_err());
    }

    fn shapes() -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec(1u64..70, 0..4).prop_flat_map(|mut dims| {
            // Keep tensors small: at most two batch dimensions of up to 3.
            for dim in dims.iter_mut().rev().skip(2) {
                *dim = 1 + *dim % 3;
            }
            Just(dims)
        })
    }

    proptest! {
        #[test]
        fn untilize_inverts_tilize(shape in shapes(), type_index in 0usize..4) {
            let name = TYPES[type_index];
            let (row_major, tiled) = tiled_of(&shape, name);
            let mut back = vec![0xCD; row_major.len()];
            untilize(&shape, element_type(name), &tiled, &mut back).unwrap();
            prop_assert_eq!(back, row_major);
        }

        #[test]
        fn every_element_lands_where_the_layout_says(shape in shapes()) {
            let (row_major, tiled) = tiled_of(&shape, "i32");
            let matrices = MatrixBatch::of_shape(&shape).unwrap();
            let padding = (tiled.len() - row_major.len()) / 4;
            let zeros = tiled.chunks(4).filter(|e| e == &[0, 0, 0, 0]).count();
            // Element 0 is zero too.
            prop_assert_eq!(zeros, padding + 1);
            for matrix in 0..matrices.batch {
                for row in 0..matrices.rows {
                    for col in 0..matrices.cols {
                        let index = (matrix * matrices.rows + row) * matrices.cols + col;
                        let at = matrices.tiled_index(matrix, row, col) as usize * 4;
                        prop_assert_eq!(&tiled[at..at + 4], &(index as i32).to_le_bytes()[..]);
                    }
                }
            }
        }
    }
}
