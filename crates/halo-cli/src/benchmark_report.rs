//! Benchmark results printed as Google Benchmark prints them, which IREE's tools use.

use crate::output::outln;
use halo_hal::{Device, Result};
use halo_local::task::WORKERS_QUERY_CATEGORY;
use serde_json::json;

/// One measured run.
#[derive(Debug, Clone)]
pub struct BenchmarkRun {
    /// Benchmark name, e.g. `BM_dispatch_2x1x1/process_time/real_time`.
    pub name: String,
    /// Iterations counted (dispatches for executables).
    pub iterations: u64,
    /// Wall time per iteration in nanoseconds.
    pub real_time_ns: f64,
    /// Process CPU time per iteration in nanoseconds.
    pub cpu_time_ns: f64,
    /// Items processed per second of wall time, if counted.
    pub items_per_second: Option<f64>,
    /// Worker time per iteration, on devices with a worker pool that counts it.
    pub worker_time: Option<WorkerTime>,
    /// Repetition index and count.
    pub repetition: (u32, u32),
}

/// How a device's workers spent an iteration, summed over workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerTime {
    /// Nanoseconds running commands (workgroups and transfers).
    pub busy_ns: f64,
    /// Nanoseconds not running commands: workers × wall time − busy time.
    pub idle_ns: f64,
}

/// A device's worker pool, when it has one that counts its busy time (`local-task`).
pub struct WorkerPool<'a> {
    device: &'a dyn Device,
    count: u64,
}

impl<'a> WorkerPool<'a> {
    /// The pool of `device`, if it answers the `halo.workers` queries.
    pub fn of(device: &'a dyn Device) -> Option<WorkerPool<'a>> {
        let count = device.query_i64(WORKERS_QUERY_CATEGORY, "count").ok()?;
        device.query_i64(WORKERS_QUERY_CATEGORY, "busy_ns").ok()?;
        Some(WorkerPool {
            device,
            count: u64::try_from(count).ok()?,
        })
    }

    /// Nanoseconds the workers have run workgroups so far, summed over workers.
    pub fn busy_ns(&self) -> u64 {
        let busy = self.device.query_i64(WORKERS_QUERY_CATEGORY, "busy_ns");
        busy.ok().and_then(|ns| u64::try_from(ns).ok()).unwrap_or(0)
    }

    /// The workers' time per iteration over `iterations` that took `wall`, counted from a
    /// [`WorkerPool::busy_ns`] of `before`.
    pub fn time_since(&self, before: u64, iterations: u64, wall: std::time::Duration) -> WorkerTime {
        let iterations = iterations.max(1) as f64;
        let busy_ns = self.busy_ns().saturating_sub(before) as f64 / iterations;
        WorkerTime {
            busy_ns,
            idle_ns: self.count as f64 * wall.as_secs_f64() * 1e9 / iterations - busy_ns,
        }
    }
}

/// Google Benchmark's flags, shared by the benchmark commands.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchmarkFlags {
    /// Minimum measured time per repetition: seconds (`0.5`, `0.5s`) or an iteration count (`100x`).
    #[arg(
        long = "benchmark_min_time",
        visible_alias = "benchmark-min-time",
        default_value = "0.5s"
    )]
    pub min_time: String,
    /// Repetitions of the measurement.
    #[arg(
        long = "benchmark_repetitions",
        visible_alias = "benchmark-repetitions",
        default_value_t = 1
    )]
    pub repetitions: u32,
    /// Output format.
    #[arg(
        long = "benchmark_format",
        visible_alias = "benchmark-format",
        value_enum,
        default_value = "console"
    )]
    pub format: BenchmarkFormat,
}

/// Output format chosen with `--benchmark_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchmarkFormat {
    /// The human-readable table.
    Console,
    /// Google Benchmark's JSON.
    Json,
}

/// A statistic over a benchmark's repetitions, appended after them as Google Benchmark does
/// when `--benchmark_repetitions` is above 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Mean,
    Median,
    Stddev,
    /// Coefficient of variation: stddev / mean, a fraction printed as a percentage.
    Cv,
}

impl Aggregate {
    const ALL: [Aggregate; 4] = [Aggregate::Mean, Aggregate::Median, Aggregate::Stddev, Aggregate::Cv];

    fn name(self) -> &'static str {
        match self {
            Aggregate::Mean => "mean",
            Aggregate::Median => "median",
            Aggregate::Stddev => "stddev",
            Aggregate::Cv => "cv",
        }
    }

    fn of(self, values: &[f64]) -> f64 {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let stddev = || {
            if values.len() < 2 {
                return 0.0;
            }
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        };
        match self {
            Aggregate::Mean => mean,
            Aggregate::Median => {
                let mut sorted = values.to_vec();
                sorted.sort_by(f64::total_cmp);
                let mid = sorted.len() / 2;
                if sorted.len().is_multiple_of(2) {
                    (sorted[mid - 1] + sorted[mid]) / 2.0
                } else {
                    sorted[mid]
                }
            }
            Aggregate::Stddev => stddev(),
            Aggregate::Cv if mean == 0.0 => 0.0,
            Aggregate::Cv => stddev() / mean,
        }
    }
}

