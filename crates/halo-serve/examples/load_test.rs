//! Load test for `halo serve`: many concurrent clients over HTTP/JSON, HTTP with binary tensors
//! and gRPC, against the same number of direct in-process calls of the same function; then an
//! overload past the queue limit. Prints throughput and latency percentiles as a Markdown table.
//!
//! Run through `scripts/load-test`, which builds halo in release mode first:
//!
//! ```text
//! cargo run --release -p halo-serve --example load_test -- \
//!     --halo target/release/halo --module fixtures/models/cnn.vmfb --function cnn \
//!     --input fixtures/models/cnn.basic.0.npy --clients 32 --requests 1000
//! ```
//!
//! `--direct-concurrency N` lets at most N direct calls run at once, as the server runs at most
//! `--max-concurrency` requests: for large models, many calls at once on few cores cost more CPU
//! each (their working sets evict one another), which flatters the server.
//!
//! `--max-batch-size N` starts a second server that batches requests (`halo serve
//! --max-batch-size`) and runs every path on it too, in the same rounds, reporting its
//! throughput against the server without batching, and one client's latency on both.
//!
//! `--server-core N --client-core M` keep the serving side (the server process, or the direct
//! calls with their callers) on core N and the load generator on core M, so that on a small
//! machine the clients' work is not taken from the server's.

use halo_hal::HostTensor;
use halo_serve::grpc::wire::grpc_inference_service_client::GrpcInferenceServiceClient;
use halo_serve::grpc::wire::model_infer_request::InferInputTensor;
use halo_serve::grpc::wire::ModelInferRequest;
use halo_serve::model::InputTensor;
use halo_serve::{Model, ModelConfig};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    halo: PathBuf,
    module: PathBuf,
    function: String,
    input: PathBuf,
    clients: usize,
    requests: usize,
    max_concurrency: usize,
    /// How many direct calls run at once; the others wait. `None`: every client's at once.
    direct_concurrency: Option<usize>,
    device: String,
    /// Rounds of every paired path; each round makes `requests / rounds` requests per client.
    rounds: usize,
    /// The cores for the serving side and the clients; `None`: wherever the scheduler puts them.
    cores: Option<Cores>,
    /// The protocol paths compared with the direct calls, from [`PATHS`].
    paths: Vec<String>,
    /// Rows a batching server's calls take, for a second server that batches.
    max_batch_size: Option<u64>,
}

/// Every protocol path, by the name `--paths` takes: HTTP/JSON, HTTP with binary tensors, gRPC.
const PATHS: [&str; 3] = ["json", "binary", "grpc"];

/// Where the serving side and the load generator run.
#[derive(Clone, Copy)]
struct Cores {
    server: core_affinity::CoreId,
    client: core_affinity::CoreId,
}

impl Args {
    /// The serving side's core, when cores are set.
    fn server_core(&self) -> Option<core_affinity::CoreId> {
        self.cores.map(|cores| cores.server)
    }

    /// The load generator's core, when cores are set.
    fn client_core(&self) -> Option<core_affinity::CoreId> {
        self.cores.map(|cores| cores.client)
    }
}

/// Moves the calling thread, and the threads and processes it starts from now on, to `core`;
/// with none, leaves it where it is.
fn move_to(core: Option<core_affinity::CoreId>) {
    if let Some(core) = core {
        assert!(core_affinity::set_for_current(core), "cannot move to core {}", core.id);
    }
}

