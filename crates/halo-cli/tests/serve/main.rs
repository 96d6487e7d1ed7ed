//! `halo serve` as its users meet it, the server started as a process and asked over HTTP and
//! gRPC: one module per topic, the server fixture (`Served`) and the helpers they share here.

use halo_hal::HostTensor;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;

mod admission;
mod batching;
mod configuration;
mod inference;
mod lifecycle;
mod repository;

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// This architecture's build of the model fixture `name` (`X.vmfb`).
fn model(name: &str) -> PathBuf {
    common::host_module(&models().join(name))
}

/// `args` with each `--module=` naming this architecture's build.
fn host_args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    args.iter()
        .map(|arg| common::host_module_arg(&models(), arg.as_ref()))
        .collect()
}

/// A `halo serve` process on a free port, stopped when dropped.
struct Served {
    child: Child,
    base: String,
    /// Where its gRPC port listens (`127.0.0.1:PORT`).
    grpc: String,
    agent: ureq::Agent,
    /// What it has written to stderr after the line saying where it listens.
    log: Arc<Mutex<String>>,
}

impl Served {
    fn start(module: &str, function: &str, extra: &[&str]) -> Served {
        let mut args = vec![format!("--module={module}"), format!("--function={function}")];
        args.extend(extra.iter().map(|a| a.to_string()));
        Served::start_with(&args)
    }

    fn start_with(args: &[String]) -> Served {
        Served::start_with_envs(args, &[])
    }

    fn start_with_envs(args: &[String], envs: &[(&str, &Path)]) -> Served {
        let mut child = common::halo_command()
            .current_dir(models())
            .args(["serve", "--http-port=0", "--grpc-port=0"])
            .args(host_args(args))
            .envs(envs.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .expect("halo serve starts");
        // Log lines may come first; the server says where it listens in its own line.
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        while !line.contains("http://") {
            line.clear();
            if stderr.read_line(&mut line).expect("a line") == 0 {
                panic!("halo serve stopped before it listened");
            }
        }
        // The log goes on; a thread keeps it so that the server never blocks on a full pipe.
        let log = Arc::new(Mutex::new(String::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).is_ok_and(|read| read > 0) {
                kept.lock().expect("the log").push_str(&std::mem::take(&mut line));
            }
        });
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("the server says where it listens: {line}"));
        let base = url.split("/v2").next().unwrap_or(url).to_string();
        let grpc = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("grpc://"))
            .unwrap_or_else(|| panic!("the server says where gRPC listens: {line}"))
            .to_string();
        // Error answers are read like any other: their bodies carry the messages under test.
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        Served {
            child,
            base,
            grpc,
            agent,
            log,
        }
    }

    fn get(&self, path: &str) -> (u16, Value) {
        answer(self.agent.get(&format!("{}{path}", self.base)).call())
    }

    fn post(&self, path: &str, body: &str) -> (u16, Value) {
        answer(
            self.agent
                .post(&format!("{}{path}", self.base))
                .content_type("application/json")
                .send(body),
        )
    }
}

/// An answer under the binary tensor data extension: its status, JSON part and binary tail.
struct BinaryAnswer {
    status: u16,
    json: Value,
    binary: Vec<u8>,
}

impl Served {
    /// Posts `json` followed by `binary`, with the extension's header giving the JSON's length.
    fn post_binary(&self, path: &str, json: &Value, binary: &[u8]) -> BinaryAnswer {
        let mut body = json.to_string().into_bytes();
        let length = body.len();
        body.extend_from_slice(binary);
        self.post_raw(path, &length.to_string(), &body)
    }

