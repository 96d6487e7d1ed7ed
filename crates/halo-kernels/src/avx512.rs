//! `c += a·b` with AVX-512, for x86-64 CPUs that have it.
//!
//! Why not the `gemm` crate here: on stable Rust it has no AVX-512 code (its AVX-512 kernels need
//! its `nightly` feature), so on this project's AVX-512 machine it stops at the AVX2 rate, about
//! 105-110 GFLOP/s on one core. This kernel uses the full 512-bit FMA width.
//!
//! The shape of the work: each micro tile ([`Shape`]: 12 x 32 or 8 x 48) of `c` is held in 24
//! of the 32 vector registers while the inner dimension streams through; a broadcast of one `a`
//! element feeds two or three FMAs. A micro tile may add up several products ([`Terms`]: a
//! convolution's taps) before it stores `c` once. Its sums start from the bias (or zeros) and
//! the residual, and get the activation before that store, so `c` is never read first nor passed
//! over again (MobileNet-v2 went from 7.9 to 7.5 ms a call on 2 cores, its 1x1 convolutions
//! having 16-96 input channels to sum). Row panels of `a` are read in place and stay in
//! L1 while they pass over every strip of `b`. A large product first copies a [`KC`] x [`NC`]
//! block of `b` into contiguous, zero-padded strips ([`packs_b`]); a small one, such as a
//! workgroup's tile, reads `b` in place. Partial tiles use masked loads and stores: nothing
//! outside the views is touched.
//!
//! Measured with `examples/matmul_rate` and `examples/conv_rate` (one core):
//! - the micro tile alone, its operands in L1: 185-198 GFLOP/s, of this machine's 221 (an FMA
//!   loop on registers);
//! - ResNet-50's 1x1 convolutions and ViT-S's projections as matmuls, operands in cache: 110-135
//!   GFLOP/s against `gemm`'s 80-100; with operands in memory (as a workgroup inside a model
//!   reads them): 50-100, `gemm` 40-80;
//! - ResNet-50's unit-stride convolutions tile by tile: 105-140 GFLOP/s (3x3 ones at 56x56 went
//!   from 104 to 135 with the taps summed in registers and the 8 x 48 shape). Inside the model
//!   they run at about 100 a worker: the rest is memory traffic, not arithmetic.
//!
//! Tried and dropped: packing `a` too (49-column products fell from about 110 to 72 GFLOP/s),
//! `KC` of 128 or 384 and prefetching 24 or 64 rows ahead (within the noise).

use crate::activation::avx512::activated;
use crate::matmul::{Bias, Epilogue};
use crate::matrix::{Matrix, MatrixMut};
use crate::Activation;
use std::arch::x86_64::{
    __m512, __mmask16, _mm512_add_ps, _mm512_fmadd_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_set1_ps,
    _mm512_setzero_ps, _mm_prefetch, _MM_HINT_T0,
};

/// A micro tile's shape: `V` vectors of 16 columns by as many rows as fill 24 accumulators.
/// Products of one or two rows take [`Few`]; the others take the shape of [`Narrow`] and
/// [`Wide`] that wastes fewer lanes and rows on its edges: 12 x 32 suits 49-column products
/// (7x7 images), 8 x 48 suits 64-channel convolutions and rows of 230 columns.
trait Shape {
    /// Vectors of 16 columns.
    const V: usize;
    /// Rows.
    const MR: usize = 24 / Self::V;
    /// Columns.
    const NR: usize = 16 * Self::V;
}

/// 12 rows by 32 columns.
struct Narrow;
impl Shape for Narrow {
    const V: usize = 2;
}

/// 8 rows by 48 columns.
struct Wide;
impl Shape for Wide {
    const V: usize = 3;
}

/// Lanes of an `m` x `n` product that land outside it, with micro tiles of `mr` x `nr`.
fn waste(m: usize, n: usize, mr: usize, nr: usize) -> usize {
    m.div_ceil(mr) * mr * n.div_ceil(nr) * nr - m * n
}

