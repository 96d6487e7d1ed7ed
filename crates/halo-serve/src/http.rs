//! The protocol's HTTP/REST endpoints (`/v2/...`) over the loaded models.

use crate::body_pause::{BodyStalled, PaceLimited, Paced};
use crate::inference_tensors::{decode_inputs, encode_outputs};
use crate::metrics::{Protocol, CONTENT_TYPE};
use crate::model::{Admission, Model};
use crate::model_configuration::ModelConfiguration;
use crate::protocol::{ErrorBody, InferRequest, InferResponse, ModelMetadata, ServerMetadata};
use crate::serving::Serving;
use crate::shared_memory::RegionStatus;
use crate::statistics::ModelStatisticsEntry;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Extension, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use halo_hal::{Error, StatusCode as Status};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::decompression::RequestDecompressionLayer;

/// An error answer: the protocol's `{"error": ...}` body with an HTTP status.
struct Failure(Error);

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure(error)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = match self.0.code() {
            Status::InvalidArgument | Status::NotFound | Status::OutOfRange | Status::FailedPrecondition => {
                StatusCode::BAD_REQUEST
            }
            Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Status::ResourceExhausted => StatusCode::PAYLOAD_TOO_LARGE,
            Status::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Status::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status.is_server_error() {
            tracing::warn!(error = %self.0, "request failed");
        }
        (
            status,
            Json(ErrorBody {
                error: self.0.to_string(),
            }),
        )
            .into_response()
    }
}

type Answer<T> = Result<T, Failure>;

/// The router that answers while the models load ([`crate::server::answer_while_loading`]):
/// live, and not ready.
pub fn loading_router() -> Router {
    let loading = || async {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": "the server is loading its models"})),
        )
    };
    Router::new()
        .route("/v2/health/live", get(|| async { Json(json!({"live": true})) }))
        .route("/v2/health/ready", get(loading))
        .fallback(loading)
}

/// The router for `serving`'s models, refusing request bodies over `max_request_bytes` and
/// inference request bodies whose sender pauses longer than `body_pause` (if any).
pub fn router(serving: Arc<Serving>, max_request_bytes: usize, body_pause: Option<Duration>) -> Router {
    Router::new()
        .route("/v2/health/live", get(|| async { Json(json!({"live": true})) }))
        .route("/v2/health/ready", get(server_ready))
        .route("/v2", get(server_metadata))
        .route("/v2/models/{name}", get(model_metadata))
        .route("/v2/models/{name}/versions/{version}", get(model_metadata))
        .route("/v2/models/{name}/ready", get(model_ready))
        .route("/v2/models/{name}/config", get(model_config))
        .route("/v2/models/{name}/versions/{version}/config", get(model_config))
        .route("/v2/models/stats", get(all_statistics))
        .route("/v2/models/{name}/stats", get(model_statistics))
        .route("/v2/models/{name}/versions/{version}/stats", get(model_statistics))
        .route("/v2/models/{name}/versions/{version}/ready", get(model_ready))
        .route("/v2/models/{name}/infer", post(infer))
        .route("/v2/models/{name}/versions/{version}/infer", post(infer))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .layer(Extension(BodyLimits {
            max_bytes: max_request_bytes,
            pause: body_pause,
        }))
        .route("/v2/repository/index", post(repository_index))
        .route("/v2/repository/models/{name}/load", post(load_model))
        .route("/v2/repository/models/{name}/unload", post(unload_model))
        .route("/v2/systemsharedmemory/status", get(shared_memory_status))
        .route(
            "/v2/systemsharedmemory/region/{region}/status",
            get(shared_memory_status),
        )
        .route(
            "/v2/systemsharedmemory/region/{region}/register",
            post(register_shared_memory),
        )
        .route(
            "/v2/systemsharedmemory/region/{region}/unregister",
            post(unregister_shared_memory),
        )
        .route("/v2/systemsharedmemory/unregister", post(unregister_shared_memory))
        .route("/metrics", get(metrics))
        .layer(RequestDecompressionLayer::new())
        .layer(axum::middleware::from_fn(move |request, next| {
            read_coding(request, next, max_request_bytes)
        }))
        .layer(CompressionLayer::new().quality(CompressionLevel::Fastest))
        .with_state(serving)
}

/// A compression a request body may come in (its `Content-Encoding`), which the decompression
/// layer takes off as the body is read.
#[derive(Debug, Clone, Copy)]
enum BodyCoding {
    Gzip,
    Deflate,
}

impl BodyCoding {
    fn name(self) -> &'static str {
        match self {
            BodyCoding::Gzip => "gzip",
            BodyCoding::Deflate => "deflate",
        }
    }
}

