//! Loading the models and serving them over HTTP and gRPC until a shutdown signal, finishing
//! requests in flight.

use crate::batch_scheduling::{self, Policy};
use crate::connection_start::StartLimited;
use crate::grpc::service;
use crate::grpc_admission::Admitted;
use crate::grpc_health::{Health, Stage};
use crate::grpc_loading::LoadingInference;
use crate::http::router;
use crate::http_connections;
use crate::model::Models;
use crate::model::{Model, ModelConfig};
use crate::repository::ModelRepository;
use crate::serving::Serving;
use halo_hal::{Error, Result};
use halo_runtime::{CancelToken, Instance};
use std::future::Future;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::transport::server::TcpIncoming;

/// The largest HTTP/2 frame a gRPC client may send. HTTP/2's default, 16 KiB, cuts a tensor
/// into many frames, each read with its own system call; clients send frames up to what the
/// server announces.
const GRPC_MAX_FRAME_BYTES: u32 = 1 << 20;

/// What a server serves and its limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The models, each under its own name.
    pub models: Vec<ModelConfig>,
    /// A repository whose models load at start and on request.
    pub repository: Option<ModelRepository>,
    /// Request bodies larger than this are refused with `413`.
    pub max_request_bytes: usize,
    /// The longest pause a client may make while it sends an inference request's body (or a
    /// gRPC message); none: no limit. See [`crate::body_pause`].
    pub body_pause: Option<Duration>,
    /// Most gRPC `ModelStreamInfer` streams open at once.
    pub max_grpc_streams: usize,
}

/// A server with its models loaded.
pub struct Server {
    serving: Arc<Serving>,
    max_request_bytes: usize,
    body_pause: Option<Duration>,
    max_grpc_streams: usize,
}

impl Server {
    /// Loads every model of `config` and of its repository.
    ///
    /// # Errors
    /// `InvalidArgument` for two models of one name; loading errors, naming the model.
    pub fn load(instance: Arc<Instance>, config: ServerConfig) -> Result<Server> {
        let mut configs = config.models;
        if let Some(repository) = &config.repository {
            for name in repository.names()? {
                configs.push(repository.config(&name)?);
            }
        }
        let mut models = Models::new();
        // Ctrl-C and SIGTERM set the compile stop flag while `halo serve` loads: a module
        // initializer or a warm-up that never ends stops too, as a compile at load does.
        let stop = CancelToken::from_flag(halo_compile::stop_flag());
        for model in configs {
            let name = model.name.clone();
            if models.contains_key(&name) {
                return Err(Error::invalid_argument(format!("two models are named '{name}'")));
            }
            models.insert(name, Arc::new(Model::load_cancellable(&instance, model, &stop)?));
        }
        Ok(Server {
            serving: Arc::new(Serving::new(models, instance, config.repository)),
            max_request_bytes: config.max_request_bytes,
            body_pause: config.body_pause,
            max_grpc_streams: config.max_grpc_streams,
        })
    }

    /// The names of the models loaded.
    pub fn model_names(&self) -> Vec<String> {
        self.serving.models().keys().cloned().collect()
    }

