//! `halo benchmark-module`: time per call of a module function, measured and reported as
//! `iree-benchmark-module` does (`BM_<function>/process_time/real_time`, one call per iteration,
//! the same inputs every time). On `local-task` each row also gives the workers' time per call:
//! `worker_busy` running workgroups and `worker_idle` not (workers × wall time − busy time).

use crate::benchmark_executable::{parse_min_time, MinTime};
use crate::benchmark_report::{print, BenchmarkFlags, BenchmarkRun, WorkerPool};
use crate::module_args::{ModuleArgs, Prepared};
use clap::Args;
use cpu_time::ProcessTime;
use halo_hal::{DriverRegistry, Result};
use std::time::{Duration, Instant};

/// Flags of `benchmark-module`.
#[derive(Args, Debug, Clone)]
pub struct BenchmarkModuleArgs {
    #[command(flatten)]
    pub module: ModuleArgs,
    #[command(flatten)]
    pub benchmark: BenchmarkFlags,
}

/// Runs the benchmark and prints its report.
pub fn run(registry: &DriverRegistry, args: &BenchmarkModuleArgs) -> Result<()> {
    args.module.traced(|| run_untraced(registry, args))
}

fn run_untraced(registry: &DriverRegistry, args: &BenchmarkModuleArgs) -> Result<()> {
    let min_time = parse_min_time(&args.benchmark.min_time)?;
    let prepared = args.module.prepare(registry)?;
    // One untimed call: first-call costs (lazy executable setup, page faults) are not per-call.
    call(&prepared)?;
    let name = format!("BM_{}/process_time/real_time", args.module.function);
    let mut runs = Vec::new();
    let workers = WorkerPool::of(prepared.session.device().as_ref());
    for repetition in 0..args.benchmark.repetitions {
        let busy_before = workers.as_ref().map(WorkerPool::busy_ns);
        let (calls, wall, cpu) = measure(&prepared, min_time)?;
        let per_call = |d: Duration| d.as_secs_f64() * 1e9 / calls as f64;
        let worker_time = workers
            .as_ref()
            .zip(busy_before)
            .map(|(pool, before)| pool.time_since(before, calls, wall));
        runs.push(BenchmarkRun {
            name: name.clone(),
            iterations: calls,
            real_time_ns: per_call(wall),
            cpu_time_ns: per_call(cpu),
            items_per_second: Some(calls as f64 / wall.as_secs_f64()),
            worker_time,
            repetition: (repetition, args.benchmark.repetitions),
        });
    }
    print(args.benchmark.format, &runs)
}

fn call(prepared: &Prepared) -> Result<()> {
    prepared.session.call(&prepared.function, &prepared.inputs).map(drop)
}

/// Calls until `min_time` is reached; returns calls, wall time and process CPU time.
fn measure(prepared: &Prepared, min_time: MinTime) -> Result<(u64, Duration, Duration)> {
    let wall_start = Instant::now();
    let cpu_start = ProcessTime::now();
    let mut calls = 0;
    // The clock is read after 1, 2, 3, ... calls at first, then every eighth of the calls made
    // so far: a tiny call costs less than reading the clock, and the run overshoots by at most
    // an eighth.
    let mut next_check = 1;
    loop {
        call(prepared)?;
        calls += 1;
        let done = match min_time {
            MinTime::Iterations(n) => calls >= n,
            MinTime::Seconds(_) if calls < next_check => false,
            MinTime::Seconds(s) => {
                next_check = calls + (calls / 8).max(1);
                wall_start.elapsed().as_secs_f64() >= s
            }
        };
        if done {
            return Ok((calls, wall_start.elapsed(), cpu_start.elapsed()));
        }
    }
}