/// Names a request body's coding for the decompression layer in its own spelling (codings are
/// case-insensitive) and for the handlers, which name it when the body does not decompress;
/// a coding this server cannot read is refused, its body read and dropped first as for every
/// refusal ([`discard`]).
async fn read_coding(mut request: Request, next: Next, limit: usize) -> Response {
    let Some(value) = request.headers().get(header::CONTENT_ENCODING) else {
        return next.run(request).await;
    };
    let coding = match value.to_str().map(|text| text.trim().to_ascii_lowercase()).as_deref() {
        Ok("identity") => None,
        Ok("gzip" | "x-gzip") => Some(BodyCoding::Gzip),
        Ok("deflate") => Some(BodyCoding::Deflate),
        _ => {
            let value = value.clone();
            discard(request.into_body(), limit).await;
            return Failure(Error::invalid_argument(format!(
                "the request body's Content-Encoding {value:?} is not one this server reads: gzip, deflate or identity"
            )))
            .into_response();
        }
    };
    let headers = request.headers_mut();
    headers.remove(header::CONTENT_ENCODING);
    if let Some(coding) = coding {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
        request.extensions_mut().insert(coding);
    }
    next.run(request).await
}

/// The repository extension's index: every model loaded or loadable, with its state.
async fn repository_index(State(serving): State<Arc<Serving>>, body: Bytes) -> Answer<Json<Vec<serde_json::Value>>> {
    #[derive(serde::Deserialize, Default)]
    struct IndexRequest {
        #[serde(default)]
        ready: bool,
    }
    let request: IndexRequest = optional_json(&body, "the index request")?;
    let entries = serving.index()?;
    Ok(Json(
        entries
            .into_iter()
            .filter(|entry| entry.ready() || !request.ready)
            .map(|entry| match entry.version {
                Some(version) => json!({"name": entry.name, "version": version, "state": "READY"}),
                None => json!({"name": entry.name, "state": "UNAVAILABLE"}),
            })
            .collect(),
    ))
}

/// A repository request's JSON body, which the extension lets a client leave out.
fn optional_json<T: serde::de::DeserializeOwned + Default>(body: &[u8], what: &str) -> halo_hal::Result<T> {
    if body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| Error::invalid_argument(format!("{what} is not valid: {e}")))
}