    /// Serves HTTP, and gRPC when it has a listener, until `shutdown` completes; then finishes
    /// the requests in flight on both and returns.
    ///
    /// # Errors
    /// `Unavailable` when the runtime cannot start or a listener fails.
    pub fn serve(self, listeners: Listeners, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("halo-serve")
            .on_thread_start(|| batch_scheduling::set_current_thread(Policy::Batch))
            .build()
            .map_err(|e| Error::unavailable(format!("starting the server's runtime: {e}")))?;
        runtime.block_on(async move {
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let (health, health_service) = Health::new(Stage::Serving).await;
            let serving = self.serving.clone();
            tokio::spawn(async move {
                watch_stalls(&serving, &health, shutdown).await;
                tracing::info!("shutting down: no new connections; finishing the requests in flight");
                // A model loading through the repository API is abandoned rather than waited
                // for: the shutdown waits for its request.
                serving.shutdown.cancel();
                health.set(Stage::ShuttingDown).await;
                health.close().await;
                let _ = stop.send(true);
            });
            let http = async {
                let (listener, address) = to_tokio(listeners.http)?;
                tracing::info!(%address, "serving HTTP");
                let app = router(self.serving.clone(), self.max_request_bytes, self.body_pause);
                http_connections::serve(listener, app, self.body_pause, until_set(stopped.clone())).await;
                Ok(())
            };
            let grpc = async {
                let Some(listener) = listeners.grpc else {
                    return Ok(());
                };
                let (listener, address) = to_tokio(listener)?;
                tracing::info!(%address, "serving gRPC");
                let incoming = start_limited(listener, self.body_pause);
                tonic::transport::Server::builder()
                    .max_frame_size(Some(GRPC_MAX_FRAME_BYTES))
                    .http2_keepalive_interval(Some(GRPC_KEEPALIVE_INTERVAL))
                    .http2_keepalive_timeout(Some(GRPC_KEEPALIVE_TIMEOUT))
                    .max_concurrent_streams(Some(GRPC_MAX_STREAMS_PER_CONNECTION))
                    .add_service(health_service)
                    .add_service(Admitted::new(
                        service(self.serving.clone(), self.max_request_bytes),
                        self.serving.clone(),
                        self.body_pause,
                        self.max_grpc_streams,
                    ))
                    .serve_with_incoming_shutdown(incoming, until_set(stopped.clone()))
                    .await
                    .map_err(|e| Error::unavailable(format!("serving gRPC on {address}: {e}")))
            };
            tokio::try_join!(http, grpc).map(|_| ())
        })
    }
}

/// The connections `listener` accepts, each closed unless HTTP/2's preface arrives within `limit`.
fn start_limited(
    listener: tokio::net::TcpListener,
    limit: Option<Duration>,
) -> impl tokio_stream::Stream<Item = std::io::Result<StartLimited<tokio::net::TcpStream>>> {
    TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .map(move |io| io.map(|io| StartLimited::new(io, limit)))
}

/// Most HTTP/2 streams (calls) open at once on one gRPC connection: hyper's default, which tonic
/// would otherwise lift.
const GRPC_MAX_STREAMS_PER_CONNECTION: u32 = 200;

/// How long a gRPC connection may be silent before the server pings it, and how long it waits
/// for the answer before it closes the connection: a client that went away without closing it
/// (a network cut, a machine gone) does not keep a socket for ever.
const GRPC_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
const GRPC_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// How often the server looks for a [stalled](crate::model::Model::stalled) model.
const STALL_CHECK: Duration = Duration::from_secs(1);

/// Until `shutdown` completes, looks for a stalled model every [`STALL_CHECK`], telling the
/// gRPC health service and the log when the server stops or starts being ready for it.
async fn watch_stalls(serving: &Serving, health: &Health, shutdown: impl Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut check = tokio::time::interval(STALL_CHECK);
    let mut was_stalled = false;
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = check.tick() => {}
        }
        let stalled = serving.stalled();
        if stalled.is_some() == was_stalled {
            continue;
        }
        was_stalled = stalled.is_some();
        match stalled {
            Some(reason) => {
                tracing::warn!(%reason, "not ready");
                health.set(Stage::Stalled).await;
            }
            None => {
                tracing::info!("ready again: no model is stalled");
                health.set(Stage::Serving).await;
            }
        }
    }
}