fn parse_args() -> Args {
    let mut args = Args {
        halo: "target/release/halo".into(),
        module: "fixtures/models/cnn.vmfb".into(),
        function: "cnn".into(),
        input: "fixtures/models/cnn.basic.0.npy".into(),
        clients: 32,
        requests: 1000,
        max_concurrency: 2,
        direct_concurrency: None,
        device: "local-task".into(),
        rounds: 5,
        cores: None,
        paths: PATHS.map(String::from).to_vec(),
        max_batch_size: None,
    };
    let (mut server_core, mut client_core) = (None, None);
    let mut words = std::env::args().skip(1);
    while let (Some(flag), Some(value)) = (words.next(), words.next()) {
        match flag.as_str() {
            "--halo" => args.halo = value.into(),
            "--module" => args.module = value.into(),
            "--function" => args.function = value,
            "--input" => args.input = value.into(),
            "--clients" => args.clients = value.parse().expect("--clients is a number"),
            "--requests" => args.requests = value.parse().expect("--requests is a number"),
            "--max-concurrency" => args.max_concurrency = value.parse().expect("--max-concurrency is a number"),
            "--direct-concurrency" => {
                args.direct_concurrency = Some(value.parse().expect("--direct-concurrency is a number"))
            }
            "--device" => args.device = value,
            "--max-batch-size" => args.max_batch_size = Some(value.parse().expect("--max-batch-size is a number")),
            "--rounds" => args.rounds = value.parse::<usize>().expect("--rounds is a number").max(1),
            "--server-core" => server_core = Some(value.parse().expect("--server-core is a core number")),
            "--client-core" => client_core = Some(value.parse().expect("--client-core is a core number")),
            "--paths" => {
                args.paths = value.split(',').map(String::from).collect();
                for path in &args.paths {
                    assert!(
                        PATHS.contains(&path.as_str()),
                        "unknown path {path}: the paths are {PATHS:?}"
                    );
                }
            }
            other => panic!("unknown flag {other}"),
        }
    }
    args.cores = match (server_core, client_core) {
        (Some(server), Some(client)) => Some(Cores {
            server: core_affinity::CoreId { id: server },
            client: core_affinity::CoreId { id: client },
        }),
        (None, None) => None,
        _ => panic!("--server-core and --client-core go together"),
    };
    args
}

/// One phase's results: per-request latencies of the successful ones, and the failures.
struct Phase {
    name: String,
    clients: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    failures: usize,
    /// CPU time the process doing the work (the server, or this one for direct calls) spent.
    cpu: Duration,
    /// CPU time the clients (this process) spent on a server's phase: on a machine they share
    /// with the server, it is taken from the server's.
    client_cpu: Option<Duration>,
}

impl Phase {
    /// The `p` quantile of the successful requests' latencies, in milliseconds.
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted
            .get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }

    fn row(&self) -> String {
        let percentile = |p: f64| self.percentile(p);
        format!(
            "| {} | {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {} |",
            self.name,
            self.clients,
            self.latencies.len(),
            self.failures,
            self.throughput(),
            percentile(0.5),
            percentile(0.99),
            self.per_request(self.cpu) * 1e3,
            self.client_cpu
                .map_or("-".to_string(), |cpu| format!("{:.3}", self.per_request(cpu) * 1e3))
        )
    }

    fn cpu_per_request(&self) -> f64 {
        self.per_request(self.cpu)
    }

    fn per_request(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() / (self.latencies.len() + self.failures).max(1) as f64
    }

    /// The phase, with the CPU time process `pid` spent while `run` ran it, and this process's
    /// when that is another.
    fn measuring_cpu(pid: u32, run: impl FnOnce() -> Phase) -> Phase {
        let own = std::process::id();
        let (before, own_before) = (cpu_time(pid), cpu_time(own));
        let mut phase = run();
        phase.cpu = cpu_time(pid).saturating_sub(before);
        if pid != own {
            phase.client_cpu = Some(cpu_time(own).saturating_sub(own_before));
        }
        phase
    }

    fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// Adds another round of the same path.
    fn absorb(&mut self, round: Phase) {
        self.elapsed += round.elapsed;
        self.latencies.extend(round.latencies);
        self.failures += round.failures;
        self.cpu += round.cpu;
        self.client_cpu = match (self.client_cpu, round.client_cpu) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// The median of `values` (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs `clients` threads, each making `requests` calls of `call`, which says whether it succeeded.
fn run_threads(name: &str, clients: usize, requests: usize, call: impl Fn() -> bool + Sync) -> Phase {
    let started = Instant::now();
    let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| {
                    let mut latencies = Vec::with_capacity(requests);
                    let mut failures = 0;
                    for _ in 0..requests {
                        let start = Instant::now();
                        if call() {
                            latencies.push(start.elapsed());
                        } else {
                            failures += 1;
                        }
                    }
                    (latencies, failures)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a client thread"))
            .collect()
    });
    Phase {
        name: name.into(),
        clients,
        elapsed: started.elapsed(),
        failures: results.iter().map(|r| r.1).sum(),
        latencies: results.into_iter().flat_map(|r| r.0).collect(),
        cpu: Duration::ZERO,
        client_cpu: None,
    }
}

