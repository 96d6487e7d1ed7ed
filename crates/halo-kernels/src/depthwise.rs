//! Depthwise 2-D convolutions (one filter per channel: ONNX's `Conv` whose `group` is its
//! channel count), of any stride and dilation, over an input padded beforehand or padded here
//! with zeros ([`Padding`]), with the bias and activation fused.
//!
//! Padding here saves a pass over memory: each channel's plane is copied with its zeros into a
//! scratch plane in cache, where a pad before the kernel writes the whole padded tensor out and
//! the kernel reads it back (MobileNet-v2 spent about an eighth of its time in such pads).
//!
//! Why halo's own: IREE 3.13 compiles an NCHW depthwise convolution to scalar code
//! (iree-org/iree#10635), and halo's graph rewrite works around that by writing it as one shifted
//! product per tap, each a pass over the whole tensor, which IREE fuses only in part. Here a
//! channel's output is computed once, in cache: for each tap, one multiply-add of a contiguous
//! stretch of the input into the output. As in [`conv2d_tile`](crate::conv2d_tile), the output
//! is computed over the input's width (the columns past the output's are thrown away), so a tap
//! is a single shifted view of the plane; a stride of `s` first splits the plane into its
//! `s x s` phases, after which each tap is again a shifted view, of one phase.
//!
//! The multiply-adds are plain loops that the compiler vectorizes, built once per instruction
//! set ([`DepthwisePath`]). On AVX-512, strides 1 and 2 take [`avx512`] instead, which sums
//! every tap in registers: 1.3-2x the plain loops' rate (`examples/depthwise_rate`, 144x58x58
//! 3x3 26.5 -> 35.5 GFLOP/s, 384x16x16 16.3 -> 24.1; MobileNet-v2 7.7 -> 6.8 ms a call).

#[cfg(target_arch = "x86_64")]
mod avx512;

use crate::conv::{check_bias_and_tile, check_lengths};
use crate::{ConvEpilogue, ConvShape};
use halo_hal::{Error, Result};
use std::ops::Range;

/// The sizes of a depthwise convolution: `channels` filters of `kernel_height` x `kernel_width`,
/// one per channel of a `channels` x `padded_height` x `padded_width` input, output positions
/// `stride` input positions apart and taps `dilation` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepthwiseShape {
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
    /// Input rows and columns from one output position to the next (1 or more).
    pub stride: usize,
    /// Input rows and columns from one filter tap to the next (1 or more).
    pub dilation: usize,
    /// How much of the padded input's border is zeros the input does not hold: the input holds
    /// `padded_height - top - bottom` rows of `padded_width - left - right` columns.
    pub padding: Padding,
}

/// Rows of zeros above and below an input and columns left and right of it, which a kernel adds
/// itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Padding {
    /// Rows above.
    pub top: usize,
    /// Rows below.
    pub bottom: usize,
    /// Columns to the left.
    pub left: usize,
    /// Columns to the right.
    pub right: usize,
}

impl Padding {
    /// No padding: the input holds the whole padded extent.
    pub const NONE: Padding = Padding {
        top: 0,
        bottom: 0,
        left: 0,
        right: 0,
    };
}

impl DepthwiseShape {
    /// Rows and columns the input holds (the padded extent less the [`Padding`]).
    ///
    /// # Errors
    /// `InvalidArgument` when the padding is larger than the padded extent.
    pub fn stored_size(&self) -> Result<(usize, usize)> {
        let p = self.padding;
        let rows = p
            .top
            .checked_add(p.bottom)
            .and_then(|pad| self.padded_height.checked_sub(pad));
        let cols = p
            .left
            .checked_add(p.right)
            .and_then(|pad| self.padded_width.checked_sub(pad));
        rows.zip(cols).ok_or_else(|| {
            Error::invalid_argument(format!(
                "depthwise convolution padding {p:?} larger than its {}x{} padded input",
                self.padded_height, self.padded_width
            ))
        })
    }

    /// Output rows and columns.
    ///
    /// # Errors
    /// As [`ConvShape::output_size`].
    pub fn output_size(&self) -> Result<(usize, usize)> {
        self.per_channel().output_size()
    }

    /// One channel's convolution, whose sizes and phases are this one's.
    fn per_channel(&self) -> ConvShape {
        ConvShape {
            channels: 1,
            filters: 1,
            groups: 1,
            padded_height: self.padded_height,
            padded_width: self.padded_width,
            kernel_height: self.kernel_height,
            kernel_width: self.kernel_width,
            stride: self.stride,
            dilation: self.dilation,
        }
    }

