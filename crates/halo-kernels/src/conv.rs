//! 2-D convolutions of any group count, stride and dilation, over an input padded beforehand:
//! one matmul per filter tap over a shifted view of the input, with no copy of its windows.
//!
//! Why this shape: IREE 3.13 (and halo's graph rewrite before it) computes a 3x3 convolution by
//! first writing every tap's window of the input side by side (im2col: nine times the input),
//! then copying that into its matmul layout, then multiplying. Inside a model those copies and
//! the cold reads of their result cost about as much as the arithmetic. Here a tap is a view:
//! with the output computed over the padded width (`wp` columns a row, of which the last
//! `kw - 1` are thrown away), output column `q` of tap `(dy, dx)` reads input column
//! `q + dy * wp + dx` of every channel, so the product for a tap is `filter[dy][dx]` (`F x C`)
//! times the input seen from that offset (`C x n`, rows a channel plane apart). The tile's
//! inputs stay in cache across the taps.
//!
//! A stride of `s` keeps this shape when the input arrives split into its `s x s` phases (phase
//! `(a, b)` holds the rows `a, a + s, ...` and the columns `b, b + s, ...`): output `(y, x)` of
//! tap `(dy, dx)` reads input `(s y + dy, s x + dx)`, which is element `(y + dy / s, x + dx / s)`
//! of phase `(dy % s, dx % s)`, so each tap is again a shifted view, of one phase, and the
//! output is computed over the phase width. Dilation only moves the taps. Only the real taps are
//! multiplied: a stride-2 3x3 convolution written as a unit-stride one over the phases (a 2x2
//! filter on four times the channels) would multiply 16 taps' worth, 7 of them zeros.
//!
//! Groups (ResNeXt's 32 groups of 4 to 32 channels) are separate convolutions of the same shape,
//! group `g` reading only its own channels, which are the phase's planes `g C/G ..`: a group's
//! tap is the same shifted view, started that many planes later, so a tile spanning several
//! groups is a product per group.

use crate::matmul::{multiply_sum_on, Bias, Epilogue};
use crate::{Activation, KernelPath, Matrix, MatrixMut};
use halo_hal::{Error, Result};
use std::ops::Range;

/// The sizes of a convolution: `filters` filters of `channels / groups` x `kernel_height` x
/// `kernel_width` over a `channels` x `padded_height` x `padded_width` input, output positions
/// `stride` input positions apart and taps `dilation` apart; filter `f` reads the input channels
/// of its group, `f / (filters / groups)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvShape {
    /// Input channels (of all the groups).
    pub channels: usize,
    /// Output channels (of all the groups).
    pub filters: usize,
    /// Groups, each `channels / groups` input channels to `filters / groups` outputs (1 or
    /// more, dividing both).
    pub groups: usize,
    /// Input rows, padding included.
    pub padded_height: usize,
    /// Input columns, padding included.
    pub padded_width: usize,
    /// Filter rows.
    pub kernel_height: usize,
    /// Filter columns.
    pub kernel_width: usize,
    /// Input rows and columns from one output position to the next (1 or more).
    pub stride: usize,
    /// Input rows and columns from one filter tap to the next (1 or more).
    pub dilation: usize,
}

impl ConvShape {
    /// A unit-stride, undilated convolution of one group.
    pub fn unit(channels: usize, filters: usize, padded: (usize, usize), kernel: (usize, usize)) -> Self {
        ConvShape {
            channels,
            filters,
            groups: 1,
            padded_height: padded.0,
            padded_width: padded.1,
            kernel_height: kernel.0,
            kernel_width: kernel.1,
            stride: 1,
            dilation: 1,
        }
    }