/// User and system CPU time of process `pid`, all threads, from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let ticks_per_second: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces; utime and
    // stime are the stat's 14th and 15th fields.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks: f64 = fields
        .get(11..13)
        .map_or(0.0, |t| t.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    Duration::from_secs_f64(ticks / ticks_per_second)
}

struct Server {
    child: Child,
    http: String,
    grpc: String,
}

/// The model's first input as the server describes it: the name and datatype requests use.
#[derive(Clone)]
struct InputSpec {
    name: String,
    datatype: String,
}

impl Server {
    /// Starts `halo serve`, on the server core when one is set (a child inherits the cores of
    /// the thread that starts it).
    fn start(args: &Args, extra: &[&str]) -> Server {
        move_to(args.server_core());
        let child = Command::new(&args.halo)
            .args(["serve", "--http-port=0", "--grpc-port=0", "--model-name=model"])
            .arg(format!("--module={}", args.module.display()))
            .arg(format!("--function={}", args.function))
            .arg(format!("--device={}", args.device))
            .args(extra)
            .stderr(Stdio::piped())
            .spawn();
        move_to(args.client_core());
        let mut child = child.expect("halo serve starts");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        while !line.contains("http://") {
            line.clear();
            assert!(stderr.read_line(&mut line).expect("a line") > 0, "halo serve stopped");
        }
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let address = |scheme: &str| {
            let start = line.find(scheme).expect("an address") + scheme.len();
            line[start..]
                .split(['/', ' ', '\n'])
                .next()
                .expect("host:port")
                .to_string()
        };
        Server {
            http: address("http://"),
            grpc: address("grpc://"),
            child,
        }
    }

    /// The model's first input, from its metadata.
    fn input_spec(&self) -> InputSpec {
        let url = format!("http://{}/v2/models/model", self.http);
        let metadata: serde_json::Value = ureq::get(&url)
            .call()
            .expect("the metadata answers")
            .body_mut()
            .read_json()
            .expect("the metadata is JSON");
        let text = |key: &str| {
            metadata["inputs"][0][key]
                .as_str()
                .expect("an input is described")
                .to_string()
        };
        InputSpec {
            name: text("name"),
            datatype: text("datatype"),
        }
    }

    /// Resident memory of the server process, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_body(spec: &InputSpec, input: &HostTensor) -> Vec<u8> {
    let data: Vec<serde_json::Value> = match spec.datatype.as_str() {
        "FP32" => input
            .bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).into())
            .collect(),
        "INT64" => input
            .bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")).into())
            .collect(),
        other => panic!("the JSON phase writes FP32 and INT64 inputs, not {other}"),
    };
    serde_json::json!({"inputs": [{"name": spec.name, "shape": input.shape, "datatype": spec.datatype, "data": data}]})
        .to_string()
        .into_bytes()
}

fn binary_body(spec: &InputSpec, input: &HostTensor) -> (Vec<u8>, usize) {
    let header = serde_json::json!({
        "inputs": [{"name": spec.name, "shape": input.shape, "datatype": spec.datatype,
                    "parameters": {"binary_data_size": input.bytes.len()}}],
        "parameters": {"binary_data_output": true},
    })
    .to_string();
    let length = header.len();
    ([header.as_bytes(), &input.bytes].concat(), length)
}