    /// Elements of the input, the filters and the output, in that order (`None` on overflow or
    /// when the padding does not fit).
    pub(crate) fn lengths(&self) -> Option<[usize; 3]> {
        let (ho, wo) = self.output_size().ok()?;
        let (h, w) = self.stored_size().ok()?;
        let c = self.channels;
        Some([
            c.checked_mul(h)?.checked_mul(w)?,
            c.checked_mul(self.kernel_height)?.checked_mul(self.kernel_width)?,
            c.checked_mul(ho)?.checked_mul(wo)?,
        ])
    }
}

/// Which instruction set the multiply-adds are built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepthwisePath {
    /// AVX-512F with FMA (x86-64).
    Avx512,
    /// AVX2 with FMA (x86-64).
    Avx2,
    /// The target's baseline (SSE2 on x86-64, NEON on AArch64), multiplies and adds rounded
    /// separately.
    Plain,
}

impl DepthwisePath {
    /// Every path.
    pub const ALL: [DepthwisePath; 3] = [DepthwisePath::Avx512, DepthwisePath::Avx2, DepthwisePath::Plain];

    /// Whether this CPU runs the path.
    pub fn is_available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            DepthwisePath::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            DepthwisePath::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            DepthwisePath::Avx512 | DepthwisePath::Avx2 => false,
            DepthwisePath::Plain => true,
        }
    }

    /// The widest path this CPU runs.
    pub fn best() -> DepthwisePath {
        Self::ALL
            .into_iter()
            .find(|path| path.is_available())
            .unwrap_or(DepthwisePath::Plain)
    }
}

/// Output elements computed tap by tap at a time: 4 KiB, which stay in L1 while the taps are
/// added (`examples/depthwise_rate`, 144x56x56: 20 GFLOP/s over whole planes, more in stretches).
const STRETCH: usize = 1024;

thread_local! {
    /// Each thread's scratch: a channel's phases and its output over the phase width; it grows
    /// to the largest the thread has computed.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Channels `channels` and output rows `rows` of the depthwise convolution, on the calling
/// thread, by the [widest](DepthwisePath::best) path.
///
/// # Errors
/// As [`depthwise_tile_on`].
pub fn depthwise_tile(
    shape: &DepthwiseShape,
    input: &[f32],
    weights: &[f32],
    output: &mut [f32],
    epilogue: &ConvEpilogue<'_>,
    tile: (Range<usize>, Range<usize>),
) -> Result<()> {
    depthwise_tile_on(DepthwisePath::best(), shape, input, weights, output, epilogue, tile)
}

/// Channels `channels` and output rows `rows` of the depthwise convolution, on the calling
/// thread, by `path`.
///
/// `input` is `channels` planes of the [stored size](DepthwiseShape::stored_size); `weights` are
/// `[channels][kernel_height][kernel_width]`; `output` is `channels` planes of the output size,
/// of which only the tile is written; the bias has one element per channel.
///
/// # Errors
/// `InvalidArgument` naming what is wrong when a slice is shorter than the shape needs, the
/// padding is larger than the padded extent, the bias is not one element per channel, or the
/// tile lies outside the output; `ResourceExhausted` when
/// the tile's scratch cannot be allocated; `Unavailable` when this CPU does not run `path`.
pub fn depthwise_tile_on(
    path: DepthwisePath,
    shape: &DepthwiseShape,
    input: &[f32],
    weights: &[f32],
    output: &mut [f32],
    epilogue: &ConvEpilogue<'_>,
    (channels, rows): (Range<usize>, Range<usize>),
) -> Result<()> {
    if !path.is_available() {
        return Err(Error::unavailable(format!(
            "this CPU does not run the {path:?} depthwise convolution kernel"
        )));
    }
    let (ho, wo) = shape.output_size()?;
    shape.stored_size()?;
    let [input_len, weights_len, output_len] = shape
        .lengths()
        .ok_or_else(|| Error::invalid_argument(format!("depthwise convolution {shape:?} overflows")))?;
    let lengths = [
        ("input", input.len(), input_len),
        ("filters", weights.len(), weights_len),
        ("output", output.len(), output_len),
    ];
    check_lengths(|| format!("depthwise convolution {shape:?}"), lengths)?;
    let outputs = ("channels", shape.channels, ho);
    check_bias_and_tile("depthwise convolution", outputs, epilogue.bias, (&channels, &rows))?;
    if channels.is_empty() || rows.is_empty() {
        return Ok(());
    }
    let job = Job {
        shape,
        input,
        weights,
        epilogue,
        output_size: (ho, wo),
    };
    let registers = cfg!(target_arch = "x86_64") && path == DepthwisePath::Avx512 && shape.stride <= 2;
    let room_len = job.room_len();
    let scratch_len = if registers {
        room_len
    } else {
        room_len + job.phases_len() + job.wide_len(rows.len())
    };
    SCRATCH.with_borrow_mut(|scratch| {
        if scratch.len() < scratch_len {
            scratch.try_reserve_exact(scratch_len - scratch.len()).map_err(|_| {
                Error::resource_exhausted(format!(
                    "no memory for a depthwise convolution tile of {scratch_len} floats"
                ))
            })?;
            scratch.resize(scratch_len, 0.0);
        }
        let tile = (channels, rows);
        let (room, scratch) = scratch[..scratch_len].split_at_mut(room_len);
        match path {
            // SAFETY: `is_available` found AVX-512F on this CPU; the slices were checked above.
            #[cfg(target_arch = "x86_64")]
            DepthwisePath::Avx512 if registers => unsafe { job.tile_registers(output, room, tile) },
            // SAFETY: `is_available` found AVX-512F and FMA on this CPU.
            #[cfg(target_arch = "x86_64")]
            DepthwisePath::Avx512 => unsafe { job.tile_avx512(output, room, scratch, tile) },
            // SAFETY: `is_available` found AVX2 and FMA on this CPU.
            #[cfg(target_arch = "x86_64")]
            DepthwisePath::Avx2 => unsafe { job.tile_avx2(output, room, scratch, tile) },
            _ => job.tile::<false>(output, room, scratch, tile),
        }
        Ok(())
    })
}

/// One checked call: the slices hold what the shape needs.
struct Job<'a> {
    shape: &'a DepthwiseShape,
    input: &'a [f32],
    weights: &'a [f32],
    epilogue: &'a ConvEpilogue<'a>,
    output_size: (usize, usize),
}

