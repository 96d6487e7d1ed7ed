//! Benchmark results printed as Google Benchmark prints them, which IREE's tools use.

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
    /// Repetition index and count.
    pub repetition: (u32, u32),
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

/// Prints `runs` in `format`.
pub fn print(format: BenchmarkFormat, runs: &[BenchmarkRun]) {
    match format {
        BenchmarkFormat::Console => print_console(runs),
        BenchmarkFormat::Json => println!("{}", serde_json::to_string_pretty(&to_json(runs)).expect("valid json")),
    }
}

fn print_console(runs: &[BenchmarkRun]) {
    let width = runs.iter().map(|r| r.name.len()).max().unwrap_or(9).max(9);
    let rule = "-".repeat(width + 52);
    println!("{rule}");
    println!(
        "{:<width$} {:>13} {:>15} {:>12} UserCounters...",
        "Benchmark", "Time", "CPU", "Iterations"
    );
    println!("{rule}");
    for run in runs {
        let counters = run
            .items_per_second
            .map(|v| format!(" items_per_second={}/s", human(v)))
            .unwrap_or_default();
        println!(
            "{:<width$} {:>13} {:>15} {:>12}{counters}",
            run.name,
            time(run.real_time_ns),
            time(run.cpu_time_ns),
            run.iterations
        );
    }
}

/// Google Benchmark's console rounding: more decimals for small values, always in nanoseconds.
fn time(ns: f64) -> String {
    if ns < 10.0 {
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

fn to_json(runs: &[BenchmarkRun]) -> serde_json::Value {
    let benchmarks: Vec<_> = runs
        .iter()
        .map(|run| {
            let mut entry = json!({
                "name": run.name,
                "family_index": 0,
                "per_family_instance_index": 0,
                "run_name": run.name,
                "run_type": "iteration",
                "repetitions": run.repetition.1,
                "repetition_index": run.repetition.0,
                "threads": 1,
                "iterations": run.iterations,
                "real_time": run.real_time_ns,
                "cpu_time": run.cpu_time_ns,
                "time_unit": "ns",
            });
            if let Some(items) = run.items_per_second {
                entry["items_per_second"] = json!(items);
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
            repetition: (0, 1),
        };
        let value = to_json(&[run]);
        let entry = &value["benchmarks"][0];
        assert_eq!(entry["real_time"], 12.5);
        assert_eq!(entry["time_unit"], "ns");
        assert_eq!(entry["run_type"], "iteration");
        assert_eq!(time(104.2), "104 ns");
        assert_eq!(time(86.44), "86.4 ns");
        assert_eq!(time(129148174.2), "129148174 ns");
        assert_eq!(human(19.1652e6), "19.1652M");
    }
}