fn http_phase(
    name: &str,
    server: &Server,
    clients: usize,
    requests: usize,
    body: &[u8],
    json_length: Option<usize>,
) -> Phase {
    let url = format!("http://{}/v2/models/model/infer", server.http);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    run_threads(name, clients, requests, || {
        let mut request = agent.post(&url);
        if let Some(length) = json_length {
            request = request.header("Inference-Header-Content-Length", length.to_string());
        }
        match request.send(body) {
            Ok(mut response) => {
                let ok = response.status().as_u16() == 200;
                ok && response.body_mut().read_to_vec().is_ok()
            }
            Err(_) => false,
        }
    })
}

fn grpc_phase(
    name: &str,
    server: &Server,
    clients: usize,
    requests: usize,
    spec: &InputSpec,
    input: &HostTensor,
) -> Phase {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let request = ModelInferRequest {
        model_name: "model".into(),
        inputs: vec![InferInputTensor {
            name: spec.name.clone(),
            datatype: spec.datatype.clone(),
            shape: input.shape.iter().map(|&d| d as i64).collect(),
            ..Default::default()
        }],
        raw_input_contents: vec![input.bytes.clone()],
        ..Default::default()
    };
    let endpoint = format!("http://{}", server.grpc);
    runtime.block_on(async {
        let started = Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let request = request.clone();
                let endpoint = endpoint.clone();
                tokio::spawn(async move {
                    let mut client = GrpcInferenceServiceClient::connect(endpoint)
                        .await
                        .expect("connects")
                        .max_decoding_message_size(usize::MAX);
                    let mut latencies = Vec::with_capacity(requests);
                    let mut failures = 0;
                    for _ in 0..requests {
                        let start = Instant::now();
                        match client.model_infer(request.clone()).await {
                            Ok(_) => latencies.push(start.elapsed()),
                            Err(_) => failures += 1,
                        }
                    }
                    (latencies, failures)
                })
            })
            .collect();
        let mut phase = Phase {
            name: name.into(),
            clients,
            elapsed: Duration::ZERO,
            latencies: Vec::new(),
            failures: 0,
            cpu: Duration::ZERO,
            client_cpu: None,
        };
        for task in tasks {
            let (latencies, failures) = task.await.expect("a client task");
            phase.latencies.extend(latencies);
            phase.failures += failures;
        }
        phase.elapsed = started.elapsed();
        phase
    })
}

/// The model loaded in this process for direct calls; with cores set, its device's workers run
/// on the server core, as the server's would.
fn direct_model(args: &Args) -> Arc<Model> {
    let config = ModelConfig {
        name: "model".into(),
        version: "1".into(),
        modules: vec![args.module.clone()],
        function: Some(args.function.clone()),
        devices: vec![args.device.clone()],
        max_concurrency: args.max_concurrency,
        max_queue: 0,
        timeout: None,
        input_names: vec![],
        output_names: vec![],
        input_types: vec![],
        output_types: vec![],
        output_labels: Default::default(),
        warmup: false,
        max_batch_size: 0,
        max_queue_delay: Duration::ZERO,
    };
    move_to(args.server_core());
    let model = Model::load(&halo_runtime::Instance::new(), config).expect("the model loads");
    move_to(args.client_core());
    Arc::new(model)
}

