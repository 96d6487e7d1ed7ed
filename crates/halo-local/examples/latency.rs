//! Latency of the host-side synchronization paths of a device, as medians over many rounds:
//! - wake: a host thread signals a semaphore another host thread waits on (half a ping-pong);
//! - round trip: an empty queue submission (a barrier) followed by a host wait on its signal, and
//!   the same for a 64-byte `queue_alloca`.
//!
//! `cargo run --release -p halo-local --example latency -- [device-uri] [rounds]`

use halo_hal::{BufferParams, DriverRegistry, Fence, QueueAffinity, Result, Timeout};
use std::thread;
use std::time::{Duration, Instant};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let uri = args.get(1).map(String::as_str).unwrap_or("local-task");
    let rounds: u64 = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let mut registry = DriverRegistry::new();
    halo_local::register_drivers(&mut registry);
    let device = registry.create_device(uri)?;

    let (ping, pong) = (device.create_semaphore(0)?, device.create_semaphore(0)?);
    let partner = {
        let (ping, pong) = (ping.clone(), pong.clone());
        thread::spawn(move || -> Result<()> {
            for round in 1..=rounds {
                ping.wait(round, Timeout::Infinite)?;
                pong.signal(round)?;
            }
            Ok(())
        })
    };
    let mut wake = Vec::with_capacity(rounds as usize);
    for round in 1..=rounds {
        let start = Instant::now();
        ping.signal(round)?;
        pong.wait(round, Timeout::Infinite)?;
        wake.push(start.elapsed() / 2);
    }
    partner.join().expect("partner thread")?;

    let done = device.create_semaphore(0)?;
    let mut round_trip = Vec::with_capacity(rounds as usize);
    for round in 1..=rounds {
        let start = Instant::now();
        device.queue_barrier(QueueAffinity::ANY, &Fence::new(), &Fence::at(done.clone(), round))?;
        done.wait(round, Timeout::Infinite)?;
        round_trip.push(start.elapsed());
    }
    let mut alloca = Vec::with_capacity(rounds as usize);
    for round in rounds + 1..=2 * rounds {
        let start = Instant::now();
        let params = BufferParams::default();
        let buffer = device.queue_alloca(
            QueueAffinity::ANY,
            &Fence::new(),
            &Fence::at(done.clone(), round),
            params,
            64,
        )?;
        done.wait(round, Timeout::Infinite)?;
        alloca.push(start.elapsed());
        drop(buffer);
    }
    println!("device {uri}, {rounds} rounds");
    println!(
        "host signal -> waiting host thread wakes: {:.2} us",
        median(wake).as_secs_f64() * 1e6
    );
    println!(
        "empty submission round trip: {:.2} us",
        median(round_trip).as_secs_f64() * 1e6
    );
    println!(
        "queue_alloca(64) submission round trip: {:.2} us",
        median(alloca).as_secs_f64() * 1e6
    );
    Ok(())
}
