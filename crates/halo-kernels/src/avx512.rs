//! `c += a·b` with AVX-512, for x86-64 CPUs that have it.
//!
//! Why not the `gemm` crate here: on stable Rust it has no AVX-512 code (its AVX-512 kernels need
//! its `nightly` feature), so on this project's AVX-512 machine it stops at the AVX2 rate, about
//! 105-110 GFLOP/s on one core. This kernel uses the full 512-bit FMA width.
//!
//! The shape of the work: each micro tile is [`MR`] rows by [`NR`] columns of `c`, held in 24 of
//! the 32 vector registers while a [`KC`]-long stretch of the inner dimension streams through; a
//! broadcast of one `a` element feeds two FMAs. Row panels of `a` are read in place and stay in
//! L1 while they pass over every strip of [`NR`] columns of `b`. A large product first copies a
//! [`KC`] x [`NC`] block of `b` into contiguous, zero-padded strips ([`packs_b`]); a small one,
//! such as a workgroup's tile, reads `b` in place. Partial tiles use masked loads and stores:
//! nothing outside the views is touched.
//!
//! Measured with `examples/matmul_rate` (one core):
//! - the micro tile alone, its operands in L1: 185-198 GFLOP/s, of this machine's 221 (an FMA
//!   loop on registers);
//! - ResNet-50's 1x1 convolutions and ViT-S's projections, operands in cache: 115-165 GFLOP/s
//!   against `gemm`'s 80-105;
//! - the same with operands in memory (as a workgroup inside a model reads them): 50-100,
//!   `gemm` 40-80. Inside ResNet-50 the kernel's tiles ran at about 83 GFLOP/s a worker, no
//!   faster than IREE's code: what is left is memory traffic, not arithmetic.
//!
//! Tried and dropped: packing `a` too (49-column products fell from about 110 to 72 GFLOP/s),
//! `KC` of 128 or 384 and prefetching 24 or 64 rows ahead (within the noise).

use crate::matrix::{Matrix, MatrixMut};
use std::arch::x86_64::{
    __m512, __mmask16, _mm512_fmadd_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_set1_ps, _mm_prefetch,
    _MM_HINT_T0,
};

/// Rows of `c` per micro tile.
const MR: usize = 12;
/// Columns of `c` per micro tile: two vectors of 16.
const NR: usize = 32;
/// Length of the inner-dimension stretch one micro tile accumulates between loads of `c`.
const KC: usize = 256;
/// How many rows of `b` ahead of the one being multiplied are fetched into L1.
const PREFETCH_ROWS: usize = 8;
/// Columns of `b` packed at a time: [`KC`] x [`NC`] floats (1 MiB) stay in L2 while every row
/// panel of `a` passes over them.
const NC: usize = 1024;

/// Whether to pack `b` for a product of `m` x `n`: the copy pays only when many row panels
/// reuse it, or when `b`'s rows are so wide that reading strips of them in place scatters over
/// many pages. Measured (`examples/matmul_rate`, GFLOP/s in place against packed): 48x256x576
/// 166 / 126, 96x256x576 149 / 131, 197x1152x384 92 / 129, 1024x196x256 127 / 135.
fn packs_b(m: usize, n: usize) -> bool {
    m >= 192 || (m >= 96 && n > 256)
}