/// The same calls made in this process, at most `--direct-concurrency` at once; with cores set,
/// the calling threads run on the server core too.
fn direct_phase(args: &Args, model: &Model, tensor: &InputTensor, requests: usize) -> Phase {
    move_to(args.server_core());
    let limit = args.direct_concurrency.unwrap_or(args.clients).max(1);
    let running = (std::sync::Mutex::new(0usize), std::sync::Condvar::new());
    let name = match args.direct_concurrency {
        Some(limit) => format!("direct in-process calls, {limit} at once"),
        None => "direct in-process calls".to_string(),
    };
    let phase = run_threads(&name, args.clients, requests, || {
        let (count, freed) = &running;
        let mut now = freed
            .wait_while(count.lock().expect("count"), |now| *now >= limit)
            .expect("count");
        *now += 1;
        drop(now);
        let ok = model.infer(vec![tensor.clone()]).is_ok();
        *count.lock().expect("count") -= 1;
        freed.notify_one();
        ok
    });
    move_to(args.client_core());
    phase
}

/// What the protocol paths send: the request in each encoding.
struct Bodies<'a> {
    json: &'a [u8],
    binary: &'a [u8],
    /// The JSON part's length in `binary`.
    binary_json_length: usize,
    spec: &'a InputSpec,
    input: &'a HostTensor,
}

/// One round of `path` on `server`, its name ending in `suffix`.
fn path_phase(path: &str, suffix: &str, server: &Server, clients: usize, requests: usize, bodies: &Bodies) -> Phase {
    match path {
        "json" => http_phase(
            &format!("HTTP, JSON{suffix}"),
            server,
            clients,
            requests,
            bodies.json,
            None,
        ),
        "binary" => http_phase(
            &format!("HTTP, binary tensors{suffix}"),
            server,
            clients,
            requests,
            bodies.binary,
            Some(bodies.binary_json_length),
        ),
        _ => grpc_phase(
            &format!("gRPC{suffix}"),
            server,
            clients,
            requests,
            bodies.spec,
            bodies.input,
        ),
    }
}