/// 2 rows by 192 columns, for products of one or two rows (a dense layer at batch 1): their
/// few rows would leave the other shapes' accumulators idle and their FMAs waiting on each
/// other, and a workgroup's tile of `b` (about 170 columns) is read one whole row at a time.
struct Few;
impl Shape for Few {
    const V: usize = 12;
}

/// Up to this many columns a product of [`Few`]'s rows takes [`Narrow`]: [`Few`] sums all 12 of
/// its vectors a row whether they hold columns or not. `examples/matmul_rate`, GFLOP/s from cache
/// / from memory, [`Few`] against [`Narrow`]: 1x10x1024 (a classifier's last layer) 2.8 / 2.7
/// against 15.7 / 7.0, 1x48x1024 12.4 / 7.9 against 50.8 / 8.8; from 64 columns on [`Narrow`]'s
/// strips read `b` from memory slower (1x64x1024: 8.0 against 5.3).
const FEW_MIN_COLUMNS: usize = 48;

/// Which micro tile suits a product of `m` rows by `n` columns.
#[derive(Clone, Copy)]
enum Choice {
    Narrow,
    Wide,
    Few,
}

impl Choice {
    /// The shape for an `m` x `n` product: [`Few`] up to its rows when it has more than
    /// [`FEW_MIN_COLUMNS`] columns, else the one of [`Wide`] and [`Narrow`] that wastes fewer
    /// lanes.
    fn of(m: usize, n: usize) -> Choice {
        if m <= Few::MR && n > FEW_MIN_COLUMNS {
            Choice::Few
        } else if waste(m, n, Wide::MR, Wide::NR) < waste(m, n, Narrow::MR, Narrow::NR) {
            Choice::Wide
        } else {
            Choice::Narrow
        }
    }
}

/// Length of the inner-dimension stretch one micro tile accumulates between loads of `c`.
const KC: usize = 256;
/// How many rows of `b` ahead of the one being multiplied are fetched into L1.
const PREFETCH_ROWS: usize = 8;
/// Columns of `b` packed at a time (a multiple of both shapes' columns): [`KC`] x [`NC`] floats
/// (about 1 MiB) stay in L2 while every row panel of `a` passes over them.
const NC: usize = 960;

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

/// `c = activation(a·b + bias + residual)` when [`available`]; returns whether it ran. The views'
/// sizes agree (`a` is `m`x`k` with `k > 0`, `b` `k`x`n`, `c` and the residual `m`x`n`), and so
/// does the bias. The bias, residual and activation are applied in the micro tiles' registers,
/// so `c` is written once per block of the inner dimension and never read first.
pub(crate) fn multiply(a: &Matrix<'_>, b: &Matrix<'_>, c: &mut MatrixMut<'_>, epilogue: &Epilogue<'_>) -> bool {
    if !available() {
        return false;
    }
    debug_assert!(b.rows == a.cols && c.rows == a.rows && c.cols == b.cols && a.cols > 0);
    // SAFETY: the CPU has AVX-512F (checked above), which is all the functions' code needs.
    unsafe {
        match Choice::of(c.rows, c.cols) {
            Choice::Few => multiply_blocks::<Few>(a, b, c, epilogue),
            Choice::Wide => multiply_blocks::<Wide>(a, b, c, epilogue),
            Choice::Narrow => multiply_blocks::<Narrow>(a, b, c, epilogue),
        }
    }
    true
}