thread_local! {
    /// Each thread's packed block of `b`: fixed-size, allocated on the thread's first call.
    static PACKED_B: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether this CPU runs the kernel.
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// `c += a·b` when [`available`]; returns whether it ran. The views' sizes agree (`a` is
/// `m`x`k`, `b` `k`x`n`, `c` `m`x`n`).
pub(crate) fn accumulate(a: &Matrix<'_>, b: &Matrix<'_>, c: &mut MatrixMut<'_>) -> bool {
    if !available() {
        return false;
    }
    debug_assert!(b.rows == a.cols && c.rows == a.rows && c.cols == b.cols);
    // SAFETY: the CPU has AVX-512F (checked above), which is all the function's code needs.
    unsafe { accumulate_blocks(a, b, c) };
    true
}

/// One micro tile's operands, as addresses: the views' checks made every element of the tile
/// that [`micro_tile`] touches exist.
struct Tile {
    /// `a`'s element at the tile's first row and first inner index.
    a: *const f32,
    lda: usize,
    /// `b`'s element at the tile's first inner index and first column: in `b` itself, or in a
    /// packed strip of `kc` rows of [`NR`] floats.
    b: *const f32,
    /// Elements between rows of `b` ([`NR`] when packed).
    ldb: usize,
    /// `c`'s element at the tile's first row and column.
    c: *mut f32,
    ldc: usize,
    /// Inner-dimension length, at least 1.
    kc: usize,
    /// Which of the two 16-column halves' lanes are inside `c`.
    masks: [__mmask16; 2],
}

/// Lane masks for a tile of `cols` (1..=32) columns.
fn column_masks(cols: usize) -> [__mmask16; 2] {
    let lanes = |count: usize| -> __mmask16 {
        match count {
            0 => 0,
            16.. => 0xffff,
            count => (1u16 << count) - 1,
        }
    };
    [lanes(cols), lanes(cols.saturating_sub(16))]
}

/// Copies `b[p0..p0+kc][j0..j0+nc]` into `packed` as strips of [`NR`] columns, each `kc` rows
/// of [`NR`] floats, zero-padded past the last column. It walks `b` a row at a time, so its reads
/// are sequential, which is what lets the copy run at memory speed when `b` is not in cache.
#[target_feature(enable = "avx512f")]
fn pack_b(b: &Matrix<'_>, (p0, kc): (usize, usize), (j0, nc): (usize, usize), packed: &mut [f32]) {
    for p in 0..kc {
        let start = (p0 + p) * b.row_stride + j0;
        let row = &b.data[start..start + nc];
        if p + PREFETCH_ROWS < kc {
            let ahead = b.data.as_ptr().wrapping_add(start + PREFETCH_ROWS * b.row_stride);
            (0..nc)
                .step_by(16)
                .for_each(|j| _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(j).cast()));
        }
        for (s, source) in row.chunks(NR).enumerate() {
            let packed_row = &mut packed[(s * kc + p) * NR..][..NR];
            if source.len() == NR {
                // A copy of a length known here compiles to two vector moves, not a call.
                packed_row.copy_from_slice(&source[..NR]);
            } else {
                packed_row[..source.len()].copy_from_slice(source);
                packed_row[source.len()..].fill(0.0);
            }
        }
    }
}

#[target_feature(enable = "avx512f")]
fn accumulate_blocks(a: &Matrix<'_>, b: &Matrix<'_>, c: &mut MatrixMut<'_>) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let pack = packs_b(m, n);
    PACKED_B.with_borrow_mut(|packed| {
        if pack {
            packed.resize(KC * NC, 0.0);
        }
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            for j0 in (0..n).step_by(NC) {
                let nc = NC.min(n - j0);
                if pack {
                    pack_b(b, (p0, kc), (j0, nc), packed);
                }
                for i in (0..m).step_by(MR) {
                    for (s, j) in (j0..j0 + nc).step_by(NR).enumerate() {
                        let (b_tile, ldb) = if pack {
                            (packed[s * kc * NR..].as_ptr(), NR)
                        } else {
                            (b.data.as_ptr().wrapping_add(p0 * b.row_stride + j), b.row_stride)
                        };
                        let tile = Tile {
                            a: a.data.as_ptr().wrapping_add(i * a.row_stride + p0),
                            lda: a.row_stride,
                            b: b_tile,
                            ldb,
                            c: c.data.as_mut_ptr().wrapping_add(i * c.row_stride + j),
                            ldc: c.row_stride,
                            kc,
                            masks: column_masks(NR.min(n - j)),
                        };
                        // SAFETY: rows i..min(i+MR, m) and inner indices p0..p0+kc lie inside
                        // `a`, the masked columns j.. of those inner indices inside `b` (or
                        // strip `s`, which holds kc x NR floats), and of those rows inside `c`
                        // (the views' extents were checked against their slices); `c` is
                        // borrowed mutably, so nothing else reads or writes it.
                        unsafe { micro_tile_of_rows(m - i, &tile) };
                    }
                }
            }
        }
    });
}

