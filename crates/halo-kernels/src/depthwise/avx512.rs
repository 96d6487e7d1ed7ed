//! The AVX-512 path for strides 1 and 2: each vector of 16 output columns is summed over every
//! tap in registers, starting from the bias, and stored once with the activation applied. The
//! plain loops of the parent module instead add each tap to a stretch of the output in memory
//! (a load, an FMA and a store per tap and vector) and, for stride 2, first copy the plane into
//! its phases. Here a stride-2 tap reads 32 consecutive input columns and keeps the even ones
//! (one permute). A block of output rows is summed at once, so that its sums are independent
//! chains of FMAs rather than one chain waiting on each FMA's latency.

use super::Job;
use crate::activation::avx512::activated;
use std::arch::x86_64::{
    __m512, __m512i, __mmask16, _mm512_fmadd_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_permutex2var_ps,
    _mm512_set1_ps, _mm512_setr_epi32, _mm512_storeu_ps,
};
use std::ops::Range;

/// The first `count` lanes (0 to 16).
fn lanes(count: usize) -> __mmask16 {
    match count {
        0 => 0,
        16.. => 0xffff,
        count => (1u16 << count) - 1,
    }
}

/// Where one block of output is computed: up to `R` output rows from `row` on, and up to `16 V`
/// columns from `column` on, of one channel.
struct Block<'a> {
    /// The channel's input plane.
    plane: &'a [f32],
    /// The channel's taps, `[kernel_height][kernel_width]`.
    taps: &'a [f32],
    bias: f32,
    /// First output row, and how many rows from it the block holds.
    row: usize,
    rows: usize,
    /// First output column, and how many columns from it the block holds.
    column: usize,
    count: usize,
}

/// Vectors of a run over the padded width summed at once ([`Job::flat_rows`]): 8 independent
/// chains of FMAs, as a block of rows has.
const FLAT_VECTORS: usize = 8;

/// Output rows of one block with as many vectors a row: enough that the block's sums are 8 to 16
/// independent chains of FMAs (one chain per row would wait on each FMA's latency), and few
/// enough that a small plane's last block does not compute many rows past its end.
const fn block_rows(vectors: usize) -> usize {
    if vectors >= 4 {
        4
    } else {
        8
    }
}