/// `c = activation(Σ a·b + bias + residual)` over `terms` when [`available`]; returns whether it
/// ran. Every term's `a` has `c`'s rows and every `b` its columns, and each `a`'s columns are its
/// `b`'s rows; the bias and the residual agree with `c`. `b` is read in place and each tile of
/// `c` is stored once for all the terms: a convolution's taps are such terms.
pub(crate) fn multiply_sum(terms: &[(Matrix<'_>, Matrix<'_>)], c: &mut MatrixMut<'_>, epilogue: &Epilogue<'_>) -> bool {
    if !available() {
        return false;
    }
    debug_assert!(terms
        .iter()
        .all(|(a, b)| a.rows == c.rows && b.cols == c.cols && a.cols == b.rows));
    // SAFETY: the CPU has AVX-512F (checked above), which is all the functions' code needs.
    unsafe {
        match Choice::of(c.rows, c.cols) {
            Choice::Few => multiply_sum_tiles::<Few>(terms, c, epilogue),
            Choice::Wide => multiply_sum_tiles::<Wide>(terms, c, epilogue),
            Choice::Narrow => multiply_sum_tiles::<Narrow>(terms, c, epilogue),
        }
    }
    true
}

/// What a micro tile's sums start from.
#[derive(Clone, Copy)]
enum TileStart {
    /// The tile's elements of `c` (a later block of the inner dimension).
    C,
    /// Zeros.
    Zero,
    /// One value per row, from this address on (the tile's first row's).
    RowBias(*const f32),
    /// One value per column, from this address on (the tile's first column's).
    ColumnBias(*const f32),
}

/// The residual's element at `row`, `col` and its row stride, for the first block of the inner
/// dimension (a later block starts from `c`, which holds it already).
fn residual_at(residual: Option<Matrix<'_>>, first: bool, row: usize, col: usize) -> Option<(*const f32, usize)> {
    let residual = residual.filter(|_| first)?;
    Some((
        residual.data.as_ptr().wrapping_add(row * residual.row_stride + col),
        residual.row_stride,
    ))
}

impl TileStart {
    /// How a tile at `row`, `col` of `c` starts, for the first block of the inner dimension when
    /// `first`, else from `c`.
    fn of(bias: &Bias<'_>, first: bool, row: usize, col: usize) -> TileStart {
        match (first, bias) {
            (false, _) => TileStart::C,
            (true, Bias::None) => TileStart::Zero,
            (true, Bias::PerRow(bias)) => TileStart::RowBias(bias.as_ptr().wrapping_add(row)),
            (true, Bias::PerColumn(bias)) => TileStart::ColumnBias(bias.as_ptr().wrapping_add(col)),
        }
    }
}

/// One product that a micro tile adds up, as addresses: `a` (`m` x `kc`, rows `lda` apart) at
/// its first row and inner index, `b` (`kc` x `n`, rows `ldb` apart) at its first inner index and
/// column. The views' checks made every element a micro tile touches exist.
#[derive(Clone, Copy)]
struct Term {
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    /// Inner-dimension length.
    kc: usize,
}

/// The products a micro tile adds up.
#[derive(Clone, Copy)]
enum Terms<'t> {
    /// One, as addresses.
    One(Term),
    /// Several, as views (a convolution's taps), each from its first row and inner index.
    Views(&'t [(Matrix<'t>, Matrix<'t>)]),
}

impl Terms<'_> {
    fn len(&self) -> usize {
        match self {
            Terms::One(_) => 1,
            Terms::Views(views) => views.len(),
        }
    }

    /// Term `t` (below [`Terms::len`]).
    #[inline(always)]
    fn get(&self, t: usize) -> Term {
        match self {
            Terms::One(term) => *term,
            Terms::Views(views) => {
                let (a, b) = &views[t];
                Term {
                    a: a.data.as_ptr(),
                    lda: a.row_stride,
                    b: b.data.as_ptr(),
                    ldb: b.row_stride,
                    kc: a.cols,
                }
            }
        }
    }
}

/// Where one micro tile reads and writes: rows `row..` of every term's `a`, columns `col..` of
/// every term's `b`, and `c`, the tile's first element; `columns` of them lie inside `c`. Its
/// sums start from `start` plus the `residual` (its element at the tile's first, and its row
/// stride) and get `activation` before they are stored.
struct Tile<'t> {
    terms: Terms<'t>,
    row: usize,
    col: usize,
    c: *mut f32,
    ldc: usize,
    columns: usize,
    start: TileStart,
    residual: Option<(*const f32, usize)>,
    activation: Activation,
}

