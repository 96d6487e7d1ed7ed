//! The inference service's stand-in on the gRPC port while the models load
//! ([`crate::server::answer_while_loading`]): `ServerLive` is true, `ServerReady` false, and
//! every other call `UNAVAILABLE`, saying the server is loading, as the HTTP stand-in answers.
//! Without it the port would take connections and answer none of them until the models were
//! loaded: a gRPC probe would time out, and a liveness probe would restart the server.

use crate::grpc::wire::grpc_inference_service_server::SERVICE_NAME;
use crate::grpc::wire::{ServerLiveRequest, ServerLiveResponse, ServerReadyRequest, ServerReadyResponse};
use crate::grpc_codec::ClientCheckedCodec;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};
use tower_service::Service;

/// `inference.GRPCInferenceService` while the models load.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadingInference;

impl NamedService for LoadingInference {
    const NAME: &'static str = SERVICE_NAME;
}

impl<B> Service<http::Request<B>> for LoadingInference
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().rsplit('/').next().unwrap_or_default();
        match method {
            "ServerLive" => Box::pin(async move {
                let mut grpc = Grpc::new(ClientCheckedCodec::<ServerLiveResponse, ServerLiveRequest>::default());
                Ok(grpc.unary(Answer(ServerLiveResponse { live: true }), request).await)
            }),
            "ServerReady" => Box::pin(async move {
                let mut grpc = Grpc::new(ClientCheckedCodec::<ServerReadyResponse, ServerReadyRequest>::default());
                Ok(grpc.unary(Answer(ServerReadyResponse { ready: false }), request).await)
            }),
            _ => Box::pin(std::future::ready(Ok(Status::unavailable(
                "the server is loading its models",
            )
            .into_http()))),
        }
    }
}

/// A unary call's handler that answers every request with the same message.
struct Answer<T>(T);

impl<Q, T: Clone + Send + 'static> UnaryService<Q> for Answer<T> {
    type Response = T;
    type Future = std::future::Ready<Result<Response<T>, Status>>;

    fn call(&mut self, _: Request<Q>) -> Self::Future {
        std::future::ready(Ok(Response::new(self.0.clone())))
    }
}
