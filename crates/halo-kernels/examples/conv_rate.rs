//! GFLOP/s of [`conv2d_tile`] on one thread over a whole convolution, tile by tile as a dispatch's
//! workgroups compute it (48 filters by about 256 columns of the input's phase width), on
//! ResNet-50's 3x3 and 1x1 convolutions, its 7x7 stride-2 stem, and ResNeXt-50's grouped 3x3
//! convolutions (32 groups).
//!
//! `cargo run --release -p halo-kernels --example conv_rate [CxFxHPxWPxK[/STRIDE][gGROUPS] ...]`

use halo_kernels::{conv2d_tile, Activation, ConvEpilogue, ConvShape};
use std::time::Instant;

/// How much memory the cold runs rotate their inputs and filters over: more than any cache here.
const COLD_BYTES: usize = 256 << 20;

const SHAPES: &[&str] = &[
    "64x64x58x58x3",
    "128x128x30x30x3",
    "256x256x16x16x3",
    "512x512x9x9x3",
    "64x256x56x56x1",
    "256x64x56x56x1",
    "1024x256x14x14x1",
    "512x2048x7x7x1",
    "3x64x230x230x7/2",
    "128x128x58x58x3/2",
    "256x256x30x30x3/2",
    "512x512x16x16x3/2",
    "128x128x58x58x3g32",
    "256x256x30x30x3g32",
    "512x512x16x16x3g32",
    "1024x1024x9x9x3g32",
    "256x256x58x58x3/2g32",
];

fn shape(text: &str) -> Option<ConvShape> {
    let (text, groups) = text.split_once('g').unwrap_or((text, "1"));
    let (sizes, stride) = text.split_once('/').unwrap_or((text, "1"));
    let parts: Vec<usize> = sizes.split('x').map(|part| part.parse().ok()).collect::<Option<_>>()?;
    let [channels, filters, padded_height, padded_width, kernel] = parts[..] else {
        return None;
    };
    Some(ConvShape {
        stride: stride.parse().ok()?,
        groups: groups.parse().ok()?,
        ..ConvShape::unit(channels, filters, (padded_height, padded_width), (kernel, kernel))
    })
}

fn main() {
    let asked: Vec<String> = std::env::args().skip(1).collect();
    let texts: Vec<&str> = if asked.is_empty() {
        SHAPES.to_vec()
    } else {
        asked.iter().map(String::as_str).collect()
    };
    println!("shape (CxFxHPxWPxK/STRIDEgGROUPS)\thot GFLOP/s\tcold GFLOP/s");
    for text in texts {
        let Some(shape) = shape(text).filter(|shape| shape.output_size().is_ok()) else {
            eprintln!("'{text}' is not CxFxHPxWPxK[/STRIDE][gGROUPS] with the filter inside the input and groups dividing C and F");
            std::process::exit(2);
        };
        let (ho, wo) = shape.output_size().unwrap();
        let taps = shape.kernel_height * shape.kernel_width;
        let (ph, pw) = shape.phase_size();
        let input_len = shape.stride * shape.stride * shape.channels * ph * pw;
        let per_group = shape.channels / shape.groups;
        let weights_len = taps * shape.filters * per_group;
        // Enough copies of the input and filters to fill COLD_BYTES, for the cold runs.
        let copies = (COLD_BYTES / 4 / (input_len + weights_len).max(1)).max(1);
        let operands: Vec<(Vec<f32>, Vec<f32>)> = (0..copies)
            .map(|_| (vec![0.5f32; input_len], vec![0.01f32; weights_len]))
            .collect();
        let bias = vec![0.1f32; shape.filters];
        let mut output = vec![0f32; shape.filters * ho * wo];
        let epilogue = ConvEpilogue {
            bias: Some(&bias),
            activation: Activation::Relu,
        };
        let rows_per_tile = (256 / pw).max(1);
        let flops = 2.0 * (shape.filters * ho * wo * per_group * taps) as f64;
        let mut rates = Vec::new();
        for cold in [false, true] {
            let mut next = 0;
            let mut run = || {
                let (input, weights) = &operands[next];
                if cold {
                    next = (next + 1) % copies;
                }
                for f in (0..shape.filters).step_by(48) {
                    for y in (0..ho).step_by(rows_per_tile) {
                        let tile = (f..shape.filters.min(f + 48), y..ho.min(y + rows_per_tile));
                        conv2d_tile(&shape, input, weights, &mut output, &epilogue, tile).unwrap();
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
            rates.push(format!("{:.1}", flops / seconds / 1e9));
        }
        println!("{text}\t{}", rates.join("\t"));
    }
}
