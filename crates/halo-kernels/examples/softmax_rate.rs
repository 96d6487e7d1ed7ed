//! Nanoseconds an element of [`softmax_rows_on`] on one thread, a workgroup's rows at a time
//! (about 4096 elements, as the dispatch deals them out), on every path this CPU runs, for
//! attention's shapes: ViT-S/16 (6 heads of 197 tokens) and the benchmark set's encoder (4 heads
//! of 128), from cache (one head's scores again and again) and from memory (every head of 12
//! layers in turn).
//!
//! `cargo run --release -p halo-kernels --example softmax_rate [ROWSxCOLS ...]`

use halo_kernels::{softmax_rows_on, KernelPath, Matrix, MatrixMut};
use std::time::Instant;

const SHAPES: &[&str] = &["1182x197", "512x128"];

fn main() {
    let asked: Vec<String> = std::env::args().skip(1).collect();
    let texts: Vec<&str> = if asked.is_empty() {
        SHAPES.to_vec()
    } else {
        asked.iter().map(String::as_str).collect()
    };
    let paths: Vec<KernelPath> = KernelPath::ALL.into_iter().filter(|p| p.is_available()).collect();
    println!("shape (ROWSxCOLS)\tpath\tns/element from cache\tfrom memory");
    for text in texts {
        let Some((rows, cols)) = text
            .split_once('x')
            .and_then(|(r, c)| Some((r.parse::<usize>().ok()?, c.parse::<usize>().ok()?)))
            .filter(|&(r, c)| r > 0 && c > 0)
        else {
            eprintln!("'{text}' is not ROWSxCOLS of at least one each");
            std::process::exit(2);
        };
        // Twelve layers' scores, so that a pass over all of them leaves the caches.
        let copies = 12;
        let x: Vec<f32> = (0..copies * rows * cols)
            .map(|i| ((i * 7) % 23) as f32 * 0.4 - 4.0)
            .collect();
        let mut y = vec![0f32; copies * rows * cols];
        let per = (4096 / cols).max(1);
        for &path in &paths {
            let mut run = |copy: usize| {
                let x = &x[copy * rows * cols..][..rows * cols];
                let y = &mut y[copy * rows * cols..][..rows * cols];
                for first in (0..rows).step_by(per) {
                    let count = per.min(rows - first);
                    let from = Matrix::new(&x[first * cols..], count, cols, cols).unwrap();
                    let to = MatrixMut::new(&mut y[first * cols..], count, cols, cols).unwrap();
                    softmax_rows_on(path, from, 0.125, to).unwrap();
                }
            };
            let mut time = |copies_of: &dyn Fn(usize) -> usize, rounds: usize| {
                run(copies_of(0));
                let start = Instant::now();
                for round in 0..rounds {
                    run(copies_of(round));
                }
                start.elapsed().as_secs_f64() * 1e9 / (rounds * rows * cols) as f64
            };
            let hot = time(&|_| 0, 200);
            let cold = time(&|round| round % copies, 200);
            println!("{rows}x{cols}\t{path:?}\t{hot:.3}\t{cold:.3}");
        }
    }
}