fn main() {
    let args = parse_args();
    move_to(args.client_core());
    let input = halo_runtime::npy::read(&args.input).expect("the input .npy reads");
    let concurrency = format!("--max-concurrency={}", args.max_concurrency);
    let queue = format!("--max-queue={}", args.clients);
    let server = Server::start(&args, &[&concurrency, &queue]);
    let batching = (args.max_batch_size).map(|rows| {
        let server = Server::start(&args, &[&concurrency, &queue, &format!("--max-batch-size={rows}")]);
        (rows, server)
    });
    let spec = server.input_spec();
    let (binary, length) = binary_body(&spec, &input);
    let json = json_body(&spec, &input);
    let (clients, requests) = (args.clients, args.requests);
    let model = direct_model(&args);
    let tensor = InputTensor {
        name: spec.name.clone(),
        datatype: spec.datatype.clone(),
        shape: input.shape.clone(),
        bytes: input.bytes.clone(),
    };
    // The paired paths take turns in rounds, each against the direct calls of its own round, so
    // that a machine whose speed drifts over minutes slows both sides of a ratio alike.
    let per_round = (requests / args.rounds).max(1);
    let own = std::process::id();
    let bodies = Bodies {
        json: &json,
        binary: &binary,
        binary_json_length: length,
        spec: &spec,
        input: &input,
    };
    // Each server, by the suffix its phases' names get.
    let mut servers = vec![("", &server)];
    let batched_name = batching
        .as_ref()
        .map(|(rows, _)| format!(", batched (max {rows} rows)"));
    if let (Some((_, batched)), Some(name)) = (&batching, &batched_name) {
        servers.push((name.as_str(), batched));
    }
    let mut totals: Vec<Phase> = Vec::new();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); args.paths.len() * servers.len()];
    let mut batch_gains: Vec<Vec<f64>> = vec![Vec::new(); args.paths.len()];
    for _ in 0..args.rounds {
        let direct = Phase::measuring_cpu(own, || direct_phase(&args, &model, &tensor, per_round));
        let mut round = vec![direct];
        for path in &args.paths {
            for (suffix, server) in &servers {
                let pid = server.child.id();
                round.push(Phase::measuring_cpu(pid, || {
                    path_phase(path, suffix, server, clients, per_round, &bodies)
                }));
            }
        }
        for (index, phase) in round[1..].iter().enumerate() {
            ratios[index].push(phase.throughput() / round[0].throughput());
        }
        if servers.len() == 2 {
            for (path, pair) in round[1..].chunks(2).enumerate() {
                batch_gains[path].push(pair[1].throughput() / pair[0].throughput());
            }
        }
        if totals.is_empty() {
            totals = round;
        } else {
            for (total, phase) in totals.iter_mut().zip(round) {
                total.absorb(phase);
            }
        }
    }
    let mut single = Vec::new();
    for (suffix, server) in &servers {
        let pid = server.child.id();
        single.push(Phase::measuring_cpu(pid, || {
            http_phase(
                &format!("HTTP, binary, 1 client{suffix}"),
                server,
                1,
                requests,
                &binary,
                Some(length),
            )
        }));
        single.push(Phase::measuring_cpu(pid, || {
            grpc_phase(&format!("gRPC, 1 client{suffix}"), server, 1, requests, &spec, &input)
        }));
    }
    let placement = match args.cores {
        Some(cores) => format!(
            "; serving side on core {}, clients on core {}",
            cores.server.id, cores.client.id
        ),
        None => String::new(),
    };
    println!(
        "model {} ({}) on {}, {} server threads computing{placement}; {} rounds; CPU ms/request is the serving process's (this one for direct calls), client CPU the load generator's",
        args.module.display(),
        args.function,
        args.device,
        args.max_concurrency,
        args.rounds
    );
    println!();
    println!("| path | clients | answered | failed | requests/s | p50 ms | p99 ms | CPU ms/request | client CPU ms/request |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for phase in totals.iter().chain(&single) {
        println!("{}", phase.row());
    }
    println!();
    for (phase, ratios) in totals[1..].iter().zip(ratios) {
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{}: {:.2}x the direct calls' throughput (median of rounds: {}); {:.2}x their CPU per request",
            phase.name,
            median(ratios),
            shown.join(", "),
            phase.cpu_per_request() / totals[0].cpu_per_request()
        );
    }
    if let Some(name) = &batched_name {
        for (path, gains) in args.paths.iter().zip(batch_gains) {
            let shown: Vec<String> = gains.iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "{path}{name}: {:.2}x the throughput without batching (median of rounds: {})",
                median(gains),
                shown.join(", ")
            );
        }
        // One client's phases: the server without batching's, then the batching one's.
        let (plain, batched) = single.split_at(single.len() / 2);
        for (plain, batched) in plain.iter().zip(batched) {
            println!(
                "{}: p50 {:.2}x, p99 {:.2}x the latency without batching",
                batched.name,
                batched.percentile(0.5) / plain.percentile(0.5),
                batched.percentile(0.99) / plain.percentile(0.99)
            );
        }
    }
    drop(batching);
    drop(server);

    // Overload: one request computes, four wait, and many more arrive.
    let server = Server::start(&args, &["--max-concurrency=1", "--max-queue=4"]);
    let before = server.rss_kib();
    let url = format!("http://{}/v2/models/model/infer", server.http);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let counts = std::sync::Mutex::new(std::collections::BTreeMap::<u16, usize>::new());
    run_threads("overload", 64, requests / 4, || {
        let status = agent
            .post(&url)
            .header("Inference-Header-Content-Length", length.to_string())
            .send(&binary[..])
            .map_or(0, |mut r| {
                let _ = r.body_mut().read_to_vec();
                r.status().as_u16()
            });
        *counts.lock().expect("counts").entry(status).or_default() += 1;
        status == 200
    });
    let after = server.rss_kib();
    println!();
    println!(
        "overload (64 clients x {}, 1 running + 4 queued): answers by status {:?} (0 = no answer); server RSS {before} KiB before, {after} KiB after",
        requests / 4,
        counts.into_inner().expect("counts")
    );
}