    /// Output rows and columns.
    ///
    /// # Errors
    /// `InvalidArgument` when the filter is empty or, dilated, larger than the padded input, the
    /// stride or dilation is 0, or the groups do not divide the channels and the filters.
    pub fn output_size(&self) -> Result<(usize, usize)> {
        let g = self.groups;
        if g == 0 || !self.channels.is_multiple_of(g) || !self.filters.is_multiple_of(g) {
            return Err(Error::invalid_argument(format!(
                "a convolution of {} channels to {} filters in {g} groups: the groups do not divide them",
                self.channels, self.filters
            )));
        }
        let (kh, kw, s, d) = (self.kernel_height, self.kernel_width, self.stride, self.dilation);
        let span = |taps: usize| taps.checked_sub(1)?.checked_mul(d)?.checked_add(1);
        match (span(kh), span(kw)) {
            (Some(h), Some(w)) if s > 0 && d > 0 && h <= self.padded_height && w <= self.padded_width => {
                Ok(((self.padded_height - h) / s + 1, (self.padded_width - w) / s + 1))
            }
            _ => Err(Error::invalid_argument(format!(
                "a {kh}x{kw} filter of stride {s} and dilation {d} over a {}x{} padded input",
                self.padded_height, self.padded_width
            ))),
        }
    }

    /// Rows and columns of each of the input's `stride x stride` phases.
    pub fn phase_size(&self) -> (usize, usize) {
        let s = self.stride.max(1);
        (self.padded_height.div_ceil(s), self.padded_width.div_ceil(s))
    }

    /// Elements of the input, the filters and the output, in that order (`None` on overflow).
    pub(crate) fn lengths(&self) -> Option<[usize; 3]> {
        let (ho, wo) = self.output_size().ok()?;
        let (ph, pw) = self.phase_size();
        let phases = self.stride.checked_mul(self.stride)?;
        let taps = self.kernel_height.checked_mul(self.kernel_width)?;
        Some([
            phases.checked_mul(self.channels)?.checked_mul(ph)?.checked_mul(pw)?,
            taps.checked_mul(self.filters)?
                .checked_mul(self.channels / self.groups)?,
            self.filters.checked_mul(ho)?.checked_mul(wo)?,
        ])
    }
}

/// The tile's output, bias, and how it ends.
#[derive(Debug, Clone, Copy)]
pub struct ConvEpilogue<'a> {
    /// One element per filter, added to its whole output plane.
    pub bias: Option<&'a [f32]>,
    /// Applied after the bias.
    pub activation: Activation,
}