impl Job<'_> {
    /// Elements of the room a padded channel plane is built in (none without padding).
    fn room_len(&self) -> usize {
        if self.shape.padding == Padding::NONE {
            0
        } else {
            self.shape.padded_height * self.shape.padded_width
        }
    }

    /// Channel `ch`'s padded plane: the input's own without padding, else a copy of it with its
    /// zeros, built in `room` (of [`Job::room_len`] elements).
    fn plane<'s>(&'s self, ch: usize, room: &'s mut [f32]) -> &'s [f32] {
        let s = self.shape;
        let (hp, wp) = (s.padded_height, s.padded_width);
        if s.padding == Padding::NONE {
            return &self.input[ch * hp * wp..][..hp * wp];
        }
        let Padding { top, left, right, .. } = s.padding;
        // The checks made the stored size exist.
        let (h, w) = s.stored_size().unwrap_or_default();
        let stored = &self.input[ch * h * w..][..h * w];
        let room = &mut room[..hp * wp];
        room[..top * wp].fill(0.0);
        for y in 0..h {
            let line = &mut room[(top + y) * wp..][..wp];
            line[..left].fill(0.0);
            line[left..left + w].copy_from_slice(&stored[y * w..][..w]);
            line[wp - right..].fill(0.0);
        }
        room[(top + h) * wp..].fill(0.0);
        room
    }

    /// Elements of one channel's phases (none for stride 1, whose plane is its only phase).
    fn phases_len(&self) -> usize {
        let (ph, pw) = self.shape.per_channel().phase_size();
        if self.shape.stride == 1 {
            0
        } else {
            self.shape.stride * self.shape.stride * ph * pw
        }
    }

    /// Elements of `rows` output rows over the phase width.
    fn wide_len(&self, rows: usize) -> usize {
        let (_, pw) = self.shape.per_channel().phase_size();
        (rows - 1) * pw + self.output_size.1
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    fn tile_avx512(
        &self,
        output: &mut [f32],
        room: &mut [f32],
        scratch: &mut [f32],
        tile: (Range<usize>, Range<usize>),
    ) {
        self.tile::<true>(output, room, scratch, tile);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn tile_avx2(&self, output: &mut [f32], room: &mut [f32], scratch: &mut [f32], tile: (Range<usize>, Range<usize>)) {
        self.tile::<true>(output, room, scratch, tile);
    }

    /// The tile, channel by channel; `FUSED` rounds each multiply-add once.
    #[inline(always)]
    fn tile<const FUSED: bool>(
        &self,
        output: &mut [f32],
        room: &mut [f32],
        scratch: &mut [f32],
        (channels, rows): (Range<usize>, Range<usize>),
    ) {
        let s = self.shape;
        let (wp, kh, kw) = (s.padded_width, s.kernel_height, s.kernel_width);
        let (ho, wo) = self.output_size;
        let (ph, pw) = s.per_channel().phase_size();
        let (phases, rest) = scratch.split_at_mut(self.phases_len());
        let wide = &mut rest[..self.wide_len(rows.len())];
        for ch in channels {
            let plane = self.plane(ch, room);
            let source: &[f32] = if s.stride == 1 {
                plane
            } else {
                split_phases(plane, wp, s.stride, (ph, pw), phases);
                phases
            };
            let bias = self.epilogue.bias.map_or(0.0, |bias| bias[ch]);
            let taps = &self.weights[ch * kh * kw..][..kh * kw];
            // A stretch of the output at a time, which stays in L1 across the taps.
            for (i, stretch) in wide.chunks_mut(STRETCH).enumerate() {
                stretch.fill(bias);
                for (tap, &weight) in taps.iter().enumerate() {
                    let (ry, rx) = ((tap / kw) * s.dilation, (tap % kw) * s.dilation);
                    let phase = (ry % s.stride) * s.stride + rx % s.stride;
                    let start = phase * ph * pw + (rows.start + ry / s.stride) * pw + rx / s.stride + i * STRETCH;
                    multiply_add::<FUSED>(stretch, &source[start..start + stretch.len()], weight);
                }
            }
            for (y, line) in rows.clone().zip(wide.chunks(pw)) {
                let out = &mut output[(ch * ho + y) * wo..][..wo];
                self.epilogue.activation.copy(&line[..wo], out);
            }
        }
    }
}

/// `plane` (`width` columns a row) split into its `stride x stride` phases of `ph` x `pw`, row
/// phase first, into `phases`; positions past the plane stay as they were (no output reads them).
#[inline(always)]
fn split_phases(plane: &[f32], width: usize, stride: usize, (ph, pw): (usize, usize), phases: &mut [f32]) {
    for (row, line) in plane.chunks_exact(width).enumerate() {
        let (a, y) = (row % stride, row / stride);
        let row_phases = &mut phases[a * stride * ph * pw..][..stride * ph * pw];
        if stride == 2 {
            // Two columns at a time, which the compiler turns into vector shuffles.
            let (even, odd) = row_phases.split_at_mut(ph * pw);
            let (even, odd) = (&mut even[y * pw..][..pw], &mut odd[y * pw..][..pw]);
            for ((pair, e), o) in line.chunks_exact(2).zip(even.iter_mut()).zip(odd.iter_mut()) {
                (*e, *o) = (pair[0], pair[1]);
            }
            if width % 2 == 1 {
                even[width / 2] = line[width - 1];
            }
            continue;
        }
        for (x, group) in line.chunks(stride).enumerate() {
            for (b, &value) in group.iter().enumerate() {
                row_phases[(b * ph + y) * pw + x] = value;
            }
        }
    }
}

/// `out += weight * from`, element by element; `FUSED` rounds once (FMA).
#[inline(always)]
fn multiply_add<const FUSED: bool>(out: &mut [f32], from: &[f32], weight: f32) {
    for (o, &v) in out.iter_mut().zip(from) {
        *o = if FUSED { v.mul_add(weight, *o) } else { *o + v * weight };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_values::{any_activation, values};
    use crate::Activation;
    use proptest::prelude::*;

    /// The depthwise convolution by its definition, in f64, `[channels][rows][cols]`.
    fn reference(
        shape: &DepthwiseShape,
        input: &[f32],
        weights: &[f32],
        bias: Option<&[f32]>,
        activation: Activation,
    ) -> Vec<f64> {
        let (ho, wo) = shape.output_size().unwrap();
        let (kh, kw) = (shape.kernel_height, shape.kernel_width);
        let (s, d) = (shape.stride, shape.dilation);
        let (h, w) = shape.stored_size().unwrap();
        let Padding { top, left, .. } = shape.padding;
        // The padded input's element: zero outside the stored part.
        let at = |ch: usize, y: usize, x: usize| match (y.checked_sub(top), x.checked_sub(left)) {
            (Some(y), Some(x)) if y < h && x < w => input[(ch * h + y) * w + x],
            _ => 0.0,
        };
        let mut out = Vec::new();
        for ch in 0..shape.channels {
            for y in 0..ho {
                for x in 0..wo {
                    let mut sum = bias.map_or(0.0, |bias| f64::from(bias[ch]));
                    for dy in 0..kh {
                        for dx in 0..kw {
                            let w = weights[(ch * kh + dy) * kw + dx];
                            let v = at(ch, s * y + d * dy, s * x + d * dx);
                            sum += f64::from(w) * f64::from(v);
                        }
                    }
                    out.push(activation.reference(sum));
                }
            }
        }
        out
    }

    /// No padding half the time, else up to 3 rows or columns on each side that fit.
    fn padding_within(height: usize, width: usize) -> impl Strategy<Value = Padding> {
        prop_oneof![
            Just(Padding::NONE),
            (0usize..4, 0usize..4, 0usize..4, 0usize..4).prop_map(move |(top, bottom, left, right)| {
                let (top, left) = (top.min(height / 2), left.min(width / 2));
                Padding {
                    top,
                    bottom: bottom.min(height - top),
                    left,
                    right: right.min(width - left),
                }
            }),
        ]
    }

    fn shape_and_tiles() -> impl Strategy<Value = (DepthwiseShape, usize, usize)> {
        (
            0usize..20,
            1usize..6,
            1usize..6,
            1usize..4,
            1usize..3,
            0usize..9,
            0usize..40,
        )
            .prop_flat_map(
                |(channels, kernel_height, kernel_width, stride, dilation, extra_h, extra_w)| {
                    let (padded_height, padded_width) = (
                        (kernel_height - 1) * dilation + 1 + extra_h,
                        (kernel_width - 1) * dilation + 1 + extra_w,
                    );
                    let shape = DepthwiseShape {
                        channels,
                        padded_height,
                        padded_width,
                        kernel_height,
                        kernel_width,
                        stride,
                        dilation,
                        padding: Padding::NONE,
                    };
                    let padding = padding_within(padded_height, padded_width);
                    (Just(shape), padding, 1..=channels.max(1), 1..=extra_h / stride + 1)
                },
            )
            .prop_map(|(shape, padding, channels, rows)| (DepthwiseShape { padding, ..shape }, channels, rows))
    }

    /// MobileNet's and EfficientNet's filters (3x3 and 5x5, dilation 1, stride 1 or 2), which
    /// the general strategy draws rarely.
    fn square_shape_and_tiles() -> impl Strategy<Value = (DepthwiseShape, usize, usize)> {
        (
            1usize..12,
            prop_oneof![Just(3usize), Just(5)],
            1usize..3,
            0usize..24,
            0usize..80,
        )
            .prop_flat_map(|(channels, kernel, stride, extra_h, extra_w)| {
                let shape = DepthwiseShape {
                    channels,
                    padded_height: kernel + extra_h,
                    padded_width: kernel + extra_w,
                    kernel_height: kernel,
                    kernel_width: kernel,
                    stride,
                    dilation: 1,
                    padding: Padding::NONE,
                };
                let padding = padding_within(kernel + extra_h, kernel + extra_w);
                (Just(shape), padding, 1..=channels, 1..=extra_h / stride + 1)
            })
            .prop_map(|(shape, padding, channels, rows)| (DepthwiseShape { padding, ..shape }, channels, rows))
    }

    proptest! {
        /// Tiles of every size, on every path, cover the output exactly and give the
        /// definition's values.
        #[test]
        fn tiled_depthwise_convolutions_match_the_definition(
            (shape, channels_per_tile, rows_per_tile) in prop_oneof![shape_and_tiles(), square_shape_and_tiles()],
            bias in any::<bool>(), activation in any_activation(), seed in any::<u64>(),
        ) {
            let [input_len, weights_len, output_len] = shape.lengths().unwrap();
            // Scaled so that ReLU6's upper bound is crossed too.
            let scaled = |len, seed| values(len, seed).into_iter().map(|v| 4.0 * v).collect::<Vec<f32>>();
            let (input, weights, bias_data) =
                (scaled(input_len, seed), scaled(weights_len, seed ^ 1), scaled(shape.channels, seed ^ 2));
            let epilogue = ConvEpilogue { bias: bias.then_some(&bias_data[..]), activation };
            let expected = reference(&shape, &input, &weights, epilogue.bias, activation);
            let (ho, _) = shape.output_size().unwrap();
            for path in DepthwisePath::ALL {
                if !path.is_available() {
                    eprintln!("skipped: the {path:?} depthwise path, which this CPU does not run");
                    continue;
                }
                let sentinel = 12345.0f32;
                let mut output = vec![sentinel; output_len + 3];
                for ch in (0..shape.channels).step_by(channels_per_tile) {
                    for y in (0..ho).step_by(rows_per_tile) {
                        let tile = (ch..shape.channels.min(ch + channels_per_tile), y..ho.min(y + rows_per_tile));
                        depthwise_tile_on(path, &shape, &input, &weights, &mut output, &epilogue, tile).unwrap();
                    }
                }
                for (i, (&got, want)) in output.iter().zip(&expected).enumerate() {
                    let tolerance = 1e-5 * (16 * shape.kernel_height * shape.kernel_width) as f64;
                    prop_assert!((f64::from(got) - want).abs() <= tolerance, "{path:?} {shape:?} [{i}]: {got} against {want}");
                }
                prop_assert_eq!(&output[output_len..], &[sentinel; 3][..], "{:?}: written past the output", path);
            }
        }
    }

    #[test]
    fn shapes_slices_and_tiles_that_do_not_fit_are_errors_naming_them() {
        let shape = DepthwiseShape {
            channels: 2,
            padded_height: 4,
            padded_width: 4,
            kernel_height: 3,
            kernel_width: 3,
            stride: 1,
            dilation: 1,
            padding: Padding::NONE,
        };
        let (input, weights, bias) = (vec![1.0; 32], vec![1.0; 18], [0.5, -20.0]);
        let mut output = vec![0.0; 8];
        let epilogue = ConvEpilogue {
            bias: Some(&bias),
            activation: Activation::Relu6,
        };
        let call = |shape: &DepthwiseShape, input: &[f32], output: &mut [f32], epilogue, tile| {
            depthwise_tile(shape, input, &weights, output, epilogue, tile)
                .unwrap_err()
                .to_string()
        };
        let wide = DepthwiseShape {
            kernel_width: 5,
            ..shape
        };
        let message = call(&wide, &input, &mut output, &epilogue, (0..2, 0..2));
        assert!(
            message.contains("a 3x5 filter of stride 1 and dilation 1 over a 4x4 padded input"),
            "{message}"
        );
        let message = call(&shape, &input[..31], &mut output, &epilogue, (0..2, 0..2));
        assert!(message.contains("the input holds 31 elements of the 32"), "{message}");
        let message = call(&shape, &input, &mut output[..7], &epilogue, (0..2, 0..2));
        assert!(message.contains("the output holds 7 elements of the 8"), "{message}");
        let message = call(&shape, &input, &mut output, &epilogue, (1..3, 0..2));
        assert!(message.contains("outside 2 channels of 2 rows"), "{message}");
        let short = ConvEpilogue {
            bias: Some(&bias[..1]),
            ..epilogue
        };
        let message = call(&shape, &input, &mut output, &short, (0..2, 0..2));
        assert!(message.contains("bias of 1 elements for 2 channels"), "{message}");
        let huge = DepthwiseShape {
            channels: usize::MAX,
            ..shape
        };
        let message = call(&huge, &input, &mut output, &epilogue, (0..2, 0..2));
        assert!(message.contains("overflows"), "{message}");
        let too_much = DepthwiseShape {
            padding: Padding {
                left: 3,
                right: 2,
                ..Padding::NONE
            },
            ..shape
        };
        let message = call(&too_much, &input, &mut output, &epilogue, (0..2, 0..2));
        assert!(message.contains("larger than its 4x4 padded input"), "{message}");
        depthwise_tile(&shape, &input, &weights, &mut output, &epilogue, (0..2, 0..2)).unwrap();
        // 9 + 0.5 clipped to 6; 9 - 20 clipped to 0.
        assert_eq!(output, [6.0, 6.0, 6.0, 6.0, 0.0, 0.0, 0.0, 0.0]);
        // A 2x2 input padded by one all round: each output sees 4 ones of its 9 taps.
        let padded = DepthwiseShape {
            padding: Padding {
                top: 1,
                bottom: 1,
                left: 1,
                right: 1,
            },
            ..shape
        };
        depthwise_tile(&padded, &input[..8], &weights, &mut output, &epilogue, (0..2, 0..2)).unwrap();
        assert_eq!(output, [4.5, 4.5, 4.5, 4.5, 0.0, 0.0, 0.0, 0.0]);
    }
}
