//! `halo serve`: a module's function, or a repository of models, served over the Open Inference
//! Protocol's HTTP/REST and gRPC APIs.

use halo_hal::{DriverRegistry, Error, Result};
use halo_serve::repository::{Defaults, ModelRepository};
use halo_serve::server::answer_while_loading;
use halo_serve::{Listeners, ModelConfig, Server, ServerConfig};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The arguments of `halo serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// A folder of model folders, each with its modules and a `config.toml`; every model in it
    /// loads at start, and the repository API loads and unloads them.
    #[arg(long, conflicts_with_all = ["modules", "function", "model_name"])]
    pub model_repository: Option<PathBuf>,
    /// The module file(s) to load, dependencies first; the model is named after the last.
    #[arg(long = "module", required_unless_present = "model_repository")]
    pub modules: Vec<PathBuf>,
    /// The function each inference request calls (default: the last module's only public one).
    #[arg(long)]
    pub function: Option<String>,
    /// The model's name (default: the last module file's stem).
    #[arg(long)]
    pub model_name: Option<String>,
    /// The model's version.
    #[arg(long, default_value = "1")]
    pub model_version: String,
    /// The type of each input, in order (`tensor<1x3x224x224xf32>`, `f32`), for a function
    /// compiled without a declaration of them; repeat for each input.
    #[arg(long = "input-type", conflicts_with = "model_repository")]
    pub input_types: Vec<String>,
    /// The type of each output, likewise (for the model's metadata).
    #[arg(long = "output-type", conflicts_with = "model_repository")]
    pub output_types: Vec<String>,
    /// `OUTPUT=FILE`: the class names of an output, one per line, for classification
    /// answers (`0.93:281:tabby`); repeat for each output that has them.
    #[arg(long = "output-labels", value_parser = output_labels, conflicts_with = "model_repository")]
    pub output_labels: Vec<(String, PathBuf)>,
    /// Device URI(s); the first is the default device.
    #[arg(long = "device", default_value = "local-task")]
    pub devices: Vec<String>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The HTTP port (0: any free port, printed at start).
    #[arg(long, default_value_t = 8000)]
    pub http_port: u16,
    /// The gRPC port (0: any free port, printed at start).
    #[arg(long, default_value_t = 8001)]
    pub grpc_port: u16,
    /// Requests per model that run at once.
    #[arg(long, default_value_t = 4)]
    pub max_concurrency: usize,
    /// Requests per model that may wait beyond those; more get `503`.
    #[arg(long, default_value_t = 64)]
    pub max_queue: usize,
    /// Milliseconds a request may take (waiting and computing) before it is answered `504` /
    /// `DEADLINE_EXCEEDED`; 0 for no limit. A request's own `timeout` parameter (µs) can shorten it.
    #[arg(long, default_value_t = 0)]
    pub request_timeout_ms: u64,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_request_bytes: usize,
    /// Milliseconds a client may pause while it sends an inference request's body (or inside
    /// one gRPC message) before the request is answered `504` / `DEADLINE_EXCEEDED` and its
    /// place goes back; 0 for no limit. A stream may pause between messages.
    #[arg(long, default_value_t = halo_serve::body_pause::DEFAULT_BODY_PAUSE.as_millis() as u64)]
    pub body_pause_ms: u64,
    /// Most gRPC `ModelStreamInfer` streams open at once; more are refused `UNAVAILABLE`. A
    /// stream between messages holds no place among the requests, only this.
    #[arg(long, default_value_t = halo_serve::grpc_admission::DEFAULT_MAX_STREAMS)]
    pub max_grpc_streams: usize,
    /// Call each model once with zero inputs when it loads, before it is ready, so the first
    /// request is as fast as the rest (a repository's `warmup` setting overrides it). Not for
    /// models that keep state between calls, nor ones with dynamic input shapes.
    #[arg(long)]
    pub warmup: bool,
    /// Batch concurrent requests of each model into one call of up to this many rows along the
    /// leading batch dimension (inputs joined, outputs split back); 0 never batches. Nothing
    /// waits for company: a call takes what is waiting when a computing thread frees. The
    /// model's inputs and outputs must all lead with a dynamic dimension (a repository's
    /// `max_batch_size` setting overrides it).
    #[arg(long, default_value_t = 0)]
    pub max_batch_size: u64,
    /// Microseconds a free computing thread of a batching model waits, from when the oldest
    /// waiting request arrived, for enough requests to fill its call (Triton's
    /// `max_queue_delay_microseconds`): more throughput under light load, for that much latency.
    /// 0 takes what is waiting at once.
    #[arg(long, default_value_t = 0)]
    pub max_queue_delay_us: u64,
    /// Writes a timeline of the server's work to this file as Chrome trace-event JSON (for
    /// `ui.perfetto.dev`), completed when the server stops: each request (`serve.request`, numbered
    /// per model), each call of a model's function (`serve.call`, with the numbers of the requests it
    /// answers: several when they were batched) and the runtime's spans within.
    #[arg(long)]
    pub trace: Option<PathBuf>,
}

/// The variable that sets which log lines `halo serve` writes to stderr, in `tracing`'s filter
/// syntax (`debug`, `halo_serve=debug`); [`DEFAULT_LOG`] when unset.
pub const LOG_VARIABLE: &str = "HALO_LOG";

/// The server's own lines at `info`, other crates' at `warn`: the runtime's `info` events
/// (semaphore signals, for traces) would flood a server's log.
pub const DEFAULT_LOG: &str = "warn,halo_serve=info";

/// Loads the model and serves it until Ctrl-C or `SIGTERM`.
pub fn run(registry: DriverRegistry, args: &ServeArgs) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env(LOG_VARIABLE)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let trace = match &args.trace {
        Some(path) => {
            halo_runtime::trace::install_with_log(filter, ansi)?;
            Some(halo_runtime::trace::Trace::start(path)?)
        }
        None => {
            // A subscriber set earlier (by an embedding program) stays.
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .try_init();
            None
        }
    };
    let served = serve(registry, args);
    // Dropped on an error too, which completes what the file holds.
    trace.map_or(Ok(()), halo_runtime::trace::Trace::finish)?;
    served
}

/// Loads the models and serves them until Ctrl-C or `SIGTERM`.
fn serve(registry: DriverRegistry, args: &ServeArgs) -> Result<()> {
    let defaults = Defaults {
        devices: args.devices.clone(),
        max_concurrency: args.max_concurrency,
        max_queue: args.max_queue,
        timeout: (args.request_timeout_ms > 0).then(|| Duration::from_millis(args.request_timeout_ms)),
        warmup: args.warmup,
        max_batch_size: args.max_batch_size,
        max_queue_delay: Duration::from_micros(args.max_queue_delay_us),
    };
    let (models, repository) = match &args.model_repository {
        Some(root) => (Vec::new(), Some(ModelRepository::open(root, defaults)?)),
        None => (vec![module_model(args, defaults)?], None),
    };
    let instance = Arc::new(halo_runtime::Instance::with_registry(registry));
    let config = ServerConfig {
        models,
        repository,
        max_request_bytes: args.max_request_bytes,
        body_pause: (args.body_pause_ms > 0).then(|| Duration::from_millis(args.body_pause_ms)),
        max_grpc_streams: args.max_grpc_streams,
    };
    let (http, http_address) = listen(&args.host, args.http_port)?;
    let (grpc, grpc_address) = listen(&args.host, args.grpc_port)?;
    eprintln!(
        "halo: loading the models; {http_address} (HTTP) and {grpc_address} (gRPC) answer health checks meanwhile"
    );
    let listeners = Listeners { http, grpc: Some(grpc) };
    // Ctrl-C or SIGTERM while loading stops a compile at load cleanly, and the server does not
    // start; once loaded, the server's own shutdown handles them.
    let actions = crate::compile::stop_on_signals()?;
    let head_time = config.body_pause;
    let server = answer_while_loading(&listeners, head_time, || Server::load(instance, config));
    for action in actions {
        signal_hook::low_level::unregister(action);
    }
    let server = server?;
    if halo_compile::stop_flag().load(std::sync::atomic::Ordering::Relaxed) {
        return Err(Error::cancelled("stopped by a signal while loading the models"));
    }
    eprintln!(
        "halo: serving {:?} on http://{http_address}/v2 and grpc://{grpc_address}",
        server.model_names()
    );
    server.serve(listeners, first_of_two_signals())
}

/// Completes on the first Ctrl-C or `SIGTERM`, which starts the graceful shutdown, and leaves a
/// task that ends the process on the second: a call that never ends (a client's program looping
/// on its input, with no request timeout) would otherwise hold that shutdown for ever, and the
/// signal handlers in place take Ctrl-C's default action away.
async fn first_of_two_signals() {
    halo_serve::server::termination_signal().await;
    eprintln!("halo: stopping once the requests in flight are answered; a second Ctrl-C or SIGTERM stops at once");
    tokio::spawn(async {
        halo_serve::server::termination_signal().await;
        eprintln!("halo: a second signal: stopped without answering the requests in flight");
        std::process::exit(1);
    });
}

/// The model `--module` (and `--function`) name.
fn module_model(args: &ServeArgs, defaults: Defaults) -> Result<ModelConfig> {
    let Some(last) = args.modules.last() else {
        return Err(Error::invalid_argument("--module or --model-repository is required"));
    };
    let name = match &args.model_name {
        Some(name) => name.clone(),
        None => last
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .ok_or_else(|| Error::invalid_argument(format!("cannot name a model after '{}'", last.display())))?,
    };
    Ok(ModelConfig {
        name,
        version: args.model_version.clone(),
        modules: args.modules.clone(),
        function: args.function.clone(),
        devices: defaults.devices,
        max_concurrency: defaults.max_concurrency,
        max_queue: defaults.max_queue,
        timeout: defaults.timeout,
        input_names: Vec::new(),
        output_names: Vec::new(),
        input_types: args.input_types.clone(),
        output_types: args.output_types.clone(),
        output_labels: args.output_labels.iter().cloned().collect(),
        warmup: defaults.warmup,
        max_batch_size: defaults.max_batch_size,
        max_queue_delay: defaults.max_queue_delay,
    })
}

/// An `--output-labels` value: `OUTPUT=FILE`.
fn output_labels(text: &str) -> std::result::Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((output, file)) if !output.is_empty() && !file.is_empty() => Ok((output.to_string(), file.into())),
        _ => Err(format!(
            "'{text}' is not OUTPUT=FILE (an output's name, then its label file)"
        )),
    }
}

fn listen(host: &str, port: u16) -> Result<(TcpListener, std::net::SocketAddr)> {
    let address = format!("{host}:{port}");
    let unavailable = |e: std::io::Error| Error::unavailable(format!("cannot listen on {address}: {e}"));
    let listener = TcpListener::bind(&address).map_err(unavailable)?;
    let bound = listener.local_addr().map_err(unavailable)?;
    Ok((listener, bound))
}