    fn post_raw(&self, path: &str, json_length: &str, body: &[u8]) -> BinaryAnswer {
        let mut response = self
            .agent
            .post(&format!("{}{path}", self.base))
            .header("Inference-Header-Content-Length", json_length)
            .content_type("application/octet-stream")
            .send(body)
            .expect("the server answers");
        let length = response
            .headers()
            .get("inference-header-content-length")
            .map(|v| v.to_str().expect("ascii").parse::<usize>().expect("a byte count"));
        let status = response.status().as_u16();
        let mut body = response.body_mut().read_to_vec().expect("a body");
        let binary = body.split_off(length.unwrap_or(body.len()));
        BinaryAnswer {
            status,
            json: serde_json::from_slice(&body).unwrap_or(Value::Null),
            binary,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn answer(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Value) {
    match result {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Err(error) => panic!("request failed: {error}"),
    }
}

/// `run-module`'s results for `flags` as host tensors, through `--output=@file.npy`.
fn run_module_results(module: &str, function: &str, inputs: &[&str], results: usize) -> Vec<HostTensor> {
    let dir = std::env::temp_dir();
    let files: Vec<PathBuf> = (0..results)
        .map(|i| dir.join(format!("halo-serve-test-{}-{function}-{i}.npy", std::process::id())))
        .collect();
    let status = common::halo_command()
        .current_dir(models())
        .args(host_args(&[
            "run-module",
            &format!("--module={module}"),
            &format!("--function={function}"),
        ]))
        .args(inputs.iter().map(|i| format!("--input={i}")))
        .args(files.iter().map(|f| format!("--output=@{}", f.display())))
        .status()
        .expect("run-module runs");
    assert!(status.success());
    files
        .iter()
        .map(|f| {
            let tensor = halo_runtime::npy::read(f).expect("run-module wrote the result");
            std::fs::remove_file(f).ok();
            tensor
        })
        .collect()
}

fn f32_data(tensor: &HostTensor) -> Vec<f32> {
    tensor
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn json_f32(data: &Value) -> Vec<f32> {
    data.as_array()
        .expect("data is an array")
        .iter()
        .map(|v| v.as_f64().expect("a number") as f32)
        .collect()
}

/// The value of the sample `series` (name and labels exactly as encoded) in metrics `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A body compressed as a client compresses it for `Content-Encoding: coding` (gzip, or zlib's
/// format for deflate).
fn compressed(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let level = flate2::Compression::default();
    let written = if coding.eq_ignore_ascii_case("deflate") {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), level);
        encoder.write_all(body).and_then(|()| encoder.finish())
    } else {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
        encoder.write_all(body).and_then(|()| encoder.finish())
    };
    written.expect("compressed in memory")
}

/// `body` decompressed from `coding` (gzip or deflate).
fn decompressed(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = match coding {
        "gzip" => flate2::read::GzDecoder::new(body).read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(body).read_to_end(&mut out),
        other => panic!("no decoder for {other}"),
    };
    read.expect("a compressed answer");
    out
}

impl Served {
    /// Posts `body` with the `Content-Encoding` and `Accept-Encoding` given: the answer's status,
    /// its `Content-Encoding` and its body as sent.
    fn post_coded(
        &self,
        path: &str,
        coding: Option<&str>,
        accept: Option<&str>,
        body: &[u8],
    ) -> (u16, Option<String>, Vec<u8>) {
        let mut request = self
            .agent
            .post(&format!("{}{path}", self.base))
            .content_type("application/json");
        if let Some(coding) = coding {
            request = request.header("Content-Encoding", coding);
        }
        if let Some(accept) = accept {
            request = request.header("Accept-Encoding", accept);
        }
        let mut response = request.send(body).expect("the server answers");
        let coding = response
            .headers()
            .get("content-encoding")
            .map(|v| v.to_str().expect("ascii").to_string());
        (
            response.status().as_u16(),
            coding,
            response.body_mut().read_to_vec().expect("a body"),
        )
    }
}

/// An infer request's head on a fresh connection, announcing `length` body bytes, and the first
/// `sent` of them.
fn partial_request(served: &Served, length: usize, sent: usize) -> std::net::TcpStream {
    use std::io::Write;
    let address = served.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("a connection");
    let head = format!(
        "POST /v2/models/tiny_add/infer HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("the head");
    stream.write_all(&vec![b' '; sent]).expect("part of the body");
    stream
}

/// The most memory the process `pid` has held, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("a size")
}

/// `halo serve` with `args` after the ports, expected to stop at start; its stderr.
fn refused_at_start(args: &[&str]) -> String {
    let output = common::halo_command()
        .current_dir(models())
        .args(["serve", "--http-port=0", "--grpc-port=0"])
        .args(host_args(args))
        .output()
        .expect("halo runs");
    assert!(!output.status.success(), "{args:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The benchmark set's test-scale MLP (`tensor<?x16xf32>` to `tensor<?x10xf32>`), this
/// architecture's build.
fn batchable_mlp() -> PathBuf {
    common::host_module(&models().join("../benchmark-models/mlp.vmfb"))
}

/// An inference request for the MLP of `rows` rows, different for each `seed`.
fn mlp_request(rows: usize, seed: usize) -> Value {
    let data: Vec<f32> = (0..rows * 16)
        .map(|i| ((i * 5 + seed * 3) % 17) as f32 / 8.0 - 1.0)
        .collect();
    json!({"inputs": [{"name": "input", "shape": [rows, 16], "datatype": "FP32", "data": data}]})
}

use tonic_health::pb::health_check_response::ServingStatus;

/// What a server's gRPC port answers about its health.
struct GrpcAnswers {
    /// Each health check's name and status (or the call's code).
    health: Vec<(&'static str, Result<ServingStatus, tonic::Code>)>,
    /// `ServerLive`'s and `ServerReady`'s answers.
    live: bool,
    ready: bool,
    /// A `ModelMetadata` call's code and message.
    metadata: (tonic::Code, String),
}

/// Asks the gRPC port at `address` for its health and the protocol's calls (metadata of a model
/// `m`, which no test serves), each within 10 s.
fn grpc_answers(address: &str) -> GrpcAnswers {
    use halo_serve::grpc::wire::grpc_inference_service_client::GrpcInferenceServiceClient;
    use halo_serve::grpc::wire::{ModelMetadataRequest, ServerLiveRequest, ServerReadyRequest};
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("a gRPC connection");
        let mut checks = HealthClient::new(channel.clone());
        let mut health = Vec::new();
        for name in ["live", "", "ready", "inference.GRPCInferenceService"] {
            let answer = checks.check(HealthCheckRequest { service: name.into() }).await;
            health.push((name, answer.map(|a| a.into_inner().status()).map_err(|s| s.code())));
        }
        let mut inference = GrpcInferenceServiceClient::new(channel);
        let live = inference
            .server_live(ServerLiveRequest {})
            .await
            .expect("ServerLive")
            .into_inner()
            .live;
        let ready = inference
            .server_ready(ServerReadyRequest {})
            .await
            .expect("ServerReady")
            .into_inner()
            .ready;
        let refused = inference
            .model_metadata(ModelMetadataRequest {
                name: "m".into(),
                version: String::new(),
            })
            .await
            .expect_err("no metadata for model 'm'");
        GrpcAnswers {
            health,
            live,
            ready,
            metadata: (refused.code(), refused.message().to_string()),
        }
    })
}

/// A `halo serve` of the repository at `root`, compiling into `root/cache` with a compiler that
/// is the shell script `compiler`; with its stderr read up to the line saying it loads, and the
/// address that answers health checks meanwhile.
fn loading_server(root: &Path, compiler: &str) -> (Stopped, BufReader<std::process::ChildStderr>, String) {
    let (child, stderr, http, _) = loading_server_with_grpc(root, compiler);
    (child, stderr, http)
}

/// [`loading_server`], with the gRPC address that answers health checks meanwhile too.
fn loading_server_with_grpc(
    root: &Path,
    compiler: &str,
) -> (Stopped, BufReader<std::process::ChildStderr>, String, String) {
    loading_server_with(root, compiler, &[])
}

/// [`loading_server_with_grpc`], with `extra` arguments for `halo serve`.
fn loading_server_with(
    root: &Path,
    compiler: &str,
    extra: &[&str],
) -> (Stopped, BufReader<std::process::ChildStderr>, String, String) {
    use std::os::unix::fs::PermissionsExt;
    let script = root.join("iree-compile");
    std::fs::write(&script, format!("#!/bin/sh\n{compiler}\n")).expect("the compiler script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Stopped(
        common::halo_command()
            .args(["serve", "--http-port=0", "--grpc-port=0"])
            .arg(format!("--model-repository={}", root.display()))
            .args(extra)
            .env("HALO_IREE_COMPILE", &script)
            .env("HALO_COMPILE_CACHE", root.join("cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("halo serve starts"),
    );
    let mut stderr = BufReader::new(child.0.stderr.take().expect("stderr"));
    let line = read_until(&mut stderr, "health checks meanwhile");
    // "...; HTTP_ADDRESS (HTTP) and GRPC_ADDRESS (gRPC) answer health checks meanwhile"
    let words: Vec<&str> = line.split("; ").nth(1).unwrap_or_default().split_whitespace().collect();
    let (Some(http), Some(grpc)) = (words.first(), words.get(3)) else {
        panic!("two addresses in: {line}");
    };
    (child, stderr, http.to_string(), grpc.to_string())
}

/// Reads `stderr` up to the line containing `needle`, which it returns.
fn read_until(stderr: &mut impl BufRead, needle: &str) -> String {
    let mut line = String::new();
    while !line.contains(needle) {
        line.clear();
        assert!(
            stderr.read_line(&mut line).expect("a line") > 0,
            "halo serve stopped: {line}"
        );
    }
    line
}

/// A process ended however the test ends, so that it holds no pipe open after a failure.
struct Stopped(Child);

impl Stopped {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.stop();
    }
}

fn repository(name: &str, models_and_configs: &[(&str, String)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("halo-serve-repository-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (model, config) in models_and_configs {
        add_model(&root, model, config);
    }
    root
}

fn add_model(root: &Path, model: &str, config: &str) {
    std::fs::create_dir_all(root.join(model)).expect("a model folder");
    std::fs::write(root.join(model).join("config.toml"), config).expect("config.toml");
}

fn adder_config() -> String {
    format!(
        "function = \"tiny_add\"\nmodules = [{:?}]\nversion = \"2\"\ninput_names = [\"a\", \"b\"]\noutput_names = [\"sum\"]\n",
        model("tiny_add.vmfb").display().to_string()
    )
}

/// The scheduling policy (`/proc/PID/task/TID/stat` field 41) of each of `pid`'s threads, by
/// thread name.
#[cfg(target_os = "linux")]
fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            let (head, tail) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_string();
            // Fields after the name start at field 3.
            let policy = tail.split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((name, policy))
        })
        .collect()
}

impl Served {
    fn terminate(&self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM was not sent");
    }

    /// The server's exit status, if it ends within `limit`.
    fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().expect("the server's status") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

/// Polls `condition` every 20 ms for up to 30 s; false if it never held.
fn within_30_s(mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !condition() {
        if start.elapsed() > Duration::from_secs(30) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A `kernel_loop` request: 1024 values each stepped `n` times.
fn kernel_loop_request(n: i64) -> String {
    json!({"inputs": [
        {"name": "input0", "shape": [1024], "datatype": "INT64", "data": vec![7i64; 1024]},
        {"name": "input1", "shape": [], "datatype": "INT64", "data": [n]},
    ]})
    .to_string()
}

/// Sends `kernel_loop` a request of `steps` that outlives its deadline (`504`), then waits for
/// the model to say it is not ready: that answer.
fn stall_kernel_loop(served: &Served, steps: i64) -> (u16, Value) {
    let (status, answer) = served.post("/v2/models/kernel_loop/infer", &kernel_loop_request(steps));
    assert_eq!(status, 504, "{answer}");
    let mut ready = (0, json!(null));
    assert!(
        within_30_s(|| {
            ready = served.get("/v2/models/kernel_loop/ready");
            ready.0 == 503
        }),
        "the model stayed ready: {ready:?}"
    );
    ready
}

/// `text` with its `%XX` escapes decoded.
fn percent_decoded(text: &str) -> String {
    let mut bytes = Vec::new();
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        let escaped = (byte == b'%')
            .then(|| tail.get(..2))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escaped {
            Some(decoded) => {
                bytes.push(decoded);
                rest = &tail[2..];
            }
            None => {
                bytes.push(byte);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What a raw gRPC call's body does after its bytes.
#[derive(PartialEq)]
enum BodyEnd {
    Ends,
    StaysOpen,
}

/// Opens a gRPC call of `method` on `address` and sends `sent` as its body, then ends the body if
/// `then` says so or keeps it open: the call's `grpc-status` and `grpc-message` if it ends within
/// `within`, else `None`.
fn raw_grpc_call(
    address: &str,
    method: &str,
    sent: &[u8],
    then: BodyEnd,
    within: Duration,
) -> Option<(String, String)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(address).await.expect("a connection");
        let (client, connection) = h2::client::handshake(tcp).await.expect("an HTTP/2 handshake");
        tokio::spawn(connection);
        let mut client = client.ready().await.expect("a stream");
        let request = http::Request::post(format!("http://{address}/inference.GRPCInferenceService/{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut body) = client.send_request(request, false).expect("the request");
        body.send_data(bytes::Bytes::copy_from_slice(sent), then == BodyEnd::Ends)
            .expect("the bytes");
        let ended = tokio::time::timeout(within, async {
            let response = response.await.expect("a response");
            // `grpc-message` is percent-encoded.
            let field = |headers: &http::HeaderMap, name: &str| {
                headers
                    .get(name)
                    .map(|v| percent_decoded(v.to_str().unwrap_or_default()))
            };
            // A call refused at once answers in its headers alone.
            if let Some(status) = field(response.headers(), "grpc-status") {
                return (status, field(response.headers(), "grpc-message").unwrap_or_default());
            }
            let mut answer = response.into_body();
            while let Some(data) = answer.data().await {
                data.expect("the answer's bytes");
            }
            let trailers = answer.trailers().await.expect("trailers").unwrap_or_default();
            (
                field(&trailers, "grpc-status").unwrap_or_default(),
                field(&trailers, "grpc-message").unwrap_or_default(),
            )
        })
        .await
        .ok();
        drop(body);
        ended
    })
}

/// Adds to `root` a model `name` whose initializer never ends: `func_util` with one byte of
/// `__init` changed into a branch back to its start.
fn add_endless_initializer(root: &Path, name: &str) {
    add_model(root, name, "function = \"status\"\n");
    let mut module = std::fs::read(models().join("../vm/func_util.vmfb")).expect("the fixture");
    assert_eq!(module[2368], 0x01, "the byte the damage is known for");
    module[2368] = 0x60;
    std::fs::write(root.join(name).join("model.vmfb"), module).expect("the damaged module");
}

/// Sends `SIGTERM` to `served` while `load`, a repository load request, cannot end by itself:
/// the server must end within 20 s, answering the load `CANCELLED`; returns that answer.
fn stop_during_load(mut served: Served, load: std::thread::JoinHandle<(u16, Value)>) -> String {
    served.terminate();
    let status = served.exit_within(Duration::from_secs(20));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the server ends within 20 s of SIGTERM"
    );
    let (code, answer) = load.join().expect("the load's answer");
    assert_eq!(code, 500, "{answer}");
    let error = answer["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("CANCELLED"), "{answer}");
    error
}