/// Lane masks for the `V` vectors of a tile of `columns` columns.
fn column_masks<const V: usize>(columns: usize) -> [__mmask16; V] {
    std::array::from_fn(|v| match columns.saturating_sub(16 * v) {
        0 => 0,
        16.. => 0xffff,
        count => (1u16 << count) - 1,
    })
}

/// Copies `b[p0..p0+kc][j0..j0+nc]` into `packed` as strips of `nr` columns, each `kc` rows
/// of `nr` floats, zero-padded past the last column. It walks `b` a row at a time, so its reads
/// are sequential, which is what lets the copy run at memory speed when `b` is not in cache.
#[target_feature(enable = "avx512f")]
fn pack_b(b: &Matrix<'_>, (p0, kc): (usize, usize), (j0, nc): (usize, usize), nr: usize, packed: &mut [f32]) {
    for p in 0..kc {
        let start = (p0 + p) * b.row_stride + j0;
        let row = &b.data[start..start + nc];
        if p + PREFETCH_ROWS < kc {
            let ahead = b.data.as_ptr().wrapping_add(start + PREFETCH_ROWS * b.row_stride);
            (0..nc)
                .step_by(16)
                .for_each(|j| _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(j).cast()));
        }
        for (s, source) in row.chunks(nr).enumerate() {
            let packed_row = &mut packed[(s * kc + p) * nr..][..nr];
            packed_row[..source.len()].copy_from_slice(source);
            packed_row[source.len()..].fill(0.0);
        }
    }
}

/// `c = activation(a·b + bias)` in blocks of [`KC`] inner indices by [`NC`] columns, `b` packed
/// or not: the first block starts from the bias, the last applies the activation.
///
/// # Safety
/// The CPU has AVX-512F, and the bias agrees with `c`.
#[target_feature(enable = "avx512f")]
unsafe fn multiply_blocks<S: Shape>(a: &Matrix<'_>, b: &Matrix<'_>, c: &mut MatrixMut<'_>, epilogue: &Epilogue<'_>) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let pack = packs_b(m, n);
    // Blocks of columns keep `b` in L2 while several row panels pass over it; one panel needs
    // none, and [`Few`]'s strips do not divide `NC`.
    let block_cols = if pack || m > S::MR { NC } else { n.max(1) };
    PACKED_B.with_borrow_mut(|packed| {
        if pack {
            packed.resize(KC * NC, 0.0);
        }
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            for j0 in (0..n).step_by(block_cols) {
                let nc = block_cols.min(n - j0);
                if pack {
                    pack_b(b, (p0, kc), (j0, nc), S::NR, packed);
                }
                for i in (0..m).step_by(S::MR) {
                    for (s, j) in (j0..j0 + nc).step_by(S::NR).enumerate() {
                        let (b_block, ldb, col) = if pack {
                            (packed[s * kc * S::NR..].as_ptr(), S::NR, 0)
                        } else {
                            (b.data.as_ptr().wrapping_add(p0 * b.row_stride), b.row_stride, j)
                        };
                        let term = Term {
                            a: a.data.as_ptr().wrapping_add(p0),
                            lda: a.row_stride,
                            b: b_block,
                            ldb,
                            kc,
                        };
                        let tile = Tile {
                            terms: Terms::One(term),
                            row: i,
                            col,
                            c: c.data.as_mut_ptr().wrapping_add(i * c.row_stride + j),
                            ldc: c.row_stride,
                            columns: S::NR.min(j0 + nc - j),
                            start: TileStart::of(&epilogue.bias, p0 == 0, i, j),
                            residual: residual_at(epilogue.residual, p0 == 0, i, j),
                            activation: if p0 + kc == k {
                                epilogue.activation
                            } else {
                                Activation::Identity
                            },
                        };
                        // SAFETY: rows i..min(i+MR, m) and inner indices p0..p0+kc lie inside
                        // `a`, the tile's columns of those inner indices inside `b` (or strip
                        // `s`, which holds kc x NR floats), and of those rows inside `c` and the
                        // residual (the views' extents were checked against their slices), as do
                        // the bias's elements for those rows or columns (it agrees with `c`); `c`
                        // is borrowed mutably, so nothing else reads or writes it; the CPU has
                        // AVX-512F.
                        unsafe { micro_tile_of_rows::<S>(m - i, &tile) };
                    }
                }
            }
        }
    });
}

