//! `halo benchmark-executable`: time per dispatch, measured as `iree-benchmark-executable` does.
//!
//! One reusable command buffer holds `batch_size` dispatches separated by barriers; each
//! iteration submits it and waits, so the figure includes submission overhead amortized over the
//! batch, exactly like IREE's tool.

use crate::benchmark_report::{print, BenchmarkFlags, BenchmarkRun, WorkerPool};
use crate::executable_args::ExecutableArgs;
use clap::Args;
use cpu_time::ProcessTime;
use halo_hal::{
    CommandBuffer, CommandBufferMode, CommandCategory, Device, DriverRegistry, Error, Fence, QueueAffinity, Result,
    Semaphore, Timeout,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flags of `benchmark-executable`.
#[derive(Args, Debug, Clone)]
pub struct BenchmarkArgs {
    #[command(flatten)]
    pub executable: ExecutableArgs,
    /// Dispatches per submission.
    #[arg(long = "batch_size", visible_alias = "batch-size", default_value_t = 64)]
    pub batch_size: u32,
    #[command(flatten)]
    pub benchmark: BenchmarkFlags,
}

/// When a repetition stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum MinTime {
    Seconds(f64),
    Iterations(u64),
}

pub(crate) fn parse_min_time(text: &str) -> Result<MinTime> {
    let bad = || Error::invalid_argument(format!("--benchmark_min_time={text} must be like 0.5s or 100x"));
    if let Some(count) = text.strip_suffix('x') {
        return count.parse().map(MinTime::Iterations).map_err(|_| bad());
    }
    let seconds: f64 = text.strip_suffix('s').unwrap_or(text).parse().map_err(|_| bad())?;
    if seconds.is_finite() && seconds >= 0.0 {
        Ok(MinTime::Seconds(seconds))
    } else {
        Err(bad())
    }
}

/// The largest `--batch_size`: every dispatch of a batch is recorded in one command buffer, and
/// a million of them already take hundreds of megabytes.
const MAX_BATCH_SIZE: u32 = 1 << 20;

/// Runs the benchmark and prints its report.
pub fn run(registry: &DriverRegistry, args: &BenchmarkArgs) -> Result<()> {
    let min_time = parse_min_time(&args.benchmark.min_time)?;
    if !(1..=MAX_BATCH_SIZE).contains(&args.batch_size) {
        return Err(Error::invalid_argument(format!(
            "--batch_size must be from 1 to {MAX_BATCH_SIZE}; {} was given",
            args.batch_size
        )));
    }
    let setup = args.executable.setup(registry)?;
    let command_buffer = setup.device.create_command_buffer(
        CommandBufferMode::empty(),
        CommandCategory::DISPATCH,
        QueueAffinity::ANY,
        0,
    )?;
    command_buffer.begin()?;
    for _ in 0..args.batch_size {
        command_buffer.dispatch(setup.dispatch.clone())?;
        command_buffer.execution_barrier()?;
    }
    command_buffer.end()?;
    let [x, y, z] = match setup.dispatch.workgroup_count {
        halo_hal::WorkgroupCount::Static(count) => count,
        halo_hal::WorkgroupCount::Indirect(_) => unreachable!("the CLI records static counts"),
    };
    let name = format!("BM_dispatch_{x}x{y}x{z}/process_time/real_time");
    let workgroups_per_dispatch = x as f64 * y as f64 * z as f64;
    let semaphore = setup.device.create_semaphore(0)?;
    let mut submitter = Submitter {
        device: setup.device.as_ref(),
        command_buffer,
        semaphore,
        value: 0,
    };
    submitter.submit()?;
    let mut runs = Vec::new();
    let workers = WorkerPool::of(setup.device.as_ref());
    for repetition in 0..args.benchmark.repetitions {
        let busy_before = workers.as_ref().map(WorkerPool::busy_ns);
        let (dispatches, wall, cpu) = submitter.measure(min_time, args.batch_size as u64)?;
        let worker_time = workers
            .as_ref()
            .zip(busy_before)
            .map(|(pool, before)| pool.time_since(before, dispatches, wall));
        let per_dispatch = |d: Duration| d.as_secs_f64() * 1e9 / dispatches as f64;
        runs.push(BenchmarkRun {
            name: name.clone(),
            iterations: dispatches,
            real_time_ns: per_dispatch(wall),
            cpu_time_ns: per_dispatch(cpu),
            items_per_second: Some(dispatches as f64 * workgroups_per_dispatch / wall.as_secs_f64()),
            worker_time,
            repetition: (repetition, args.benchmark.repetitions),
        });
    }
    print(args.benchmark.format, &runs)
}

struct Submitter<'a> {
    device: &'a dyn Device,
    command_buffer: Arc<CommandBuffer>,
    semaphore: Arc<dyn Semaphore>,
    value: u64,
}

impl Submitter<'_> {
    fn submit(&mut self) -> Result<()> {
        self.value += 1;
        let done = Fence::at(self.semaphore.clone(), self.value);
        self.device.queue_execute(
            QueueAffinity::ANY,
            &Fence::new(),
            &done,
            Some(&self.command_buffer),
            &[],
        )?;
        self.semaphore.wait(self.value, Timeout::Infinite)
    }

    /// Submits until `min_time` is reached; returns dispatches, wall time and process CPU time.
    fn measure(&mut self, min_time: MinTime, batch_size: u64) -> Result<(u64, Duration, Duration)> {
        let wall_start = Instant::now();
        let cpu_start = ProcessTime::now();
        let mut dispatches = 0;
        loop {
            self.submit()?;
            dispatches += batch_size;
            let done = match min_time {
                MinTime::Iterations(n) => dispatches >= n,
                MinTime::Seconds(s) => wall_start.elapsed().as_secs_f64() >= s,
            };
            if done {
                return Ok((dispatches, wall_start.elapsed(), cpu_start.elapsed()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_time_forms() {
        assert_eq!(parse_min_time("0.5s").unwrap(), MinTime::Seconds(0.5));
        assert_eq!(parse_min_time("2").unwrap(), MinTime::Seconds(2.0));
        assert_eq!(parse_min_time("100x").unwrap(), MinTime::Iterations(100));
        assert!(parse_min_time("fast").is_err());
        assert!(parse_min_time("-1").is_err());
    }
}
