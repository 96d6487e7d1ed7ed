//! The gRPC health checking protocol (`grpc.health.v1.Health`) beside the inference service:
//! what Kubernetes' gRPC probes and gRPC clients' own health checks call.
//!
//! Each name a check may ask for answers as one of the HTTP probes does. The server as a whole
//! (`""`), `inference.GRPCInferenceService` and `ready` are `SERVING` once every model is loaded
//! and until the shutdown starts, but while a model is stalled, as `/v2/health/ready` is 200; `live` is `SERVING` whenever the
//! port answers, while the models load too, as `/v2/health/live` is 200. Any other name is
//! `NOT_FOUND`.

use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};
use tonic_health::ServingStatus;

/// The names whose status is the server's readiness.
const READINESS_NAMES: [&str; 3] = ["", "inference.GRPCInferenceService", "ready"];

/// The name whose status is the server's liveness.
const LIVENESS_NAME: &str = "live";

/// Where the server is in its life, as the health checks tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The models are loading: live, not ready.
    Loading,
    /// Every model is loaded: live and ready.
    Serving,
    /// A model is [stalled](crate::model::Model::stalled): live, not ready until it answers again.
    Stalled,
    /// The shutdown has started: live, no longer ready.
    ShuttingDown,
}

/// The health service's statuses, set as the server moves from stage to stage.
pub struct Health {
    reporter: HealthReporter,
}

impl Health {
    /// The statuses of `stage`, and the service that answers them.
    pub async fn new(stage: Stage) -> (Health, HealthServer<HealthService>) {
        let reporter = HealthReporter::new();
        let service = HealthServer::new(HealthService::from_health_reporter(reporter.clone()));
        let health = Health { reporter };
        health.set(stage).await;
        (health, service)
    }

    /// Answers as `stage` from now on, telling every client that watches.
    pub async fn set(&self, stage: Stage) {
        let ready = if stage == Stage::Serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for name in READINESS_NAMES {
            self.reporter.set_service_status(name, ready).await;
        }
        self.reporter
            .set_service_status(LIVENESS_NAME, ServingStatus::Serving)
            .await;
    }

    /// Ends every `Watch` stream once its client has seen the last status, so that no client
    /// watching holds a graceful shutdown, which waits for the calls in flight; checks from then
    /// on are `NOT_FOUND`.
    pub async fn close(mut self) {
        for name in READINESS_NAMES.into_iter().chain([LIVENESS_NAME]) {
            self.reporter.clear_service_status(name).await;
        }
    }
}
