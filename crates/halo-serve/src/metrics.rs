//! The server's Prometheus metrics: requests by model, protocol and outcome, latency histograms
//! (waiting for a turn, computing, end to end), requests in flight and device memory in use.

use crate::model::Models;
use halo_hal::Result;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// The API a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/REST.
    Http,
    /// gRPC.
    Grpc,
}

impl Protocol {
    fn label(self) -> String {
        match self {
            Protocol::Http => "http".into(),
            Protocol::Grpc => "grpc".into(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    model: String,
    protocol: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    model: String,
    protocol: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    model: String,
    device: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

// From 50 µs to about 3.3 minutes: tiny kernels and whole models both land inside.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(50e-6, 2.0, 22))
}

// Rows per call, 1 to 1024 in powers of two.
fn batch_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 11))
}

/// The metrics of one server, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    requests: Family<OutcomeLabels, Counter>,
    request_seconds: Histograms<RouteLabels>,
    queue_seconds: Histograms<ModelLabels>,
    compute_seconds: Histograms<ModelLabels>,
    batch_rows: Histograms<ModelLabels>,
    in_flight: Family<ModelLabels, Gauge>,
    device_memory: Family<DeviceLabels, Gauge>,
    device_held: Family<DeviceLabels, Gauge<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The model label of requests for a model the server does not have: a client's made-up names
/// must not each create a series.
pub const UNKNOWN_MODEL: &str = "_unknown";

impl Metrics {
    /// Registers every metric under the `halo` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("halo");
        let requests = Family::<OutcomeLabels, Counter>::default();
        let request_seconds = Histograms::<RouteLabels>::new_with_constructor(latency_histogram as fn() -> _);
        let queue_seconds = Histograms::<ModelLabels>::new_with_constructor(latency_histogram as fn() -> _);
        let compute_seconds = Histograms::<ModelLabels>::new_with_constructor(latency_histogram as fn() -> _);
        let batch_rows = Histograms::<ModelLabels>::new_with_constructor(batch_histogram as fn() -> _);
        let in_flight = Family::<ModelLabels, Gauge>::default();
        let device_memory = Family::<DeviceLabels, Gauge>::default();
        let device_held = Family::<DeviceLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "inference_requests",
            "Inference requests answered, by model, protocol and outcome (success or status code)",
            requests.clone(),
        );
        registry.register_with_unit(
            "inference_request",
            "Time from receiving an inference request to its answer",
            Unit::Seconds,
            request_seconds.clone(),
        );
        registry.register_with_unit(
            "inference_queue",
            "Time an admitted request waited for a turn to run",
            Unit::Seconds,
            queue_seconds.clone(),
        );
        registry.register_with_unit(
            "inference_compute",
            "Time the model's function ran, reading results back included",
            Unit::Seconds,
            compute_seconds.clone(),
        );
        registry.register(
            "inference_batch_rows",
            "Rows along the batch dimension of each call of a batching model (max_batch_size > 0): \
             requests batched together count their rows",
            batch_rows.clone(),
        );
        registry.register(
            "inference_requests_in_flight",
            "Inference requests received and not yet answered",
            in_flight.clone(),
        );
        registry.register_with_unit(
            "device_memory_in_use",
            "Bytes allocated on each device of a model",
            Unit::Bytes,
            device_memory.clone(),
        );
        registry.register_with_unit(
            "device_held",
            "How long each device of a model has been held by the same work (every worker of a \
             CPU pool, a GPU's stream), 0 while it is free; past the model's timeout it is stalled",
            Unit::Seconds,
            device_held.clone(),
        );
        Metrics {
            registry,
            requests,
            request_seconds,
            queue_seconds,
            compute_seconds,
            batch_rows,
            in_flight,
            device_memory,
            device_held,
        }
    }

    /// Runs `request` for `model` (its name, or [`UNKNOWN_MODEL`]) and counts it, its outcome
    /// and its time, and keeps it in the in-flight gauge meanwhile.
    pub async fn measure<T>(
        &self,
        model: &str,
        protocol: Protocol,
        request: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        let model_labels = ModelLabels { model: model.into() };
        let in_flight = self.in_flight.get_or_create(&model_labels).clone();
        in_flight.inc();
        let result = request.await;
        in_flight.dec();
        let outcome = match &result {
            Ok(_) => "success".to_string(),
            Err(error) => error.code().to_string().to_lowercase(),
        };
        let seconds = started.elapsed().as_secs_f64();
        tracing::debug!(model, protocol = ?protocol, %outcome, seconds, "inference request");
        let route = RouteLabels {
            model: model.into(),
            protocol: protocol.label(),
        };
        self.request_seconds.get_or_create(&route).observe(seconds);
        self.requests
            .get_or_create(&OutcomeLabels {
                model: route.model,
                protocol: route.protocol,
                outcome,
            })
            .inc();
        result
    }

    /// Records how long a request of `model` waited for its turn.
    pub fn observe_queue(&self, model: &str, waited: Duration) {
        let labels = ModelLabels { model: model.into() };
        self.queue_seconds.get_or_create(&labels).observe(waited.as_secs_f64());
    }

    /// Records how long a request of `model` computed.
    pub fn observe_compute(&self, model: &str, computed: Duration) {
        let labels = ModelLabels { model: model.into() };
        self.compute_seconds
            .get_or_create(&labels)
            .observe(computed.as_secs_f64());
    }

    /// Records the rows of a call of a batching `model`.
    pub fn observe_batch(&self, model: &str, rows: u64) {
        let labels = ModelLabels { model: model.into() };
        self.batch_rows.get_or_create(&labels).observe(rows as f64);
    }

    /// The metrics in the OpenMetrics text format, device memory and held times read from
    /// `models` now.
    pub fn encode(&self, models: &Models) -> String {
        for (name, model) in models {
            for (device, held) in model.devices_held() {
                let labels = DeviceLabels {
                    model: name.clone(),
                    device,
                };
                self.device_held.get_or_create(&labels).set(held.as_secs_f64());
            }
            for (device, bytes) in model.device_memory() {
                let labels = DeviceLabels {
                    model: name.clone(),
                    device,
                };
                self.device_memory
                    .get_or_create(&labels)
                    .set(i64::try_from(bytes).unwrap_or(i64::MAX));
            }
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// The media type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