async fn load_model(
    State(serving): State<Arc<Serving>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Answer<Json<serde_json::Value>> {
    #[derive(serde::Deserialize, Default)]
    struct LoadRequest {
        #[serde(default)]
        parameters: serde_json::Map<String, serde_json::Value>,
    }
    let request: LoadRequest = optional_json(&body, &format!("the load request for '{name}'"))?;
    crate::protocol::refuse_load_parameters(request.parameters.keys())?;
    serving.load(&name).await?;
    Ok(Json(json!({})))
}

async fn unload_model(
    State(serving): State<Arc<Serving>>,
    Path(name): Path<String>,
) -> Answer<Json<serde_json::Value>> {
    serving.unload(&name)?;
    Ok(Json(json!({})))
}

/// `/v2/systemsharedmemory[/region/{region}]/...`.
#[derive(serde::Deserialize)]
struct RegionPath {
    region: Option<String>,
}

async fn shared_memory_status(
    State(serving): State<Arc<Serving>>,
    Path(path): Path<RegionPath>,
) -> Answer<Json<Vec<RegionStatus>>> {
    Ok(Json(serving.shared_memory.status(path.region.as_deref())?))
}

async fn register_shared_memory(
    State(serving): State<Arc<Serving>>,
    Path(region): Path<String>,
    body: Bytes,
) -> Answer<Json<serde_json::Value>> {
    #[derive(serde::Deserialize)]
    struct Register {
        key: String,
        #[serde(default)]
        offset: u64,
        byte_size: u64,
    }
    let request: Register = serde_json::from_slice(&body).map_err(|e| {
        Error::invalid_argument(format!(
            "the request to register shared memory region '{region}' is not valid: {e}"
        ))
    })?;
    serving
        .shared_memory
        .register(&region, &request.key, request.offset, request.byte_size)?;
    Ok(Json(json!({})))
}

async fn unregister_shared_memory(
    State(serving): State<Arc<Serving>>,
    Path(path): Path<RegionPath>,
) -> Answer<Json<serde_json::Value>> {
    serving.shared_memory.unregister(path.region.as_deref())?;
    Ok(Json(json!({})))
}

async fn metrics(State(serving): State<Arc<Serving>>) -> Response {
    let text = serving.metrics.encode(&serving.models());
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}

async fn server_metadata() -> Json<ServerMetadata> {
    Json(ServerMetadata::of_halo())
}

/// `/v2/models/{name}[/versions/{version}]`.
#[derive(serde::Deserialize)]
struct ModelPath {
    name: String,
    version: Option<String>,
}

impl ModelPath {
    fn find(&self, serving: &Serving) -> Answer<Arc<Model>> {
        Ok(serving.find(&self.name, self.version.as_deref())?)
    }
}

async fn model_metadata(
    State(serving): State<Arc<Serving>>,
    Path(path): Path<ModelPath>,
) -> Answer<Json<ModelMetadata>> {
    Ok(Json(ModelMetadata::of(path.find(&serving)?.as_ref())))
}

async fn model_config(
    State(serving): State<Arc<Serving>>,
    Path(path): Path<ModelPath>,
) -> Answer<Json<ModelConfiguration>> {
    Ok(Json(ModelConfiguration::of(path.find(&serving)?.as_ref())))
}

async fn model_statistics(
    State(serving): State<Arc<Serving>>,
    Path(path): Path<ModelPath>,
) -> Answer<Json<serde_json::Value>> {
    let model = path.find(&serving)?;
    Ok(Json(json!({"model_stats": [ModelStatisticsEntry::of(&model)]})))
}

/// Every loaded model's statistics, by name.
async fn all_statistics(State(serving): State<Arc<Serving>>) -> Json<serde_json::Value> {
    let entries: Vec<ModelStatisticsEntry> = serving.models().values().map(|m| ModelStatisticsEntry::of(m)).collect();
    Json(json!({ "model_stats": entries }))
}

// The protocol needs only the status; the body is the one KServe's own server and client use.
// Not ready is `503`, as while the models load and as KServe's own server answers it.
async fn model_ready(State(serving): State<Arc<Serving>>, Path(path): Path<ModelPath>) -> Answer<Response> {
    let ready = match path.find(&serving)?.stalled() {
        None => Json(json!({"name": path.name, "ready": true})).into_response(),
        Some(stalled) => not_ready(json!({"name": path.name, "ready": false, "error": stalled})),
    };
    Ok(ready)
}

/// Ready unless a model is [stalled](crate::model::Model::stalled): a platform then sends the
/// requests to other replicas until the model is free again.
async fn server_ready(State(serving): State<Arc<Serving>>) -> Response {
    match serving.stalled() {
        None => Json(json!({"ready": true})).into_response(),
        Some(stalled) => not_ready(json!({"ready": false, "error": stalled})),
    }
}

fn not_ready(body: serde_json::Value) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

/// The largest inference request body the server reads, and the longest pause in one.
#[derive(Clone, Copy)]
struct BodyLimits {
    max_bytes: usize,
    pause: Option<Duration>,
}

/// An inference request, admitted by its model before its body is read: the body of a request
/// the model has no room for is read and dropped as it arrives, never held, so many clients
/// sending large bodies at once cannot hold more memory than the models' limits allow.
async fn infer(
    State(serving): State<Arc<Serving>>,
    Extension(limits): Extension<BodyLimits>,
    Path(path): Path<ModelPath>,
    coding: Option<Extension<BodyCoding>>,
    headers: HeaderMap,
    body: Body,
) -> Answer<Response> {
    let coding = coding.map(|Extension(coding)| coding);
    let (serving, headers) = (&serving, &headers);
    // The body waits here until a model takes it: a request for no model is refused without
    // the closure below running, and its body must still be read before the answer.
    let unread = std::sync::Mutex::new(Some(body));
    let unread = &unread;
    let take = move || unread.lock().ok().and_then(|mut slot| slot.take());
    let answer = serving.infer(
        &path.name,
        path.version.as_deref(),
        Protocol::Http,
        |model| async move {
            let body = take().ok_or_else(|| Error::internal("an infer request's body was taken twice"))?;
            let admission = match model.admit() {
                Ok(admission) => admission,
                Err(refused) => {
                    discard(body, limits.max_bytes).await;
                    return Err(refused);
                }
            };
            // The admission is held while the body arrives: a sender that stops mid-body gives
            // it back once its pause passes the limit.
            let body = Body::new(PaceLimited::new(body, limits.pause, Paced::WholeBody, |stalled| {
                Box::new(stalled)
            }));
            let body = read_body(body, coding, limits.max_bytes, model.deadline(None)).await?;
            run_inference(model, admission, serving, headers, body).await
        },
    );
    let answer = answer.await;
    if let Some(body) = take() {
        discard(body, limits.max_bytes).await;
    }
    Ok(answer?)
}

/// How long a refused request's body is read (and dropped) for, at most.
const DISCARD_TIME: Duration = Duration::from_secs(10);

/// Reads a refused request's body, up to `limit` bytes and for `DISCARD_TIME` at most, keeping
/// none of it, before the refusal is answered: most clients send the whole body before they
/// read an answer, and a connection closed under their unread bytes resets and loses it, while
/// one kept alive would read them as its next request. Past either bound the refusal goes out
/// and the connection closes.
async fn discard(body: Body, limit: usize) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut read = 0usize;
    let drain = async {
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |data| data.len());
            if read > limit {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIME, drain).await;
}

