//! Per-call cost of one program on several devices, host tensors in and out, for a sweep of
//! tensor sizes: what a device whose memory the host cannot map (the Tenstorrent mock) adds over
//! one that computes in host memory (`local-task`), per call and per byte.
//!
//! ```text
//! cargo run --release -p halo-runtime --example transfer_overhead -- \
//!     fixtures/models/dynamic_shapes.vmfb scale_1d local-task tenstorrent://mock
//! ```
//!
//! The program must take and return one rank-1 `f32` tensor of any length (`scale_1d` does).
//! Each call uploads the input, runs, and reads the output back; every device is timed in turn,
//! in rounds, and the median per-call time is kept.

use halo_runtime::{tensor, HostTensor, Instance, Session};
use std::path::Path;
use std::time::{Duration, Instant};

const SIZES: [usize; 4] = [16, 16 << 10, 256 << 10, 4 << 20];
const ROUNDS: usize = 5;
const ROUND_TIME: Duration = Duration::from_millis(200);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [module, function, devices @ ..] = args.as_slice() else {
        return Err("usage: transfer_overhead MODULE FUNCTION DEVICE...".into());
    };
    if devices.is_empty() {
        return Err("name at least one device".into());
    }
    let instance = Instance::new();
    let mut sessions = Vec::new();
    for device in devices {
        let mut session = Session::new(&instance, &[device.as_str()])?;
        session.load_module_file(Path::new(module))?;
        sessions.push(session);
    }
    println!("{:>10} {:>12} {}", "elements", "bytes", devices.join(" | "));
    let mut table = Vec::new();
    for elements in SIZES {
        let input = HostTensor {
            shape: vec![elements as u64],
            element_type: halo_hal::ElementType::parse("f32")?,
            bytes: (0..elements).flat_map(|i| (i as f32).to_le_bytes()).collect(),
        };
        let mut rounds = vec![Vec::new(); sessions.len()];
        for _ in 0..ROUNDS {
            for (index, session) in sessions.iter().enumerate() {
                rounds[index].push(time_calls(session, function, &input)?);
            }
        }
        let medians: Vec<f64> = rounds
            .into_iter()
            .map(|mut times| {
                times.sort_by(f64::total_cmp);
                times[times.len() / 2]
            })
            .collect();
        let cells: Vec<String> = medians.iter().map(|us| format!("{us:10.1} us")).collect();
        println!("{elements:>10} {:>12} {}", elements * 8, cells.join(" | "));
        table.push((elements * 8, medians));
    }
    // The first device is the reference: per-call overhead at the smallest size, per-byte
    // overhead from the slope between the smallest and largest sizes.
    let (small_bytes, small) = &table[0];
    let (large_bytes, large) = &table[table.len() - 1];
    for (index, device) in devices.iter().enumerate().skip(1) {
        let per_call = small[index] - small[0];
        let per_byte_ns = ((large[index] - large[0]) - per_call) * 1000.0 / (*large_bytes - *small_bytes) as f64;
        println!(
            "{device} vs {}: {per_call:+.1} us per call, {per_byte_ns:+.3} ns per byte moved ({:.2}x at {} bytes, {:.2}x at {} bytes)",
            devices[0],
            small[index] / small[0],
            small_bytes,
            large[index] / large[0],
            large_bytes
        );
    }
    Ok(())
}

/// Mean time of the calls in one round, in microseconds per call, input upload and output
/// readback included.
fn time_calls(session: &Session, function: &str, input: &HostTensor) -> halo_hal::Result<f64> {
    let function = session.function(function)?;
    let started = Instant::now();
    let mut calls = 0u32;
    while started.elapsed() < ROUND_TIME || calls < 3 {
        let inputs = vec![session.tensor_input(input)?];
        let outputs = session.call(&function, &inputs)?;
        for output in &outputs {
            std::hint::black_box(tensor::to_host(session.device().as_ref(), output)?);
        }
        calls += 1;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / f64::from(calls))
}
