//! Per-model inference statistics, as Triton's statistics extension reports them
//! (`GET /v2/models/{name}/stats`, gRPC `ModelStatistics`): counts and cumulative nanoseconds of
//! successful and failed requests, of waiting for a turn and of computing, and of the calls
//! made per batch size.

use crate::model::Model;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A count and the total time of what it counts.
#[derive(Debug, Default)]
struct DurationCounter {
    count: AtomicU64,
    ns: AtomicU64,
}

impl DurationCounter {
    fn add(&self, elapsed: Duration) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn read(&self) -> Counted {
        Counted {
            count: self.count.load(Ordering::Relaxed),
            ns: self.ns.load(Ordering::Relaxed),
        }
    }
}

/// One model's statistics since it was loaded; updated by every request, read at any time.
#[derive(Debug, Default)]
pub struct ModelStatistics {
    success: DurationCounter,
    fail: DurationCounter,
    queue: DurationCounter,
    compute_infer: DurationCounter,
    /// Rows of successful requests.
    inferences: AtomicU64,
    /// Successful calls by their rows: count and total time.
    batches: Mutex<BTreeMap<u64, Counted>>,
    last_inference_ms: AtomicU64,
}

/// A count and cumulative nanoseconds (Triton's `StatisticDuration`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counted {
    /// How many.
    pub count: u64,
    /// Their total time in nanoseconds.
    pub ns: u64,
}

/// Calls of one batch size (Triton's `InferBatchStatistics`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BatchStatistics {
    /// Rows along the batch dimension (1 for a model that does not batch).
    pub batch_size: u64,
    /// Its successful calls and their time.
    pub compute_infer: Counted,
}

/// The statistics of one model at one moment (Triton's `InferStatistics` and the counts around
/// it). The input and output copies are part of `compute_infer`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct StatisticsSnapshot {
    /// Milliseconds since the Unix epoch when the last request finished; 0 for none yet.
    pub last_inference: u64,
    /// Rows of successful requests (a request with a batch of 4 counts 4), as Triton counts.
    pub inference_count: u64,
    /// Calls of the function that succeeded: fewer than the requests when they were batched.
    pub execution_count: u64,
    /// Successful requests, from admission to the answer.
    pub success: Counted,
    /// Failed requests (busy, timed out, failed in the call).
    pub fail: Counted,
    /// Time successful requests waited for a turn.
    pub queue: Counted,
    /// Time successful requests computed.
    pub compute_infer: Counted,
    /// Successful calls by batch size, smallest first.
    pub batch_stats: Vec<BatchStatistics>,
}

impl ModelStatistics {
    /// Records the stages of a successful request of `rows` inferences: its wait for a turn and
    /// its computation.
    pub fn succeeded_in(&self, waited: Duration, computed: Duration, rows: u64) {
        self.queue.add(waited);
        self.compute_infer.add(computed);
        self.inferences.fetch_add(rows, Ordering::Relaxed);
    }