/// `c = activation(Σ a·b + bias)` over `terms`, tile by tile.
///
/// # Safety
/// The CPU has AVX-512F, and the bias agrees with `c`.
#[target_feature(enable = "avx512f")]
unsafe fn multiply_sum_tiles<S: Shape>(
    terms: &[(Matrix<'_>, Matrix<'_>)],
    c: &mut MatrixMut<'_>,
    epilogue: &Epilogue<'_>,
) {
    let (m, n) = (c.rows, c.cols);
    for i in (0..m).step_by(S::MR) {
        for j in (0..n).step_by(S::NR) {
            let tile = Tile {
                terms: Terms::Views(terms),
                row: i,
                col: j,
                c: c.data.as_mut_ptr().wrapping_add(i * c.row_stride + j),
                ldc: c.row_stride,
                columns: S::NR.min(n - j),
                start: TileStart::of(&epilogue.bias, true, i, j),
                residual: residual_at(epilogue.residual, true, i, j),
                activation: epilogue.activation,
            };
            // SAFETY: rows i..min(i+MR, m) of every term's `a` and the tile's columns of its
            // `b` lie inside those views, and those of `c` inside `c` and the residual (the
            // views' extents were checked against their slices), as do the bias's elements for
            // those rows or columns (it agrees with `c`); `c` is borrowed mutably, so nothing
            // else reads or writes it; the CPU has AVX-512F.
            unsafe { micro_tile_of_rows::<S>(m - i, &tile) };
        }
    }
}

/// [`micro_tile`] for `rows` (at most the shape's) rows.
///
/// # Safety
/// As [`micro_tile`].
#[target_feature(enable = "avx512f")]
unsafe fn micro_tile_of_rows<S: Shape>(rows: usize, tile: &Tile<'_>) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (S::V, rows.min(S::MR)) {
            (2, 12) => micro_tile::<12, 2>(tile),
            (2, 11) => micro_tile::<11, 2>(tile),
            (2, 10) => micro_tile::<10, 2>(tile),
            (2, 9) => micro_tile::<9, 2>(tile),
            (2, 8) => micro_tile::<8, 2>(tile),
            (2, 7) => micro_tile::<7, 2>(tile),
            (2, 6) => micro_tile::<6, 2>(tile),
            (2, 5) => micro_tile::<5, 2>(tile),
            (2, 4) => micro_tile::<4, 2>(tile),
            (2, 3) => micro_tile::<3, 2>(tile),
            (2, 2) => micro_tile::<2, 2>(tile),
            (2, _) => micro_tile::<1, 2>(tile),
            (12, 2) => micro_tile::<2, 12>(tile),
            (12, _) => micro_tile::<1, 12>(tile),
            (_, 8) => micro_tile::<8, 3>(tile),
            (_, 7) => micro_tile::<7, 3>(tile),
            (_, 6) => micro_tile::<6, 3>(tile),
            (_, 5) => micro_tile::<5, 3>(tile),
            (_, 4) => micro_tile::<4, 3>(tile),
            (_, 3) => micro_tile::<3, 3>(tile),
            (_, 2) => micro_tile::<2, 3>(tile),
            (_, _) => micro_tile::<1, 3>(tile),
        }
    }
}