/// Runs `load` while the listeners answer probes. Over HTTP, `GET /v2/health/live` is `200`,
/// anything else (readiness included) `503` saying the server is loading; over gRPC, the health
/// service's `live` is `SERVING` and readiness `NOT_SERVING`, `ServerLive` is true and every
/// other call `UNAVAILABLE` ([`LoadingInference`]). Loading can take minutes (a model compiled
/// at load, a large one warmed up), and a platform whose liveness probe found nothing answering
/// meanwhile would restart the server before it ever served. Connections the stand-ins have
/// accepted are answered before they hand the sockets back, for at most [`LOADING_HANDOVER`]: a
/// client that never finishes its request does not hold the start. As the server's own ports,
/// they close connections whose HTTP request head, or HTTP/2 preface, has not arrived within
/// `head_time`.
///
/// # Errors
/// `load`'s error; `Unavailable` when the stand-ins cannot start.
pub fn answer_while_loading<T>(
    listeners: &Listeners,
    head_time: Option<Duration>,
    load: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let share = |listener: &TcpListener| {
        listener
            .try_clone()
            .map_err(|e| Error::unavailable(format!("sharing a socket while loading: {e}")))
    };
    let http = share(&listeners.http)?;
    let grpc = listeners.grpc.as_ref().map(share).transpose()?;
    let (loaded, until_loaded) = tokio::sync::watch::channel(false);
    let (ended, stand_in_ended) = std::sync::mpsc::channel::<Result<()>>();
    std::thread::Builder::new()
        .name("halo-loading".into())
        .spawn(move || {
            let answered = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::unavailable(format!("starting the loading responder: {e}")))
                .and_then(|runtime| runtime.block_on(stand_ins(http, grpc, head_time, until_loaded)));
            let _ = ended.send(answered);
        })
        .map_err(|e| Error::unavailable(format!("starting the loading responder: {e}")))?;
    let result = load();
    let _ = loaded.send(true);
    match stand_in_ended.recv_timeout(LOADING_HANDOVER) {
        Ok(Err(error)) => tracing::warn!("{error}"),
        Err(_) => tracing::warn!("a request to the loading responder is still open; serving without it"),
        Ok(Ok(())) => {}
    }
    result
}

/// Answers on `http` and `grpc` as [`answer_while_loading`] says until `loaded` turns true.
async fn stand_ins(
    http: TcpListener,
    grpc: Option<TcpListener>,
    head_time: Option<Duration>,
    loaded: tokio::sync::watch::Receiver<bool>,
) -> Result<()> {
    let http = async {
        let (listener, _) = to_tokio(http)?;
        let router = crate::http::loading_router();
        http_connections::serve(listener, router, head_time, until_set(loaded.clone())).await;
        Ok(())
    };
    let grpc = async {
        let Some(listener) = grpc else {
            return Ok(());
        };
        let (listener, address) = to_tokio(listener)?;
        let (health, health_service) = Health::new(Stage::Loading).await;
        let handed_over = async {
            until_set(loaded.clone()).await;
            health.close().await;
        };
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(LoadingInference)
            .serve_with_incoming_shutdown(start_limited(listener, head_time), handed_over)
            .await
            .map_err(|e| Error::unavailable(format!("answering on {address} while loading: {e}")))
    };
    tokio::try_join!(http, grpc).map(|_| ())
}

/// Completes once `flag` is true (or its sender is gone): the end of a server or a stand-in.
async fn until_set(mut flag: tokio::sync::watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// How long the loading responder may take to answer the requests it accepted.
pub const LOADING_HANDOVER: std::time::Duration = std::time::Duration::from_secs(5);

/// The sockets a server answers on.
#[derive(Debug)]
pub struct Listeners {
    /// HTTP/REST.
    pub http: TcpListener,
    /// gRPC, if served.
    pub grpc: Option<TcpListener>,
}

fn to_tokio(listener: TcpListener) -> Result<(tokio::net::TcpListener, String)> {
    let address = listener
        .local_addr()
        .map_or_else(|_| "the listener".to_string(), |a| a.to_string());
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| Error::unavailable(format!("listening on {address}: {e}")))?;
    Ok((listener, address))
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