    /// Records a successful call of `batch_size` rows that took `computed`.
    pub fn executed(&self, batch_size: u64, computed: Duration) {
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let counted = batches.entry(batch_size).or_default();
        counted.count += 1;
        counted.ns = counted
            .ns
            .saturating_add(u64::try_from(computed.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records a request's end, successful or not, `elapsed` after it was admitted.
    pub fn finished(&self, succeeded: bool, elapsed: Duration) {
        if succeeded {
            self.success.add(elapsed);
        } else {
            self.fail.add(elapsed);
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        self.last_inference_ms
            .store(u64::try_from(now.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// The statistics now.
    pub fn snapshot(&self) -> StatisticsSnapshot {
        let batch_stats: Vec<BatchStatistics> = (self.batches.lock().unwrap_or_else(PoisonError::into_inner).iter())
            .map(|(&batch_size, &compute_infer)| BatchStatistics {
                batch_size,
                compute_infer,
            })
            .collect();
        StatisticsSnapshot {
            last_inference: self.last_inference_ms.load(Ordering::Relaxed),
            inference_count: self.inferences.load(Ordering::Relaxed),
            execution_count: batch_stats.iter().map(|b| b.compute_infer.count).sum(),
            batch_stats,
            success: self.success.read(),
            fail: self.fail.read(),
            queue: self.queue.read(),
            compute_infer: self.compute_infer.read(),
        }
    }
}

/// One model's entry in `GET /v2/models[/{name}]/stats` (Triton's statistics extension).
#[derive(Debug, Serialize)]
pub struct ModelStatisticsEntry {
    /// The model's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Milliseconds since the Unix epoch of its last request; 0 for none.
    pub last_inference: u64,
    /// Successful requests.
    pub inference_count: u64,
    /// Successful calls.
    pub execution_count: u64,
    /// Counts and cumulative nanoseconds by stage.
    pub inference_stats: InferenceStats,
    /// Successful calls per batch size (1 for every call of a model that does not batch).
    pub batch_stats: Vec<BatchStatisticsEntry>,
}

/// Triton's `InferStatistics`: counts and cumulative nanoseconds by stage.
#[derive(Debug, Serialize)]
pub struct InferenceStats {
    /// Successful requests.
    pub success: Counted,
    /// Failed requests.
    pub fail: Counted,
    /// Waiting for a turn.
    pub queue: Counted,
    /// Preparing inputs: part of `compute_infer` in halo.
    pub compute_input: Counted,
    /// Computing, with the input and output copies.
    pub compute_infer: Counted,
    /// Reading outputs: part of `compute_infer` in halo.
    pub compute_output: Counted,
    /// Response cache hits: halo has no response cache.
    pub cache_hit: Counted,
    /// Response cache misses.
    pub cache_miss: Counted,
}

/// Triton's `InferBatchStatistics`: calls of one batch size.
#[derive(Debug, Serialize)]
pub struct BatchStatisticsEntry {
    /// Rows per call.
    pub batch_size: u64,
    /// Preparing inputs: part of `compute_infer` in halo.
    pub compute_input: Counted,
    /// The calls and their time.
    pub compute_infer: Counted,
    /// Reading outputs: part of `compute_infer` in halo.
    pub compute_output: Counted,
}

impl ModelStatisticsEntry {
    /// The statistics of `model` now.
    pub fn of(model: &Model) -> Self {
        let now = model.statistics();
        ModelStatisticsEntry {
            name: model.config().name.clone(),
            version: model.config().version.clone(),
            last_inference: now.last_inference,
            inference_count: now.inference_count,
            execution_count: now.execution_count,
            inference_stats: InferenceStats {
                success: now.success,
                fail: now.fail,
                queue: now.queue,
                compute_input: Counted::default(),
                compute_infer: now.compute_infer,
                compute_output: Counted::default(),
                cache_hit: Counted::default(),
                cache_miss: Counted::default(),
            },
            batch_stats: (now.batch_stats.iter())
                .map(|batch| BatchStatisticsEntry {
                    batch_size: batch.batch_size,
                    compute_input: Counted::default(),
                    compute_infer: batch.compute_infer,
                    compute_output: Counted::default(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_outcome_with_their_times() {
        let statistics = ModelStatistics::default();
        assert_eq!(statistics.snapshot(), StatisticsSnapshot::default());
        statistics.succeeded_in(Duration::from_micros(5), Duration::from_micros(20), 1);
        statistics.executed(1, Duration::from_micros(20));
        statistics.finished(true, Duration::from_micros(30));
        statistics.finished(false, Duration::from_micros(7));
        let snapshot = statistics.snapshot();
        assert_eq!(snapshot.success, Counted { count: 1, ns: 30_000 });
        assert_eq!(snapshot.fail, Counted { count: 1, ns: 7_000 });
        assert_eq!(snapshot.queue, Counted { count: 1, ns: 5_000 });
        assert_eq!(snapshot.compute_infer, Counted { count: 1, ns: 20_000 });
        assert_eq!((snapshot.inference_count, snapshot.execution_count), (1, 1));
        assert_eq!(snapshot.batch_stats.len(), 1);
        assert!(
            snapshot.last_inference > 1_600_000_000_000,
            "{}",
            snapshot.last_inference
        );
    }

    #[test]
    fn batched_calls_count_once_each_and_requests_count_their_rows() {
        let statistics = ModelStatistics::default();
        // Three requests of 1, 1 and 2 rows in one call of 4 rows, then one alone.
        for rows in [1, 1, 2] {
            statistics.succeeded_in(Duration::from_micros(1), Duration::from_micros(40), rows);
        }
        statistics.executed(4, Duration::from_micros(40));
        statistics.succeeded_in(Duration::ZERO, Duration::from_micros(15), 1);
        statistics.executed(1, Duration::from_micros(15));
        let snapshot = statistics.snapshot();
        assert_eq!((snapshot.inference_count, snapshot.execution_count), (5, 2));
        assert_eq!(
            snapshot.batch_stats,
            [
                BatchStatistics {
                    batch_size: 1,
                    compute_infer: Counted { count: 1, ns: 15_000 }
                },
                BatchStatistics {
                    batch_size: 4,
                    compute_infer: Counted { count: 1, ns: 40_000 }
                }
            ]
        );
    }
}
