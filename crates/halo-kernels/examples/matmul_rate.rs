//! GFLOP/s of each matmul path this CPU runs, one thread, on shapes from the benchmark models.
//!
//! `cargo run --release -p halo-kernels --example matmul_rate [MxNxK[/B_ROW_STRIDE] ...]`
//!
//! A row stride for `b` wider than N measures a tile of a wider matrix, as a workgroup of a
//! dispatch multiplies: e.g. `48x256x576/3136` is one tile of a 3x3 convolution at 56x56.
//!
//! Each shape runs twice: hot (the same operands every call, so they stay in cache) and cold
//! (each call takes the next of enough copies of the operands to fill 256 MiB, so it reads them
//! from memory, as a workgroup inside a model does).

use halo_kernels::{matmul_on, Epilogue, KernelPath, Matrix, MatrixMut};
use std::time::{Duration, Instant};

/// 1x1 convolutions of ResNet-50 as Cout x HW x Cin, a rewritten 3x3 at 7x7, ViT-S's
/// projections as tokens x out x in, and the MLP at batch 1 and 32.
const SHAPES: &[&str] = &[
    "256x3136x64",
    "1024x196x256",
    "256x196x1024",
    "2048x49x512",
    "512x49x4608",
    "197x1152x384",
    "197x1536x384",
    "197x384x1536",
    "1x1024x1024",
    "32x1024x1024",
];

/// How much memory the cold runs rotate their operands over: more than any cache here.
const COLD_BYTES: usize = 256 << 20;

/// `(m, n, k, b's row stride)` from `MxNxK[/STRIDE]`.
fn shape(text: &str) -> Option<(usize, usize, usize, usize)> {
    let (sizes, stride) = text.split_once('/').unwrap_or((text, ""));
    let mut parts = sizes.split('x').map(|part| part.parse().ok());
    let (m, n, k) = (parts.next()??, parts.next()??, parts.next()??);
    let ldb = if stride.is_empty() { n } else { stride.parse().ok()? };
    (ldb >= n).then_some((m, n, k, ldb))
}

/// Seconds per call: the median of 5 timings of enough calls to fill 0.1 s.
fn seconds_per_call(mut call: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < Duration::from_millis(100) {
        call();
        calls += 1;
    }
    let mut samples: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                call();
            }
            start.elapsed().as_secs_f64() / f64::from(calls)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[2]
}

/// Where a call's operands come from.
#[derive(Clone, Copy)]
enum Temperature {
    /// The same operands every call: from cache.
    Hot,
    /// A new `a` every call, the same `b` and `c`: weights from memory, activations from cache,
    /// as a convolution inside a model reads them.
    ColdA,
    /// New operands every call: from memory.
    Cold,
}

impl Temperature {
    fn name(self) -> &'static str {
        match self {
            Temperature::Hot => "hot",
            Temperature::ColdA => "cold a",
            Temperature::Cold => "cold",
        }
    }
}

fn main() {
    let asked: Vec<String> = std::env::args().skip(1).collect();
    let texts: Vec<&str> = if asked.is_empty() {
        SHAPES.to_vec()
    } else {
        asked.iter().map(String::as_str).collect()
    };
    let paths: Vec<_> = KernelPath::ALL.into_iter().filter(|path| path.is_available()).collect();
    println!(
        "shape (MxNxK)\t{}",
        paths
            .iter()
            .map(|path| format!("{path:?} GFLOP/s"))
            .collect::<Vec<_>>()
            .join("\t")
    );
    for text in texts {
        let Some((m, n, k, ldb)) = shape(text) else {
            eprintln!("'{text}' is not MxNxK[/STRIDE] with STRIDE at least N");
            std::process::exit(2);
        };
        let floats = m * k + k * ldb + m * n;
        let copies = (COLD_BYTES / 4 / floats.max(1)).max(1);
        let operands: Vec<(Vec<f32>, Vec<f32>)> = (0..copies)
            .map(|_| {
                let a = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
                let b = (0..k * ldb).map(|i| (i % 5) as f32 * 0.1).collect();
                (a, b)
            })
            .collect();
        let mut c_copies: Vec<Vec<f32>> = (0..copies).map(|_| vec![0f32; m * n]).collect();
        for temperature in [Temperature::Hot, Temperature::ColdA, Temperature::Cold] {
            let rates: Vec<String> = paths
                .iter()
                .map(|&path| {
                    let mut next = 0;
                    let seconds = seconds_per_call(|| {
                        next = match temperature {
                            Temperature::Hot => 0,
                            _ => (next + 1) % copies,
                        };
                        let bc = match temperature {
                            Temperature::Cold => next,
                            _ => 0,
                        };
                        let (a, _) = &operands[next];
                        let a = Matrix::new(a, m, k, k).unwrap();
                        let (_, b) = &operands[bc];
                        let b = Matrix::new(b, k, n, ldb).unwrap();
                        let mut c_data = std::mem::take(&mut c_copies[bc]);
                        let c = MatrixMut::new(&mut c_data, m, n, n).unwrap();
                        matmul_on(path, a, b, c, &Epilogue::NONE).unwrap();
                        c_copies[bc] = c_data;
                    });
                    format!("{:.1}", 2.0 * (m * n * k) as f64 / seconds / 1e9)
                })
                .collect();
            println!("{text} {}\t{}", temperature.name(), rates.join("\t"));
        }
    }
}