/// The whole of `body`, decompressed from `coding` if it has one, up to `limit` bytes (once
/// decompressed), read by `deadline` if there is one.
///
/// # Errors
/// `ResourceExhausted` for a body over the limit; `DeadlineExceeded` at the deadline;
/// `InvalidArgument` when the connection fails mid-body or the body does not decompress.
async fn read_body(
    body: Body,
    coding: Option<BodyCoding>,
    limit: usize,
    deadline: Option<std::time::Instant>,
) -> halo_hal::Result<Bytes> {
    let read = async {
        axum::body::to_bytes(body, limit).await.map_err(|error| {
            if let Some(stalled) = cause::<BodyStalled>(&error) {
                return Error::deadline_exceeded(stalled.to_string());
            }
            let over_limit =
                std::error::Error::source(&error).is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
            match (over_limit, coding) {
                (true, None) => {
                    Error::resource_exhausted(format!("the request body is over the server's limit of {limit} bytes"))
                }
                (true, Some(coding)) => Error::resource_exhausted(format!(
                    "the {}-compressed request body decompresses to more than the server's limit of {limit} bytes",
                    coding.name()
                )),
                (false, None) => Error::invalid_argument(format!("the request body could not be read: {error}")),
                (false, Some(coding)) => Error::invalid_argument(format!(
                    "the {}-compressed request body could not be read: {error}",
                    coding.name()
                )),
            }
        })
    };
    match deadline {
        None => read.await,
        Some(deadline) => tokio::time::timeout_at(deadline.into(), read)
            .await
            .map_err(|_| Error::deadline_exceeded("the request body did not arrive in the model's time limit"))?,
    }
}

/// The first error of type `E` in `error`'s chain of sources, `error` included.
fn cause<'a, E: std::error::Error + 'static>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a E> {
    std::iter::successors(Some(error), |error| error.source()).find_map(|error| error.downcast_ref::<E>())
}

/// The binary tensor data extension's header: the byte length of the JSON before binary data.
const JSON_LENGTH_HEADER: &str = "inference-header-content-length";

fn json_length(headers: &HeaderMap) -> halo_hal::Result<Option<usize>> {
    let Some(value) = headers.get(JSON_LENGTH_HEADER) else {
        return Ok(None);
    };
    let length = value.to_str().ok().and_then(|text| text.trim().parse::<usize>().ok());
    match length {
        Some(length) => Ok(Some(length)),
        None => Err(Error::invalid_argument(format!(
            "the Inference-Header-Content-Length header {value:?} is not a byte count"
        ))),
    }
}

async fn run_inference(
    model: Arc<Model>,
    admission: Admission,
    serving: &Serving,
    headers: &HeaderMap,
    body: Bytes,
) -> halo_hal::Result<Response> {
    let (request, binary) = InferRequest::parse(&body, json_length(headers)?)?;
    let inputs = decode_inputs(&model, request.inputs, binary, &serving.shared_memory)?;
    let deadline = model.deadline(request.parameters.timeout.map(Duration::from_micros));
    let outputs = model
        .run_admitted(admission, inputs, &serving.metrics, deadline)
        .await?;
    let encoded = encode_outputs(
        outputs,
        request.outputs,
        request.parameters.binary_data_output,
        &serving.shared_memory,
    )?;
    let response = InferResponse {
        model_name: model.config().name.clone(),
        model_version: model.config().version.clone(),
        id: request.id,
        outputs: encoded.outputs,
    };
    let Some(binary) = encoded.binary else {
        return Ok(Json(response).into_response());
    };
    let mut body =
        serde_json::to_vec(&response).map_err(|e| Error::internal(format!("encoding the response failed: {e}")))?;
    let json_length = body.len();
    body.extend_from_slice(&binary);
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (HeaderName::from_static(JSON_LENGTH_HEADER), json_length.to_string()),
        ],
        body,
    )
        .into_response())
}