/// One printed row: a measured run, or an aggregate of the runs before it (whose `run.name` is
/// the runs' name).
struct Row {
    run: BenchmarkRun,
    aggregate: Option<Aggregate>,
}

impl Row {
    /// The printed name: an aggregate's ends in `_mean`, `_median`, ...
    fn name(&self) -> String {
        match self.aggregate {
            Some(aggregate) => format!("{}_{}", self.run.name, aggregate.name()),
            None => self.run.name.clone(),
        }
    }
}

/// The runs followed, when there are several repetitions, by their aggregates.
fn rows(runs: &[BenchmarkRun]) -> Vec<Row> {
    let mut rows: Vec<Row> = runs
        .iter()
        .map(|run| Row {
            run: run.clone(),
            aggregate: None,
        })
        .collect();
    if runs.len() < 2 {
        return rows;
    }
    let column = |f: fn(&BenchmarkRun) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    let (real, cpu) = (column(|r| r.real_time_ns), column(|r| r.cpu_time_ns));
    let items: Option<Vec<f64>> = runs.iter().map(|r| r.items_per_second).collect();
    let workers: Option<Vec<WorkerTime>> = runs.iter().map(|r| r.worker_time).collect();
    for aggregate in Aggregate::ALL {
        rows.push(Row {
            run: BenchmarkRun {
                name: runs[0].name.clone(),
                iterations: runs.len() as u64,
                real_time_ns: aggregate.of(&real),
                cpu_time_ns: aggregate.of(&cpu),
                items_per_second: items.as_deref().map(|items| aggregate.of(items)),
                worker_time: workers.as_deref().map(|times| WorkerTime {
                    busy_ns: aggregate.of(&times.iter().map(|t| t.busy_ns).collect::<Vec<_>>()),
                    idle_ns: aggregate.of(&times.iter().map(|t| t.idle_ns).collect::<Vec<_>>()),
                }),
                repetition: runs[0].repetition,
            },
            aggregate: Some(aggregate),
        });
    }
    rows
}

/// Prints `runs` in `format`, with aggregates when there are several repetitions.
pub fn print(format: BenchmarkFormat, runs: &[BenchmarkRun]) -> Result<()> {
    let rows = rows(runs);
    match format {
        BenchmarkFormat::Console => print_console(&rows),
        BenchmarkFormat::Json => outln!("{}", serde_json::to_string_pretty(&to_json(&rows)).expect("valid json")),
    }
}

fn print_console(rows: &[Row]) -> Result<()> {
    let width = rows.iter().map(|r| r.name().len()).max().unwrap_or(9).max(9);
    let rule = "-".repeat(width + 52);
    outln!("{rule}")?;
    outln!(
        "{:<width$} {:>13} {:>15} {:>12} UserCounters...",
        "Benchmark",
        "Time",
        "CPU",
        "Iterations"
    )?;
    outln!("{rule}")?;
    for row in rows {
        let Row { run, aggregate } = row;
        let percent = *aggregate == Some(Aggregate::Cv);
        let mut counters = run
            .items_per_second
            .map(|v| match percent {
                true => format!(" items_per_second={:.2}%", v * 100.0),
                false => format!(" items_per_second={}/s", human(v)),
            })
            .unwrap_or_default();
        if let Some(workers) = run.worker_time {
            for (name, ns) in [("worker_busy", workers.busy_ns), ("worker_idle", workers.idle_ns)] {
                counters += &match percent {
                    true => format!(" {name}={:.2}%", ns * 100.0),
                    false => format!(" {name}={:.3}ms", ns / 1e6),
                };
            }
        }
        let shown = |ns: f64| match percent {
            true => format!("{:.2} %", ns * 100.0),
            false => time(ns),
        };
        outln!(
            "{:<width$} {:>13} {:>15} {:>12}{counters}",
            row.name(),
            shown(run.real_time_ns),
            shown(run.cpu_time_ns),
            run.iterations
        )?;
    }
    Ok(())
}

/// Google Benchmark's console rounding: more decimals for small values, always in nanoseconds.
fn time(ns: f64) -> String {
    if ns < 1.0 {
        format!("{ns:.3} ns")
    } else if ns < 10.0 {
        format!("{ns:.2} ns")
    } else if ns < 100.0 {
        format!("{ns:.1} ns")
    } else {
        format!("{ns:.0} ns")
    }
}

