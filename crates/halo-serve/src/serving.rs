//! What the HTTP and gRPC front ends share: the loaded models, where more come from, and the
//! metrics of their requests.

use crate::batch_scheduling::{self, Policy};
use crate::metrics::{Metrics, Protocol, UNKNOWN_MODEL};
use crate::model::{find, Model, Models};
use crate::repository::ModelRepository;
use crate::shared_memory::SharedMemory;
use halo_hal::{Error, Result};
use halo_runtime::{CancelToken, Instance};
use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};

/// The models a server answers for, how to load more, and its metrics.
pub struct Serving {
    models: RwLock<Arc<Models>>,
    instance: Arc<Instance>,
    repository: Option<ModelRepository>,
    /// Request counts and times.
    pub metrics: Metrics,
    /// The shared memory regions clients registered.
    pub shared_memory: SharedMemory,
    /// Cancelled when the server shuts down: a model loading through the repository API then
    /// stops at its next step rather than holding the shutdown, which waits for its request.
    pub shutdown: CancelToken,
}

/// A model's place in the repository index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// Its name.
    pub name: String,
    /// Its version when it is loaded and answering; `None` when it is only in the repository.
    pub version: Option<String>,
}

impl IndexEntry {
    /// Whether it is loaded and answering.
    pub fn ready(&self) -> bool {
        self.version.is_some()
    }
}

impl Serving {
    /// Serves `models`, loading more from `repository` (if any) on `instance`'s drivers.
    pub fn new(models: Models, instance: Arc<Instance>, repository: Option<ModelRepository>) -> Self {
        Serving {
            models: RwLock::new(Arc::new(models)),
            instance,
            repository,
            metrics: Metrics::new(),
            shared_memory: SharedMemory::default(),
            shutdown: CancelToken::new(),
        }
    }

    /// The models loaded now. Requests hold the snapshot they started with, so unloading a
    /// model lets the requests in flight on it finish.
    pub fn models(&self) -> Arc<Models> {
        self.models.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The model called `name`, at `version` when one is given.
    ///
    /// # Errors
    /// `InvalidArgument` naming the models or versions there are.
    pub fn find(&self, name: &str, version: Option<&str>) -> Result<Arc<Model>> {
        find(&self.models(), name, version)
    }

    /// Why the server cannot answer every model now, if it cannot: the first
    /// [stalled](Model::stalled) model's reason.
    pub fn stalled(&self) -> Option<String> {
        self.models().values().find_map(|model| model.stalled())
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
        let models = self.models();
        let label = if models.contains_key(name) { name } else { UNKNOWN_MODEL };
        let found = find(&models, name, version);
        self.metrics
            .measure(label, protocol, async move { request(found?).await })
            .await
    }

    /// Loads model `name` from the repository (again, if it is loaded: its configuration and
    /// modules are read anew), on a blocking thread; the old one answers until the new is ready.
    ///
    /// # Errors
    /// `FailedPrecondition` without a repository; the repository's and loading errors.
    pub async fn load(self: &Arc<Self>, name: &str) -> Result<()> {
        let repository = self.repository.as_ref().ok_or_else(|| {
            Error::failed_precondition("this server has no model repository to load from (--model-repository)")
        })?;
        let config = repository.config(name)?;
        let serving = self.clone();
        tracing::info!(model = name, "loading");
        let model = tokio::task::spawn_blocking(move || {
            // The devices' own threads take the policy of the thread that makes them: the
            // default, as for the models loaded at start.
            batch_scheduling::set_current_thread(Policy::Normal);
            Model::load_cancellable(&serving.instance, config, &serving.shutdown)
        })
        .await
        .map_err(|e| Error::internal(format!("loading model '{name}' failed: {e}")))??;
        self.change(|models| {
            models.insert(name.to_string(), Arc::new(model));
        });
        tracing::info!(model = name, "loaded");
        Ok(())
    }

    /// Stops serving model `name`; requests in flight on it finish.
    ///
    /// # Errors
    /// `InvalidArgument` when no model of that name is loaded.
    pub fn unload(&self, name: &str) -> Result<()> {
        let mut removed = false;
        self.change(|models| removed = models.remove(name).is_some());
        if !removed {
            return Err(Error::invalid_argument(format!("no model '{name}' is loaded")));
        }
        tracing::info!(model = name, "unloaded");
        Ok(())
    }

    /// Every model loaded or in the repository, by name.
    ///
    /// # Errors
    /// The repository cannot be read.
    pub fn index(&self) -> Result<Vec<IndexEntry>> {
        let models = self.models();
        let mut names: Vec<String> = models.keys().cloned().collect();
        if let Some(repository) = &self.repository {
            names.extend(repository.names()?);
        }
        names.sort();
        names.dedup();
        Ok(names
            .into_iter()
            .map(|name| IndexEntry {
                version: models.get(&name).map(|m| m.config().version.clone()),
                name,
            })
            .collect())
    }

    fn change(&self, edit: impl FnOnce(&mut Models)) {
        let mut models = self.models.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = Models::clone(&models);
        edit(&mut next);
        *models = Arc::new(next);
    }
}
