//! GFLOP/s of [`conv2d_tile`] on one thread over a whole convolution, tile by tile as a dispatch's
//! workgroups compute it (48 filters by about 256 padded columns), on ResNet-50's unit-stride
//! 3x3 and 1x1 convolutions.
//!
//! `cargo run --release -p halo-kernels --example conv_rate [CxFxHPxWPxK ...]`

use halo_kernels::{conv2d_tile, Activation, ConvEpilogue, ConvShape};
use std::time::Instant;

const SHAPES: &[&str] = &[
    "64x64x58x58x3",
    "128x128x30x30x3",
    "256x256x16x16x3",
    "512x512x9x9x3",
    "64x256x56x56x1",
    "256x64x56x56x1",
    "1024x256x14x14x1",
    "512x2048x7x7x1",
];

fn shape(text: &str) -> Option<ConvShape> {
    let parts: Vec<usize> = text.split('x').map(|part| part.parse().ok()).collect::<Option<_>>()?;
    let [channels, filters, padded_height, padded_width, kernel] = parts[..] else {
        return None;
    };
    Some(ConvShape {
        channels,
        filters,
        padded_height,
        padded_width,
        kernel_height: kernel,
        kernel_width: kernel,
    })
}

fn main() {
    let asked: Vec<String> = std::env::args().skip(1).collect();
    let texts: Vec<&str> = if asked.is_empty() {
        SHAPES.to_vec()
    } else {
        asked.iter().map(String::as_str).collect()
    };
    println!("shape (CxFxHPxWPxK)\tGFLOP/s");
    for text in texts {
        let Some(shape) = shape(text).filter(|shape| shape.output_size().is_ok()) else {
            eprintln!("'{text}' is not CxFxHPxWPxK with the filter inside the input");
            std::process::exit(2);
        };
        let (ho, wo) = shape.output_size().unwrap();
        let taps = shape.kernel_height * shape.kernel_width;
        let input = vec![0.5f32; shape.channels * shape.padded_height * shape.padded_width];
        let weights = vec![0.01f32; taps * shape.filters * shape.channels];
        let bias = vec![0.1f32; shape.filters];
        let mut output = vec![0f32; shape.filters * ho * wo];
        let epilogue = ConvEpilogue {
            bias: Some(&bias),
            activation: Activation::Relu,
        };
        let rows_per_tile = (256 / shape.padded_width).max(1);
        let mut run = || {
            for f in (0..shape.filters).step_by(48) {
                for y in (0..ho).step_by(rows_per_tile) {
                    let tile = (f..shape.filters.min(f + 48), y..ho.min(y + rows_per_tile));
                    conv2d_tile(&shape, &input, &weights, &mut output, &epilogue, tile).unwrap();
                }
            }
        };
        run();
        let (start, mut calls) = (Instant::now(), 0u32);
        while start.elapsed().as_secs_f64() < 0.5 {
            run();
            calls += 1;
        }
        let seconds = start.elapsed().as_secs_f64() / f64::from(calls);
        let flops = 2.0 * (shape.filters * ho * wo * shape.channels * taps) as f64;
        println!("{text}\t{:.1}", flops / seconds / 1e9);
    }
}