fn human(value: f64) -> String {
    for (scale, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if value >= scale {
            return format!("{:.4}{suffix}", value / scale);
        }
    }
    format!("{value:.4}")
}

fn to_json(rows: &[Row]) -> serde_json::Value {
    let benchmarks: Vec<_> = rows
        .iter()
        .map(|row| {
            let Row { run, aggregate } = row;
            let mut entry = json!({
                "name": row.name(),
                "family_index": 0,
                "per_family_instance_index": 0,
                "run_name": run.name,
                "run_type": if aggregate.is_some() { "aggregate" } else { "iteration" },
                "repetitions": run.repetition.1,
                "threads": 1,
                "iterations": run.iterations,
                "real_time": run.real_time_ns,
                "cpu_time": run.cpu_time_ns,
                "time_unit": "ns",
            });
            match aggregate {
                None => entry["repetition_index"] = json!(run.repetition.0),
                Some(a) => {
                    entry["aggregate_name"] = json!(a.name());
                    entry["aggregate_unit"] = json!(if *a == Aggregate::Cv { "percentage" } else { "time" });
                }
            }
            if let Some(items) = run.items_per_second {
                entry["items_per_second"] = json!(items);
            }
            if let Some(workers) = run.worker_time {
                entry["worker_busy_ns"] = json!(workers.busy_ns);
                entry["worker_idle_ns"] = json!(workers.idle_ns);
            }
            entry
        })
        .collect();
    json!({
        "context": {
            "executable": std::env::args().next().unwrap_or_default(),
            "num_cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "library_version": concat!("halo ", env!("CARGO_PKG_VERSION")),
            "json_schema_version": 1,
        },
        "benchmarks": benchmarks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_google_benchmark_fields() {
        let run = BenchmarkRun {
            name: "BM_dispatch_1x1x1/process_time/real_time".into(),
            iterations: 10,
            real_time_ns: 12.5,
            cpu_time_ns: 11.0,
            items_per_second: Some(8e7),
            worker_time: Some(WorkerTime {
                busy_ns: 20.0,
                idle_ns: 5.0,
            }),
            repetition: (0, 1),
        };
        let value = to_json(&rows(&[run]));
        let entry = &value["benchmarks"][0];
        assert_eq!(entry["real_time"], 12.5);
        assert_eq!(entry["time_unit"], "ns");
        assert_eq!(
            (entry["worker_busy_ns"].as_f64(), entry["worker_idle_ns"].as_f64()),
            (Some(20.0), Some(5.0))
        );
        assert_eq!(entry["run_type"], "iteration");
        assert_eq!(value["benchmarks"].as_array().map(Vec::len), Some(1));
        assert_eq!(time(104.2), "104 ns");
        assert_eq!(time(86.44), "86.4 ns");
        assert_eq!(time(129148174.2), "129148174 ns");
        assert_eq!(time(0.0951), "0.095 ns");
        assert_eq!(human(19.1652e6), "19.1652M");
    }

    #[test]
    fn repetitions_are_followed_by_mean_median_stddev_and_cv() {
        let run = |rep: u32, real: f64| BenchmarkRun {
            name: "BM_f/process_time/real_time".into(),
            iterations: 5,
            real_time_ns: real,
            cpu_time_ns: real,
            items_per_second: Some(1e9 / real),
            worker_time: Some(WorkerTime {
                busy_ns: real,
                idle_ns: 1.0,
            }),
            repetition: (rep, 3),
        };
        let value = to_json(&rows(&[run(0, 10.0), run(1, 30.0), run(2, 14.0)]));
        let rows = value["benchmarks"].as_array().expect("array");
        let names: Vec<_> = rows.iter().map(|r| r["name"].as_str().unwrap_or_default()).collect();
        assert_eq!(
            names[3..],
            [
                "BM_f/process_time/real_time_mean",
                "BM_f/process_time/real_time_median",
                "BM_f/process_time/real_time_stddev",
                "BM_f/process_time/real_time_cv"
            ]
        );
        assert_eq!(rows[3]["real_time"], 18.0);
        assert_eq!(rows[4]["real_time"], 14.0);
        // Sample standard deviation of 10, 30, 14: sqrt((64 + 144 + 16) / 2).
        assert!((rows[5]["real_time"].as_f64().unwrap_or_default() - 224f64.sqrt() / 2f64.sqrt()).abs() < 1e-9);
        assert_eq!(rows[6]["aggregate_unit"], "percentage");
        assert_eq!(rows[6]["run_name"], "BM_f/process_time/real_time");
        assert_eq!(rows[4]["iterations"], 3);
        assert_eq!(rows[4]["worker_busy_ns"], 14.0);
        assert_eq!(rows[3]["worker_idle_ns"], 1.0);
    }
}
