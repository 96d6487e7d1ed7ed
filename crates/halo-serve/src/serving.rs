//! What the HTTP and gRPC front ends share: the loaded models and the metrics of their requests.

use crate::metrics::{Metrics, Protocol, UNKNOWN_MODEL};
use crate::model::{find, Model, Models};
use halo_hal::Result;
use std::future::Future;
use std::sync::Arc;

/// The models a server answers for and its metrics.
pub struct Serving {
    /// The models, by name.
    pub models: Models,
    /// Request counts and times.
    pub metrics: Metrics,
}

impl Serving {
    /// Serves `models`, with fresh metrics.
    pub fn new(models: Models) -> Self {
        Serving {
            models,
            metrics: Metrics::new(),
        }
    }

    /// The model called `name`, at `version` when one is given.
    ///
    /// # Errors
    /// `InvalidArgument` naming the models or versions there are.
    pub fn find(&self, name: &str, version: Option<&str>) -> Result<Arc<Model>> {
        find(&self.models, name, version)
    }

    /// Finds the model and runs `request` on it, counted and timed in the metrics.
    ///
    /// # Errors
    /// Those of [`Serving::find`] and of `request`.
    pub async fn infer<T, Request>(
        &self,
        name: &str,
        version: Option<&str>,
        protocol: Protocol,
        request: impl FnOnce(Arc<Model>) -> Request,
    ) -> Result<T>
    where
        Request: Future<Output = Result<T>>,
    {
        let label = if self.models.contains_key(name) {
            name
        } else {
            UNKNOWN_MODEL
        };
        let found = self.find(name, version);
        self.metrics
            .measure(label, protocol, async move { request(found?).await })
            .await
    }
}
