//! GFLOP/s of each matmul path this CPU runs, one thread, on shapes from the benchmark models.
//!
//! `cargo run --release -p halo-kernels --example matmul_rate [MxNxK ...]`

use halo_kernels::{matmul_on, Epilogue, KernelPath, Matrix, MatrixMut};
use std::time::{Duration, Instant};

/// 1x1 convolutions of ResNet-50 as Cout x HW x Cin, a rewritten 3x3 at 7x7, ViT-S's
/// projections as tokens x out x in, and the MLP at batch 1 and 32.
const SHAPES: &[(usize, usize, usize)] = &[
    (256, 3136, 64),
    (1024, 196, 256),
    (256, 196, 1024),
    (2048, 49, 512),
    (512, 49, 4608),
    (197, 1152, 384),
    (197, 1536, 384),
    (197, 384, 1536),
    (1, 1024, 1024),
    (32, 1024, 1024),
];

fn shape(text: &str) -> Option<(usize, usize, usize)> {
    let mut parts = text.split('x').map(|part| part.parse().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
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

fn main() {
    let asked: Vec<_> = std::env::args().skip(1).filter_map(|arg| shape(&arg)).collect();
    let shapes = if asked.is_empty() { SHAPES.to_vec() } else { asked };
    let paths: Vec<_> = KernelPath::ALL.into_iter().filter(|path| path.is_available()).collect();
    println!(
        "shape (MxNxK)\t{}",
        paths
            .iter()
            .map(|path| format!("{path:?} GFLOP/s"))
            .collect::<Vec<_>>()
            .join("\t")
    );
    for (m, n, k) in shapes {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        let mut c = vec![0f32; m * n];
        let rates: Vec<String> = paths
            .iter()
            .map(|&path| {
                let seconds = seconds_per_call(|| {
                    let a = Matrix::new(&a, m, k, k).unwrap();
                    let b = Matrix::new(&b, k, n, n).unwrap();
                    let c = MatrixMut::new(&mut c, m, n, n).unwrap();
                    matmul_on(path, a, b, c, &Epilogue::NONE).unwrap();
                });
                format!("{:.1}", 2.0 * (m * n * k) as f64 / seconds / 1e9)
            })
            .collect();
        println!("{m}x{n}x{k}\t{}", rates.join("\t"));
    }
}