/// [`micro_tile`] for `rows` (at most [`MR`]) rows.
///
/// # Safety
/// As [`micro_tile`].
#[target_feature(enable = "avx512f")]
unsafe fn micro_tile_of_rows(rows: usize, tile: &Tile) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match rows.min(MR) {
            12 => micro_tile::<12>(tile),
            11 => micro_tile::<11>(tile),
            10 => micro_tile::<10>(tile),
            9 => micro_tile::<9>(tile),
            8 => micro_tile::<8>(tile),
            7 => micro_tile::<7>(tile),
            6 => micro_tile::<6>(tile),
            5 => micro_tile::<5>(tile),
            4 => micro_tile::<4>(tile),
            3 => micro_tile::<3>(tile),
            2 => micro_tile::<2>(tile),
            _ => micro_tile::<1>(tile),
        }
    }
}

/// `c[0..R][masked columns] += a[0..R][0..kc] · b[0..kc][masked columns]`.
///
/// # Safety
/// For every row `i < R`, inner index `p < kc` and masked-in column `j`: `a + i*lda + p`,
/// `b + p*ldb + j` and `c + i*ldc + j` are valid, the last for writes that nothing else sees
/// during the call.
#[target_feature(enable = "avx512f")]
unsafe fn micro_tile<const R: usize>(tile: &Tile) {
    let [low, high] = tile.masks;
    let c_row = |i: usize| tile.c.wrapping_add(i * tile.ldc);
    let a_rows: [*const f32; R] = std::array::from_fn(|i| tile.a.wrapping_add(i * tile.lda));
    let mut acc: [[__m512; 2]; R] = std::array::from_fn(|i| {
        // SAFETY: row i's masked-in columns of `c` are valid (the contract); masked-out lanes
        // are never read.
        unsafe {
            [
                _mm512_maskz_loadu_ps(low, c_row(i)),
                _mm512_maskz_loadu_ps(high, c_row(i).wrapping_add(16)),
            ]
        }
    });
    for p in 0..tile.kc {
        let b_row = tile.b.wrapping_add(p * tile.ldb);
        // A hint only: it never faults, wherever it points.
        _mm_prefetch::<_MM_HINT_T0>(b_row.wrapping_add(PREFETCH_ROWS * tile.ldb).cast());
        _mm_prefetch::<_MM_HINT_T0>(b_row.wrapping_add(PREFETCH_ROWS * tile.ldb + 16).cast());
        // SAFETY: row p < kc of `b` is valid in its masked-in lanes (the contract).
        let (b_low, b_high) = unsafe {
            (
                _mm512_maskz_loadu_ps(low, b_row),
                _mm512_maskz_loadu_ps(high, b_row.wrapping_add(16)),
            )
        };
        for (i, [c_low, c_high]) in acc.iter_mut().enumerate() {
            // SAFETY: a[i][p] is valid for i < R and p < kc (the contract).
            let a = _mm512_set1_ps(unsafe { *a_rows[i].wrapping_add(p) });
            *c_low = _mm512_fmadd_ps(a, b_low, *c_low);
            *c_high = _mm512_fmadd_ps(a, b_high, *c_high);
        }
    }
    for (i, [c_low, c_high]) in acc.into_iter().enumerate() {
        // SAFETY: as for the loads of `c`; masked-out lanes are never written.
        unsafe {
            _mm512_mask_storeu_ps(c_row(i), low, c_low);
            _mm512_mask_storeu_ps(c_row(i).wrapping_add(16), high, c_high);
        }
    }
}