impl Job<'_> {
    /// The tile by this path: the caller checked the slices and that the stride is 1 or 2.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_registers(
        &self,
        output: &mut [f32],
        room: &mut [f32],
        (channels, rows): (Range<usize>, Range<usize>),
    ) {
        let s = self.shape;
        let (kh, kw) = (s.kernel_height, s.kernel_width);
        let (ho, wo) = self.output_size;
        // Vectors a row: the fewest that hold a row, at most 4.
        let vectors = match wo.div_ceil(16) {
            1 => 1,
            2 => 2,
            _ => 4,
        };
        let block_height = block_rows(vectors);
        let flat = s.stride == 1 && s.padded_width < 16;
        for ch in channels {
            let plane = self.plane(ch, room);
            let taps = &self.weights[ch * kh * kw..][..kh * kw];
            let bias = self.epilogue.bias.map_or(0.0, |bias| bias[ch]);
            let out = &mut output[ch * ho * wo..][..ho * wo];
            if flat {
                // SAFETY: the CPU has AVX-512F (the contract); the stride is 1.
                unsafe { self.flat_rows(plane, taps, bias, out, rows.clone()) };
                continue;
            }
            for row in rows.clone().step_by(block_height) {
                let mut column = 0;
                while column < wo {
                    let count = (wo - column).min(16 * vectors);
                    let block = Block {
                        plane,
                        taps,
                        bias,
                        row,
                        rows: block_height.min(rows.end - row),
                        column,
                        count,
                    };
                    // SAFETY: the CPU has AVX-512F (the contract); `block` reads only inside
                    // `plane` and writes only inside `out`.
                    unsafe {
                        match (s.stride, vectors) {
                            (1, 1) => self.block::<1, 1, { block_rows(1) }>(&block, out),
                            (1, 2) => self.block::<1, 2, { block_rows(2) }>(&block, out),
                            (1, _) => self.block::<1, 4, { block_rows(4) }>(&block, out),
                            (_, 1) => self.block::<2, 1, { block_rows(1) }>(&block, out),
                            (_, 2) => self.block::<2, 2, { block_rows(2) }>(&block, out),
                            (_, _) => self.block::<2, 4, { block_rows(4) }>(&block, out),
                        }
                    }
                    column += count;
                }
            }
        }
    }

    /// Output rows `rows` of one channel at stride 1, over a plane narrower than a vector
    /// (`padded_width` < 16): the outputs are taken as one run over the padded width (row `y`,
    /// column `x` at `y * padded_width + x`), so that a vector holds parts of several rows where
    /// one vector a row would leave most of its lanes empty; the columns past the output's are
    /// computed and dropped. A 7x7 output with 5x5 taps fills 73 of 80 lanes this way, against 49
    /// of 128 a row at a time (`examples/depthwise_rate`, one core: 1152x11x11 5x5 18.0 -> 23.0
    /// GFLOP/s, 960x9x9 3x3 12.4 -> 14.8; EfficientNet-B0 as a whole, within this machine's noise).
    ///
    /// # Safety
    /// The CPU has AVX-512F; the stride is 1.
    #[target_feature(enable = "avx512f")]
    unsafe fn flat_rows(&self, plane: &[f32], taps: &[f32], bias: f32, out: &mut [f32], rows: Range<usize>) {
        let wp = self.shape.padded_width;
        let wo = self.output_size.1;
        // Positions of the run, from the first row's first output on.
        let len = (rows.len() - 1) * wp + wo;
        let mut done = 0;
        while done < len {
            let count = (len - done).min(16 * FLAT_VECTORS);
            let first = rows.start * wp + done;
            // SAFETY: forwarded from the caller (AVX-512F, stride 1); `done + count <= len`.
            let sums = unsafe {
                match count.div_ceil(16) {
                    1 => self.flat_sums::<1>(plane, taps, bias, first, count),
                    2 => self.flat_sums::<2>(plane, taps, bias, first, count),
                    3 => self.flat_sums::<3>(plane, taps, bias, first, count),
                    4 => self.flat_sums::<4>(plane, taps, bias, first, count),
                    5 => self.flat_sums::<5>(plane, taps, bias, first, count),
                    6 => self.flat_sums::<6>(plane, taps, bias, first, count),
                    7 => self.flat_sums::<7>(plane, taps, bias, first, count),
                    _ => self.flat_sums::<8>(plane, taps, bias, first, count),
                }
            };
            // The run's rows that meet these positions, each its output columns only.
            let mut y = done / wp;
            while y * wp < done + count {
                let (from, to) = (done.max(y * wp), (done + count).min(y * wp + wo));
                if from < to {
                    let line = &mut out[(rows.start + y) * wo..][..wo];
                    line[from - y * wp..to - y * wp].copy_from_slice(&sums[from - done..to - done]);
                }
                y += 1;
            }
            done += count;
        }
    }

    /// `count` (at most `16 V`) activated sums of the run from plane position `first` on, in the
    /// first `count` elements of the result.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the stride is 1 and the positions lie in a run of
    /// [`Job::flat_rows`] (so every tap of each lies inside the plane).
    #[target_feature(enable = "avx512f")]
    unsafe fn flat_sums<const V: usize>(
        &self,
        plane: &[f32],
        taps: &[f32],
        bias: f32,
        first: usize,
        count: usize,
    ) -> [f32; 16 * FLAT_VECTORS] {
        let shape = self.shape;
        let (wp, kw, d) = (shape.padded_width, shape.kernel_width, shape.dilation);
        let masks: [__mmask16; V] = std::array::from_fn(|v| lanes(count.saturating_sub(16 * v).min(16)));
        let mut sums = [_mm512_set1_ps(bias); V];
        let start = plane.as_ptr().wrapping_add(first);
        for (tap, &weight) in taps.iter().enumerate() {
            let offset = (tap / kw) * d * wp + (tap % kw) * d;
            let weight = _mm512_set1_ps(weight);
            for (v, sum) in sums.iter_mut().enumerate() {
                // SAFETY: lane i reads position first + 16v + i + offset, a tap of a position of
                // the run; no position of the run lies past its last output, whose last tap (at
                // stride 1) is the plane's last element. Lanes at or past `count` are masked
                // out and not read.
                let inputs = unsafe { _mm512_maskz_loadu_ps(masks[v], start.wrapping_add(16 * v + offset)) };
                *sum = _mm512_fmadd_ps(weight, inputs, *sum);
            }
        }
        let mut values = [0f32; 16 * FLAT_VECTORS];
        for (v, sum) in sums.into_iter().enumerate() {
            // SAFETY: `values` holds 16 FLAT_VECTORS >= 16 V floats.
            unsafe {
                _mm512_storeu_ps(
                    values.as_mut_ptr().add(16 * v),
                    activated(self.epilogue.activation, sum),
                )
            };
        }
        values
    }

    /// The block's outputs in `out` (the channel's output plane), for stride `S`, with `V`
    /// vectors a row and at most `R` rows.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn block<const S: usize, const V: usize, const R: usize>(&self, block: &Block<'_>, out: &mut [f32]) {
        let shape = self.shape;
        let (wp, kw, d) = (shape.padded_width, shape.kernel_width, shape.dilation);
        let wo = self.output_size.1;
        // Output lanes of each vector, and for stride 2 the input positions of its two loads:
        // lane i reads position 2i, so 2 * lanes - 1 positions (the odd ones between are read and
        // dropped, and lie inside the row as they come before the last one used).
        let counts: [usize; V] = std::array::from_fn(|v| block.count.saturating_sub(16 * v).min(16));
        let masks: [__mmask16; V] = std::array::from_fn(|v| lanes(counts[v]));
        let spans: [usize; V] = std::array::from_fn(|v| (2 * counts[v]).saturating_sub(1));
        let low: [__mmask16; V] = std::array::from_fn(|v| lanes(spans[v].min(16)));
        let high: [__mmask16; V] = std::array::from_fn(|v| lanes(spans[v].saturating_sub(16)));
        let even: __m512i = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let mut sums: [[__m512; V]; R] = [[_mm512_set1_ps(block.bias); V]; R];
        // Each row's first input, at its first tap; a row past the block's repeats its last (and
        // is not stored), so that all R rows are summed and the sums stay in registers.
        let first = block.plane.as_ptr().wrapping_add(block.column * S);
        let starts: [*const f32; R] =
            std::array::from_fn(|j| first.wrapping_add((block.row + j.min(block.rows - 1)) * S * wp));
        for (tap, &weight) in block.taps.iter().enumerate() {
            let (dy, dx) = (tap / kw, tap % kw);
            let weight = _mm512_set1_ps(weight);
            let offset = dy * d * wp + dx * d;
            for (start, row_sums) in starts.iter().zip(sums.iter_mut()) {
                let start = start.wrapping_add(offset);
                for (v, sum) in row_sums.iter_mut().enumerate() {
                    let inputs = if S == 1 {
                        // SAFETY: lane i < counts[v] reads column column + 16v + i + dx d of
                        // input row (row + j) + dy d, inside the plane as the output's last
                        // column's last tap is; masked-out lanes are not read.
                        unsafe { _mm512_maskz_loadu_ps(masks[v], start.wrapping_add(16 * v)) }
                    } else {
                        // SAFETY: positions below spans[v] from 2 (column + 16v) + dx d of input
                        // row 2 (row + j) + dy d lie inside that row, the last of them being the
                        // last used column's; masked-out lanes are not read.
                        let (first, second) = unsafe {
                            (
                                _mm512_maskz_loadu_ps(low[v], start.wrapping_add(32 * v)),
                                _mm512_maskz_loadu_ps(high[v], start.wrapping_add(32 * v + 16)),
                            )
                        };
                        _mm512_permutex2var_ps(first, even, second)
                    };
                    *sum = _mm512_fmadd_ps(weight, inputs, *sum);
                }
            }
        }
        for (j, row_sums) in sums.into_iter().enumerate().take(block.rows) {
            let line = &mut out[(block.row + j) * wo..][..wo];
            let start = line.as_mut_ptr().wrapping_add(block.column);
            for (v, sum) in row_sums.into_iter().enumerate() {
                let value = activated(self.epilogue.activation, sum);
                // SAFETY: lanes below counts[v] are columns column + 16v + i < wo of `line`;
                // masked-out lanes are not written.
                unsafe { _mm512_mask_storeu_ps(start.wrapping_add(16 * v), masks[v], value) };
            }
        }
    }
}