thread_local! {
    /// Each thread's wide output tile (rows over the padded width); it grows to the largest tile
    /// the thread has computed.
    static WIDE_TILE: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Output channels `filters` and output rows `rows` of the convolution, on the calling thread,
/// by the [best](KernelPath::best) path.
///
/// # Errors
/// As [`conv2d_tile_on`].
pub fn conv2d_tile(
    shape: &ConvShape,
    input: &[f32],
    weights: &[f32],
    output: &mut [f32],
    epilogue: &ConvEpilogue<'_>,
    (filters, rows): (Range<usize>, Range<usize>),
) -> Result<()> {
    let path = KernelPath::best();
    conv2d_tile_on(path, shape, input, weights, output, epilogue, (filters, rows))
}

/// Output channels `filters` and output rows `rows` of the convolution, on the calling thread,
/// by `path`.
///
/// `input` is the padded input's `stride x stride` phases, row phase first, each `channels`
/// planes of the [phase size](ConvShape::phase_size) (for stride 1: `channels` planes of
/// `padded_height` x `padded_width`); `weights` are ordered
/// `[kernel_height][kernel_width][filters][channels / groups]` (tap first); `output` is
/// `filters` planes of the output size, of which only the tile is written.
///
/// # Errors
/// `InvalidArgument` naming what is wrong when a slice is shorter than the shape needs, the bias
/// is not one element per filter, or the tile lies outside the output; `ResourceExhausted` when
/// the tile's scratch cannot be allocated; `Unavailable` when this CPU does not run `path`.
pub fn conv2d_tile_on(
    path: KernelPath,
    shape: &ConvShape,
    input: &[f32],
    weights: &[f32],
    output: &mut [f32],
    epilogue: &ConvEpilogue<'_>,
    (filters, rows): (Range<usize>, Range<usize>),
) -> Result<()> {
    if !path.is_available() {
        return Err(Error::unavailable(format!(
            "this CPU does not run the {path:?} convolution kernel"
        )));
    }
    let (ho, wo) = shape.output_size()?;
    let [input_len, weights_len, output_len] = shape
        .lengths()
        .ok_or_else(|| Error::invalid_argument(format!("convolution {shape:?} overflows")))?;
    let lengths = [
        ("input", input.len(), input_len),
        ("filters", weights.len(), weights_len),
        ("output", output.len(), output_len),
    ];
    check_lengths(|| format!("convolution {shape:?}"), lengths)?;
    check_bias_and_tile(
        "convolution",
        ("filters", shape.filters, ho),
        epilogue.bias,
        (&filters, &rows),
    )?;
    if filters.is_empty() || rows.is_empty() {
        return Ok(());
    }
    let (_, pw) = shape.phase_size();
    let wide_cols = (rows.len() - 1) * pw + wo;
    if pw == wo {
        // Output rows as wide as the phase rows (one-column filters): the wide tile is the output.
        let plane = ho * wo;
        let start = filters.start * plane + rows.start * wo;
        let tile = MatrixMut::new(&mut output[start..], filters.len(), wide_cols, plane)?;
        return compute_wide(path, shape, (input, weights), epilogue, (filters, rows.start), tile);
    }
    WIDE_TILE.with_borrow_mut(|wide| {
        let len = filters.len() * wide_cols;
        if wide.len() < len {
            wide.try_reserve_exact(len - wide.len())
                .map_err(|_| Error::resource_exhausted(format!("no memory for a convolution tile of {len} floats")))?;
            wide.resize(len, 0.0);
        }
        let tile = MatrixMut::new(&mut wide[..len], filters.len(), wide_cols, wide_cols)?;
        compute_wide(
            path,
            shape,
            (input, weights),
            epilogue,
            (filters.clone(), rows.start),
            tile,
        )?;
        for (f, wide_row) in filters.zip(wide.chunks_exact(wide_cols)) {
            for (y, wide_line) in rows.clone().zip(wide_row.chunks(pw)) {
                let start = (f * ho + y) * wo;
                output[start..start + wo].copy_from_slice(&wide_line[..wo]);
            }
        }
        Ok(())
    })
}

/// Checks that each slice, `(what, len, needed)`, holds what `operation` needs of it.
///
/// # Errors
/// `InvalidArgument` naming the operation, the slice and both lengths.
pub(crate) fn check_lengths(operation: impl FnOnce() -> String, slices: [(&str, usize, usize); 3]) -> Result<()> {
    match slices.into_iter().find(|&(_, len, needed)| len < needed) {
        Some((what, len, needed)) => Err(Error::invalid_argument(format!(
            "{}: the {what} holds {len} elements of the {needed} it needs",
            operation()
        ))),
        None => Ok(()),
    }
}

/// Checks that the bias has one element per output channel (`count` of them, called `unit`) and
/// that the tile of channels `outputs` and rows `rows` lies in the output's `count` x `rows_out`.
///
/// # Errors
/// `InvalidArgument` naming the operation and what does not fit.
pub(crate) fn check_bias_and_tile(
    operation: &str,
    (unit, count, rows_out): (&str, usize, usize),
    bias: Option<&[f32]>,
    (outputs, rows): (&Range<usize>, &Range<usize>),
) -> Result<()> {
    if let Some(bias) = bias.filter(|bias| bias.len() != count) {
        return Err(Error::invalid_argument(format!(
            "{operation} bias of {} elements for {count} {unit}",
            bias.len()
        )));
    }
    if outputs.start > outputs.end || outputs.end > count || rows.start > rows.end || rows.end > rows_out {
        return Err(Error::invalid_argument(format!(
            "{operation} tile of {unit} {outputs:?} and rows {rows:?} outside {count} {unit} of {rows_out} rows"
        )));
    }
    Ok(())
}

/// The tile over the phase width into `tile` (`filters` rows, from output row `first_row`): a
/// product per group that the filters span.
fn compute_wide(
    path: KernelPath,
    shape: &ConvShape,
    (input, weights): (&[f32], &[f32]),
    epilogue: &ConvEpilogue<'_>,
    (filters, first_row): (Range<usize>, usize),
    tile: MatrixMut<'_>,
) -> Result<()> {
    let per_group = shape.filters / shape.groups;
    let (cols, row_stride) = (tile.cols, tile.row_stride);
    let mut rest = tile.data;
    let mut terms = Vec::new();
    let mut f = filters.start;
    while f < filters.end {
        let group = f / per_group;
        let group_filters = f..filters.end.min((group + 1) * per_group);
        let rows = group_filters.len();
        let split = (rows * row_stride).min(rest.len());
        let (group_rows, later) = std::mem::take(&mut rest).split_at_mut(split);
        rest = later;
        let mut group_tile = MatrixMut::new(group_rows, rows, cols, row_stride)?;
        let tile_epilogue = Epilogue {
            bias: epilogue
                .bias
                .map_or(Bias::None, |bias| Bias::PerRow(&bias[group_filters.clone()])),
            residual: None,
            activation: epilogue.activation,
        };
        tap_terms(
            shape,
            (input, weights),
            (group, group_filters.clone(), first_row),
            cols,
            &mut terms,
        )?;
        multiply_sum_on(path, &terms, &mut group_tile, &tile_epilogue);
        f = group_filters.end;
    }
    Ok(())
}

/// Into `terms`, one product per filter tap for filters `filters` of group `group`, from output
/// row `first_row`, over `cols` columns of the phase width: the tap's filters (`filters` x
/// `channels / groups`) by the group's input seen from the tap's offset; none when the group has
/// no input channels (the output is then the bias alone).
fn tap_terms<'a>(
    shape: &ConvShape,
    (input, weights): (&'a [f32], &'a [f32]),
    (group, filters, first_row): (usize, Range<usize>, usize),
    cols: usize,
    terms: &mut Vec<(Matrix<'a>, Matrix<'a>)>,
) -> Result<()> {
    terms.clear();
    let c = shape.channels / shape.groups;
    if c == 0 {
        return Ok(());
    }
    let (ph, pw) = shape.phase_size();
    let (s, d) = (shape.stride, shape.dilation);
    let taps = shape.kernel_height * shape.kernel_width;
    terms
        .try_reserve_exact(taps)
        .map_err(|_| Error::resource_exhausted(format!("no memory for the {taps} taps of a convolution")))?;
    for dy in 0..shape.kernel_height {
        for dx in 0..shape.kernel_width {
            let tap = dy * shape.kernel_width + dx;
            let a = Matrix::new(
                &weights[(tap * shape.filters + filters.start) * c..],
                filters.len(),
                c,
                c,
            )?;
            let (ry, rx) = (dy * d, dx * d);
            let phase = (ry % s) * s + rx % s;
            let shift = (phase * shape.groups + group) * c * ph * pw + (first_row + ry / s) * pw + rx / s;
            let from_shift = input.get(shift..).ok_or_else(|| {
                Error::invalid_argument(format!("convolution {shape:?}: tap ({dy}, {dx}) starts past the input"))
            })?;
            terms.push((a, Matrix::new(from_shift, c, cols, ph * pw)?));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_values::{any_activation, values};
    use proptest::prelude::*;

    /// The convolution by its definition, in f64, `[filters][rows][cols]`.
    fn reference(
        shape: &ConvShape,
        input: &[f32],
        weights: &[f32],
        bias: Option<&[f32]>,
        activation: Activation,
    ) -> Vec<f64> {
        let (ho, wo) = shape.output_size().unwrap();
        let (c, hp, wp, kh, kw) = (
            shape.channels,
            shape.padded_height,
            shape.padded_width,
            shape.kernel_height,
            shape.kernel_width,
        );
        let (s, d) = (shape.stride, shape.dilation);
        let (cg, fg) = (c / shape.groups, shape.filters / shape.groups);
        let mut out = Vec::new();
        for f in 0..shape.filters {
            for y in 0..ho {
                for x in 0..wo {
                    let mut sum = bias.map_or(0.0, |bias| f64::from(bias[f]));
                    for ch in 0..cg {
                        for dy in 0..kh {
                            for dx in 0..kw {
                                let w = weights[((dy * kw + dx) * shape.filters + f) * cg + ch];
                                let input_ch = f / fg * cg + ch;
                                let v = input[input_ch * hp * wp + (s * y + d * dy) * wp + s * x + d * dx];
                                sum += f64::from(w) * f64::from(v);
                            }
                        }
                    }
                    out.push(activation.reference(sum));
                }
            }
        }
        out
    }

    /// The plain input (`channels` planes of the padded size) as the kernel takes it: split
    /// into its `stride x stride` phases, zeros past the padded size.
    fn phases(shape: &ConvShape, plain: &[f32]) -> Vec<f32> {
        let (hp, wp, s) = (shape.padded_height, shape.padded_width, shape.stride);
        let (ph, pw) = shape.phase_size();
        let mut split = vec![0.0; shape.lengths().unwrap()[0]];
        for (a, b, ch, y, x) in phase_positions(s, shape.channels, ph, pw) {
            let (row, col) = (y * s + a, x * s + b);
            if row < hp && col < wp {
                split[(((a * s + b) * shape.channels + ch) * ph + y) * pw + x] = plain[(ch * hp + row) * wp + col];
            }
        }
        split
    }

    /// Every `(a, b, channel, y, x)` of `s x s` phases of `channels` planes of `ph` x `pw`.
    fn phase_positions(
        s: usize,
        channels: usize,
        ph: usize,
        pw: usize,
    ) -> impl Iterator<Item = (usize, usize, usize, usize, usize)> {
        (0..s).flat_map(move |a| {
            (0..s).flat_map(move |b| {
                (0..channels).flat_map(move |ch| (0..ph).flat_map(move |y| (0..pw).map(move |x| (a, b, ch, y, x))))
            })
        })
    }

    /// Shapes of 1 to 3 groups, each of 0 to 11 channels to 1 to 14 filters, with tiles of up
    /// to all the filters (so spanning groups) and rows.
    fn shape_and_tiles() -> impl Strategy<Value = (ConvShape, usize, usize)> {
        (
            (0usize..12, 1usize..15, 1usize..4),
            1usize..4,
            1usize..4,
            1usize..4,
            1usize..3,
            0usize..9,
            0usize..12,
        )
            .prop_flat_map(
                |(
                    (per_group, filters_per_group, groups),
                    kernel_height,
                    kernel_width,
                    stride,
                    dilation,
                    extra_h,
                    extra_w,
                )| {
                    let (channels, filters) = (per_group * groups, filters_per_group * groups);
                    let shape = ConvShape {
                        channels,
                        filters,
                        groups,
                        padded_height: (kernel_height - 1) * dilation + 1 + extra_h,
                        padded_width: (kernel_width - 1) * dilation + 1 + extra_w,
                        kernel_height,
                        kernel_width,
                        stride,
                        dilation,
                    };
                    (Just(shape), 1..=filters, 1..=extra_h / stride + 1)
                },
            )
    }

    proptest! {
        /// Tiles of every size cover the output exactly and give the definition's values.
        #[test]
        fn tiled_convolutions_match_the_definition(
            (shape, filters_per_tile, rows_per_tile) in shape_and_tiles(),
            bias in any::<bool>(), activation in any_activation(), seed in any::<u64>(),
        ) {
            let [_, weights_len, output_len] = shape.lengths().unwrap();
            let plain_len = shape.channels * shape.padded_height * shape.padded_width;
            let (plain, weights, bias_data) =
                (values(plain_len, seed), values(weights_len, seed ^ 1), values(shape.filters, seed ^ 2));
            let input = phases(&shape, &plain);
            let epilogue = ConvEpilogue {
                bias: bias.then_some(&bias_data[..]),
                activation,
            };
            let expected = reference(&shape, &plain, &weights, epilogue.bias, activation);
            let (ho, _) = shape.output_size().unwrap();
            for path in KernelPath::ALL {
                if !path.is_available() {
                    eprintln!("skipped: the {path:?} convolution path, which this CPU does not run");
                    continue;
                }
                let sentinel = 12345.0f32;
                let mut output = vec![sentinel; output_len + 3];
                for f in (0..shape.filters).step_by(filters_per_tile) {
                    for y in (0..ho).step_by(rows_per_tile) {
                        let tile = (f..shape.filters.min(f + filters_per_tile), y..ho.min(y + rows_per_tile));
                        conv2d_tile_on(path, &shape, &input, &weights, &mut output, &epilogue, tile).unwrap();
                    }
                }
                for (i, (&got, want)) in output.iter().zip(&expected).enumerate() {
                    let tolerance = 1e-5 * (shape.channels / shape.groups * shape.kernel_height * shape.kernel_width) as f64 + 1e-6;
                    prop_assert!((f64::from(got) - want).abs() <= tolerance, "{path:?} {shape:?} [{i}]: {got} against {want}");
                }
                prop_assert_eq!(&output[output_len..], &[sentinel; 3][..], "{:?}: written past the output", path);
            }
        }
    }

    #[test]
    fn shapes_slices_and_tiles_that_do_not_fit_are_errors_naming_them() {
        let shape = ConvShape::unit(2, 3, (5, 5), (3, 3));
        let (input, weights, bias) = (vec![1.0; 50], vec![1.0; 54], [0.0; 3]);
        let mut output = vec![0.0; 27];
        let epilogue = ConvEpilogue {
            bias: Some(&bias),
            activation: Activation::Identity,
        };
        let call = |shape: &ConvShape, input: &[f32], output: &mut [f32], epilogue, tile| {
            conv2d_tile(shape, input, &weights, output, epilogue, tile)
                .unwrap_err()
                .to_string()
        };
        let wide = ConvShape {
            kernel_width: 6,
            ..shape
        };
        let message = call(&wide, &input, &mut output, &epilogue, (0..3, 0..3));
        assert!(
            message.contains("a 3x6 filter of stride 1 and dilation 1 over a 5x5 padded input"),
            "{message}"
        );
        for (stride, dilation) in [(0, 1), (1, 0), (1, 3)] {
            let bad = ConvShape {
                stride,
                dilation,
                ..shape
            };
            let message = call(&bad, &input, &mut output, &epilogue, (0..3, 0..3));
            let named = format!("a 3x3 filter of stride {stride} and dilation {dilation} over a 5x5 padded input");
            assert!(message.contains(&named), "{message}");
        }
        for groups in [0, 2] {
            let grouped = ConvShape { groups, ..shape };
            let message = call(&grouped, &input, &mut output, &epilogue, (0..3, 0..3));
            let named = format!("2 channels to 3 filters in {groups} groups: the groups do not divide them");
            assert!(message.contains(&named), "{message}");
        }
        let message = call(&shape, &input[..49], &mut output, &epilogue, (0..3, 0..3));
        assert!(message.contains("the input holds 49 elements of the 50"), "{message}");
        let message = call(&shape, &input, &mut output[..26], &epilogue, (0..3, 0..3));
        assert!(message.contains("the output holds 26 elements of the 27"), "{message}");
        let message = call(&shape, &input, &mut output, &epilogue, (0..3, 2..4));
        assert!(message.contains("outside 3 filters of 3 rows"), "{message}");
        let short = ConvEpilogue {
            bias: Some(&bias[..2]),
            ..epilogue
        };
        let message = call(&shape, &input, &mut output, &short, (0..3, 0..3));
        assert!(message.contains("bias of 2 elements for 3 filters"), "{message}");
        let huge = ConvShape {
            channels: usize::MAX,
            ..shape
        };
        let message = call(&huge, &input, &mut output, &epilogue, (0..3, 0..3));
        assert!(message.contains("overflows"), "{message}");
        conv2d_tile(&shape, &input, &weights, &mut output, &epilogue, (0..3, 0..3)).unwrap();
        assert_eq!(output, vec![18.0; 27]);
    }
}
