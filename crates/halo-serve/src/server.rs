//! Loading the models and serving them until a shutdown signal, finishing requests in flight.

use crate::http::{router, Models};
use crate::model::{Model, ModelConfig};
use halo_hal::{Error, Result};
use halo_runtime::Instance;
use std::future::Future;
use std::net::TcpListener;
use std::sync::Arc;

/// What a server serves and its limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The models, each under its own name.
    pub models: Vec<ModelConfig>,
    /// Request bodies larger than this are refused with `413`.
    pub max_request_bytes: usize,
}

/// A server with its models loaded.
pub struct Server {
    models: Arc<Models>,
    max_request_bytes: usize,
}

impl Server {
    /// Loads every model of `config`.
    ///
    /// # Errors
    /// `InvalidArgument` for two models of one name; loading errors, naming the model.
    pub fn load(instance: &Instance, config: ServerConfig) -> Result<Server> {
        let mut models = Models::new();
        for model in config.models {
            let name = model.name.clone();
            if models.contains_key(&name) {
                return Err(Error::invalid_argument(format!("two models are named '{name}'")));
            }
            models.insert(name, Arc::new(Model::load(instance, model)?));
        }
        Ok(Server {
            models: Arc::new(models),
            max_request_bytes: config.max_request_bytes,
        })
    }

    /// Serves HTTP on `listener` until `shutdown` completes, then finishes the requests in
    /// flight and returns.
    ///
    /// # Errors
    /// `Unavailable` when the runtime cannot start or the listener fails.
    pub fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("halo-serve")
            .build()
            .map_err(|e| Error::unavailable(format!("starting the server's runtime: {e}")))?;
        let address = listener
            .local_addr()
            .map_or_else(|_| "the listener".to_string(), |a| a.to_string());
        let app = router(self.models, self.max_request_bytes);
        runtime.block_on(async move {
            let listener = listener
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(listener))
                .map_err(|e| Error::unavailable(format!("listening on {address}: {e}")))?;
            tracing::info!(%address, "serving HTTP");
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .map_err(|e| Error::unavailable(format!("serving on {address}: {e}")))
        })
    }
}

/// Completes on Ctrl-C or, on Unix, `SIGTERM` (what Kubernetes sends a pod it stops).
pub async fn termination_signal() {
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