/// `c[0..R][the tile's columns] = activation(start + Σ a[row..row+R][0..kc] · b[0..kc][col +
/// the tile's columns])` over the tile's terms, with `R` rows of `V` vectors of accumulators.
///
/// # Safety
/// For every term, row `i < R`, inner index `p < kc` and column `j` below the tile's `columns`
/// (at most `16 V`): `a + (row+i)*lda + p` and `b + p*ldb + col + j` are valid for reads, and
/// `c + i*ldc + j` for reads and writes that nothing else sees during the call, and so is
/// `residual + i*ldr + j` for reads; a row bias is valid for `R` reads, a column bias for the
/// tile's `columns`.
#[target_feature(enable = "avx512f")]
unsafe fn micro_tile<const R: usize, const V: usize>(tile: &Tile<'_>) {
    let masks = column_masks::<V>(tile.columns);
    let c_row = |i: usize| tile.c.wrapping_add(i * tile.ldc);
    let mut acc: [[__m512; V]; R] = std::array::from_fn(|i| {
        std::array::from_fn(|v| match tile.start {
            // SAFETY: row i's columns of `c` in the tile are valid (the contract); masked-out
            // lanes are never read.
            TileStart::C => unsafe { _mm512_maskz_loadu_ps(masks[v], c_row(i).wrapping_add(16 * v)) },
            TileStart::Zero => _mm512_setzero_ps(),
            // SAFETY: a row bias holds the tile's R rows (the contract).
            TileStart::RowBias(bias) => _mm512_set1_ps(unsafe { *bias.wrapping_add(i) }),
            // SAFETY: a column bias holds the tile's columns (the contract); masked-out lanes
            // are never read.
            TileStart::ColumnBias(bias) => unsafe { _mm512_maskz_loadu_ps(masks[v], bias.wrapping_add(16 * v)) },
        })
    });
    // The residual is added after the products, its lines asked for before them, so that no sum
    // waits on a read from memory while the products run.
    if let Some((residual, ldr)) = tile.residual {
        for i in 0..R {
            // Hints only: they never fault, wherever they point.
            (0..V).for_each(|v| _mm_prefetch::<_MM_HINT_T0>(residual.wrapping_add(i * ldr + 16 * v).cast()));
        }
    }
    for t in 0..tile.terms.len() {
        let term = tile.terms.get(t);
        let a_rows: [*const f32; R] = std::array::from_fn(|i| term.a.wrapping_add((tile.row + i) * term.lda));
        let b = term.b.wrapping_add(tile.col);
        for p in 0..term.kc {
            let b_row = b.wrapping_add(p * term.ldb);
            let ahead = b_row.wrapping_add(PREFETCH_ROWS * term.ldb);
            // Hints only: they never fault, wherever they point.
            (0..V).for_each(|v| _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(16 * v).cast()));
            let b_vectors: [__m512; V] = std::array::from_fn(|v| {
                // SAFETY: row p < kc of `b` is valid in the tile's columns (the contract).
                unsafe { _mm512_maskz_loadu_ps(masks[v], b_row.wrapping_add(16 * v)) }
            });
            for (i, row) in acc.iter_mut().enumerate() {
                // SAFETY: a[row + i][p] is valid for i < R and p < kc (the contract).
                let a = _mm512_set1_ps(unsafe { *a_rows[i].wrapping_add(p) });
                for (sum, b_vector) in row.iter_mut().zip(b_vectors) {
                    *sum = _mm512_fmadd_ps(a, b_vector, *sum);
                }
            }
        }
    }
    if let Some((residual, ldr)) = tile.residual {
        for (i, row) in acc.iter_mut().enumerate() {
            for (v, sum) in row.iter_mut().enumerate() {
                // SAFETY: row i's columns of the residual in the tile are valid (the contract);
                // masked-out lanes are never read.
                let r = unsafe { _mm512_maskz_loadu_ps(masks[v], residual.wrapping_add(i * ldr + 16 * v)) };
                *sum = _mm512_add_ps(*sum, r);
            }
        }
    }
    for (i, row) in acc.into_iter().enumerate() {
        for (v, sum) in row.into_iter().enumerate() {
            let value = activated(tile.activation, sum);
            // SAFETY: as for the loads of `c`; masked-out lanes are never written.
            unsafe { _mm512_mask_storeu_ps(c_row(i).wrapping_add(16 * v), masks[v], value) };
        }
    }
}
