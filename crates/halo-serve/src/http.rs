//! The protocol's HTTP/REST endpoints (`/v2/...`) over the loaded models.

use crate::model::Model;
use crate::protocol::{
    decode_inputs, encode_outputs, ErrorBody, InferRequest, InferResponse, ModelMetadata, ServerMetadata,
};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use halo_hal::{Error, StatusCode as Status};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The models a server answers for, by name.
pub type Models = BTreeMap<String, Arc<Model>>;

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

/// The router for `models`, refusing request bodies over `max_request_bytes`.
pub fn router(models: Arc<Models>, max_request_bytes: usize) -> Router {
    Router::new()
        .route("/v2/health/live", get(|| async { StatusCode::OK }))
        .route("/v2/health/ready", get(|| async { StatusCode::OK }))
        .route("/v2", get(server_metadata))
        .route("/v2/models/{name}", get(model_metadata))
        .route("/v2/models/{name}/versions/{version}", get(model_version_metadata))
        .route("/v2/models/{name}/ready", get(model_ready))
        .route("/v2/models/{name}/versions/{version}/ready", get(model_version_ready))
        .route("/v2/models/{name}/infer", post(infer))
        .route("/v2/models/{name}/versions/{version}/infer", post(infer_version))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(models)
}

async fn server_metadata() -> Json<ServerMetadata> {
    Json(ServerMetadata {
        name: "halo",
        version: env!("CARGO_PKG_VERSION"),
        extensions: vec![],
    })
}

fn find(models: &Models, name: &str, version: Option<&str>) -> Answer<Arc<Model>> {
    let model = models.get(name).ok_or_else(|| {
        Error::invalid_argument(format!(
            "unknown model '{name}'; this server has {:?}",
            models.keys().collect::<Vec<_>>()
        ))
    })?;
    if let Some(version) = version.filter(|v| *v != model.config().version) {
        return Err(Error::invalid_argument(format!(
            "model '{name}' has no version '{version}'; it has '{}'",
            model.config().version
        ))
        .into());
    }
    Ok(model.clone())
}

async fn model_metadata(State(models): State<Arc<Models>>, Path(name): Path<String>) -> Answer<Json<ModelMetadata>> {
    Ok(Json(ModelMetadata::of(find(&models, &name, None)?.as_ref())))
}

async fn model_version_metadata(
    State(models): State<Arc<Models>>,
    Path((name, version)): Path<(String, String)>,
) -> Answer<Json<ModelMetadata>> {
    Ok(Json(ModelMetadata::of(find(&models, &name, Some(&version))?.as_ref())))
}

async fn model_ready(State(models): State<Arc<Models>>, Path(name): Path<String>) -> Answer<StatusCode> {
    find(&models, &name, None).map(|_| StatusCode::OK)
}

async fn model_version_ready(
    State(models): State<Arc<Models>>,
    Path((name, version)): Path<(String, String)>,
) -> Answer<StatusCode> {
    find(&models, &name, Some(&version)).map(|_| StatusCode::OK)
}

async fn infer(
    State(models): State<Arc<Models>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Answer<Json<InferResponse>> {
    run_inference(find(&models, &name, None)?, body).await
}

async fn infer_version(
    State(models): State<Arc<Models>>,
    Path((name, version)): Path<(String, String)>,
    body: Bytes,
) -> Answer<Json<InferResponse>> {
    run_inference(find(&models, &name, Some(&version))?, body).await
}

async fn run_inference(model: Arc<Model>, body: Bytes) -> Answer<Json<InferResponse>> {
    let _admission = model.admit()?;
    let request: InferRequest = serde_json::from_slice(&body)
        .map_err(|e| Error::invalid_argument(format!("the request is not a valid inference request: {e}")))?;
    let inputs = decode_inputs(&model, request.inputs)?;
    let _turn = model.turn().await;
    let running = model.clone();
    let outputs = tokio::task::spawn_blocking(move || running.infer(inputs))
        .await
        .map_err(|e| Error::internal(format!("the inference task failed: {e}")))??;
    Ok(Json(InferResponse {
        model_name: model.config().name.clone(),
        model_version: model.config().version.clone(),
        id: request.id,
        outputs: encode_outputs(outputs)?,
    }))
}
