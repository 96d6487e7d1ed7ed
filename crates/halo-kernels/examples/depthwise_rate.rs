//! GFLOP/s and GB/s of [`depthwise_tile`] on one thread over a whole depthwise convolution,
//! channel group by channel group as a dispatch's workgroups compute it (about 4096 outputs
//! each), on every path this CPU runs, for MobileNet-v2's and EfficientNet-B0's shapes.
//!
//! `cargo run --release -p halo-kernels --example depthwise_rate [CxHPxWPxK[/STRIDE] ...]`

use halo_kernels::{depthwise_tile_on, Activation, ConvEpilogue, DepthwisePath, DepthwiseShape};
use std::time::Instant;

const SHAPES: &[&str] = &[
    "32x114x114x3",
    "96x114x114x3/2",
    "144x58x58x3",
    "144x58x58x3/2",
    "192x30x30x3",
    "384x16x16x3",
    "576x16x16x3",
    "960x9x9x3",
    "240x32x32x5/2",
    "672x18x18x5",
];

fn shape(text: &str) -> Option<DepthwiseShape> {
    let (sizes, stride) = text.split_once('/').unwrap_or((text, "1"));
    let parts: Vec<usize> = sizes.split('x').map(|part| part.parse().ok()).collect::<Option<_>>()?;
    let [channels, padded_height, padded_width, kernel] = parts[..] else {
        return None;
    };
    Some(DepthwiseShape {
        channels,
        padded_height,
        padded_width,
        kernel_height: kernel,
        kernel_width: kernel,
        stride: stride.parse().ok()?,
        dilation: 1,
        padding: halo_kernels::Padding::NONE,
    })
}

fn main() {
    let asked: Vec<String> = std::env::args().skip(1).collect();
    let texts: Vec<&str> = if asked.is_empty() {
        SHAPES.to_vec()
    } else {
        asked.iter().map(String::as_str).collect()
    };
    let paths: Vec<DepthwisePath> = DepthwisePath::ALL.into_iter().filter(|p| p.is_available()).collect();
    println!("shape (CxHPxWPxK/STRIDE)\tpath\tGFLOP/s\tGB/s (input and output once)");
    for text in texts {
        let Some(shape) = shape(text).filter(|shape| shape.output_size().is_ok()) else {
            eprintln!("'{text}' is not CxHPxWPxK[/STRIDE] with the filter inside the input");
            std::process::exit(2);
        };
        let (ho, wo) = shape.output_size().unwrap();
        let c = shape.channels;
        let input = vec![0.5f32; c * shape.padded_height * shape.padded_width];
        let weights = vec![0.01f32; c * shape.kernel_height * shape.kernel_width];
        let bias = vec![0.1f32; c];
        let mut output = vec![0f32; c * ho * wo];
        let epilogue = ConvEpilogue {
            bias: Some(&bias),
            activation: Activation::Relu6,
        };
        let per_tile = (4096 / (ho * wo).max(1)).max(1);
        let flops = 2.0 * (c * ho * wo * shape.kernel_height * shape.kernel_width) as f64;
        let bytes = 4.0 * (input.len() + output.len()) as f64;
        for &path in &paths {
            let mut run = || {
                for ch in (0..c).step_by(per_tile) {
                    let tile = (ch..c.min(ch + per_tile), 0..ho);
                    depthwise_tile_on(path, &shape, &input, &weights, &mut output, &epilogue, tile).unwrap();
                }
            };
            run();
            let start = Instant::now();
            let mut runs = 0;
            while start.elapsed().as_secs_f64() < 0.3 {
                run();
                runs += 1;
            }
            let seconds = start.elapsed().as_secs_f64() / f64::from(runs);
            println!(
                "{text}\t{path:?}\t{:.1}\t{:.1}",
                flops / seconds / 1e9,
                bytes / seconds / 1e9
            );
        }
    }
}
