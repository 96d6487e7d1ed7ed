//! How a model is served: where it comes from, its devices, and the limits on its requests
//! (concurrency, queue, timeout, batching), checked before anything is sized by them.

use halo_hal::{Error, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Where a model comes from and how it is served.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The name clients address it by.
    pub name: String,
    /// Its version string (`"1"` unless configured).
    pub version: String,
    /// Its module files, in load order (dependencies first): `.vmfb` files, or ONNX and MLIR
    /// models compiled at load for the first device ([`crate::model_source`]).
    pub modules: Vec<PathBuf>,
    /// The exported function a request calls; `None`: the last module's one public function.
    pub function: Option<String>,
    /// Device URIs, the first the default (`local-task`).
    pub devices: Vec<String>,
    /// Requests that may run at once.
    pub max_concurrency: usize,
    /// Requests that may wait for a turn beyond those; more are refused as unavailable.
    pub max_queue: usize,
    /// How long a request may take before it is answered `DeadlineExceeded`; none when `None`.
    pub timeout: Option<Duration>,
    /// Names for the inputs, in order, instead of the compiler's (`input0`, ...); empty to keep them.
    pub input_names: Vec<String>,
    /// Names for the outputs, likewise.
    pub output_names: Vec<String>,
    /// Types of the inputs, in order (`tensor<1x3x224x224xf32>`, `f32`), for a function compiled
    /// without a declaration of them (plain `iree-compile` of an ONNX import); empty to use the
    /// declaration.
    pub input_types: Vec<String>,
    /// Types of the outputs, likewise.
    pub output_types: Vec<String>,
    /// Class label files of outputs, by output name (line i names class i), for the
    /// classification extension's answers (`0.93:281:tabby`).
    pub output_labels: BTreeMap<String, PathBuf>,
    /// Whether one call with zero inputs runs at load, before the model is ready, so the first
    /// request does not pay for the work a first call does (pools, page faults, caches).
    pub warmup: bool,
    /// Most rows along the leading batch dimension one call takes from concurrent requests
    /// ([`crate::batcher`]); 0: every request is its own call.
    pub max_batch_size: u64,
    /// How long a free computing thread of a batching model waits for requests to fill its
    /// call, from when the oldest arrived; zero: it takes what is waiting.
    pub max_queue_delay: Duration,
}

/// Most requests of one model that may run at once: each holds a computing thread.
pub const MAX_CONCURRENCY: usize = 4096;

/// Most requests of one model that may wait for a turn, so a queue's memory stays bounded.
pub const MAX_QUEUE: usize = 1 << 20;

/// Most rows a batched call may take.
pub const MAX_BATCH_SIZE: u64 = 1 << 20;

/// Longest queue delay a batching model may set.
pub const MAX_QUEUE_DELAY: Duration = Duration::from_secs(10);

impl ModelConfig {
    /// Checks the request limits before anything is sized by them.
    ///
    /// # Errors
    /// `InvalidArgument` naming the limit and its range.
    pub fn check_limits(&self) -> Result<()> {
        if !(1..=MAX_CONCURRENCY).contains(&self.max_concurrency) {
            return Err(Error::invalid_argument(format!(
                "max_concurrency {} is not from 1 to {MAX_CONCURRENCY}",
                self.max_concurrency
            )));
        }
        if self.max_queue > MAX_QUEUE {
            return Err(Error::invalid_argument(format!(
                "max_queue {} is over {MAX_QUEUE}",
                self.max_queue
            )));
        }
        if self.max_batch_size > MAX_BATCH_SIZE {
            return Err(Error::invalid_argument(format!(
                "max_batch_size {} is over {MAX_BATCH_SIZE}",
                self.max_batch_size
            )));
        }
        if self.max_queue_delay > MAX_QUEUE_DELAY {
            return Err(Error::invalid_argument(format!(
                "max_queue_delay_us {} is over {}",
                self.max_queue_delay.as_micros(),
                MAX_QUEUE_DELAY.as_micros()
            )));
        }
        if !self.max_queue_delay.is_zero() && self.max_batch_size == 0 {
            return Err(Error::invalid_argument(format!(
                "max_queue_delay_us {} needs max_batch_size: a model that does not batch has no company to wait for",
                self.max_queue_delay.as_micros()
            )));
        }
        Ok(())
    }
}
