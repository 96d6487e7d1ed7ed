//! Server-wide admission of gRPC inference calls before their messages are read.
//!
//! A model admits a request only once its message is decoded, since the message names the model;
//! until then the message is buffered whole. Without a bound before that, many clients sending
//! large messages at once would hold as many messages as they send. So the messages arriving at
//! once (a `ModelInfer` call's, for the call's life; a `ModelStreamInfer` stream's, from the
//! first byte of each to its last) are limited to the requests the loaded models admit together
//! (each model's `max_concurrency + max_queue`). A call past that is answered `UNAVAILABLE`
//! without its message being read, as a model's own refusal would be; a stream whose next
//! message finds no place ends `UNAVAILABLE`. A stream waiting between messages holds no place,
//! so streams that clients keep open and idle do not keep other calls out; the streams open at
//! once have a limit of their own, which bounds their memory.

use crate::body_pause::{BodyStalled, PaceLimited, Paced};
use crate::grpc_codec::client_fault;
use crate::model::Admission;
use crate::serving::Serving;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::server::NamedService;
use tonic::Status;
use tower_service::Service;

const MODEL_INFER: &str = "/inference.GRPCInferenceService/ModelInfer";
const MODEL_STREAM_INFER: &str = "/inference.GRPCInferenceService/ModelStreamInfer";

/// The calls that carry inference requests.
const INFERENCE_PATHS: [&str; 2] = [MODEL_INFER, MODEL_STREAM_INFER];

/// A call whose client paused too long inside a message ends `DEADLINE_EXCEEDED` saying so.
fn stalled_status(stalled: BodyStalled) -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(Status::deadline_exceeded(stalled.to_string()))
}

/// Most `ModelStreamInfer` streams open at once unless the server is told otherwise. An idle
/// stream holds no place but still some memory (its call, its buffers): this bounds it.
pub const DEFAULT_MAX_STREAMS: usize = 1024;

/// `inner`, the gRPC service, with its inference calls admitted first.
#[derive(Clone)]
pub struct Admitted<S> {
    inner: S,
    serving: Arc<Serving>,
    in_progress: Arc<AtomicUsize>,
    /// The longest pause a client may make inside an inference call's message.
    body_pause: Option<Duration>,
    /// `ModelStreamInfer` streams open now, and the most that may be.
    open_streams: Arc<AtomicUsize>,
    max_streams: usize,
}

impl<S> Admitted<S> {
    /// `inner` admitting inference calls up to what `serving`'s models admit together and
    /// `max_streams` open streams, each ended `DEADLINE_EXCEEDED` when its client pauses longer
    /// than `body_pause` inside a message.
    pub fn new(inner: S, serving: Arc<Serving>, body_pause: Option<Duration>, max_streams: usize) -> Self {
        Admitted {
            inner,
            serving,
            in_progress: Arc::new(AtomicUsize::new(0)),
            body_pause,
            open_streams: Arc::new(AtomicUsize::new(0)),
            max_streams,
        }
    }

    /// What an inference call holds for its life: a place for a `ModelInfer` call's message; a
    /// stream's own count for a `ModelStreamInfer` (its messages take places as they arrive).
    fn admit(&self, path: &str) -> Result<Admission, Status> {
        if path == MODEL_INFER {
            return take_place(&self.serving, &self.in_progress);
        }
        Admission::take(&self.open_streams, self.max_streams).ok_or_else(|| {
            Status::unavailable(format!(
                "the server is busy: {} gRPC streams are open, as many as it keeps (--max-grpc-streams)",
                self.max_streams
            ))
        })
    }
}

/// A place for one more message among those `in_progress`, if `serving`'s models' limits leave
/// one.
fn take_place(serving: &Serving, in_progress: &Arc<AtomicUsize>) -> Result<Admission, Status> {
    let limit: usize = (serving.models().values())
        .map(|m| m.config().max_concurrency + m.config().max_queue)
        .sum();
    Admission::take(in_progress, limit).ok_or_else(|| {
        Status::unavailable(format!(
            "the server is busy: {limit} gRPC inference calls are in progress, as many as its models admit"
        ))
    })
}

/// A gRPC call's body, paced, taking a place for each message of a stream while it arrives.
pub struct Placed<B> {
    body: PaceLimited<B>,
    /// Where a stream's places come from; none for other calls.
    places: Option<(Arc<Serving>, Arc<AtomicUsize>)>,
    /// The place of the message arriving now.
    place: Option<Admission>,
}

impl<B> Body for Placed<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Some((serving, in_progress)) = &this.places {
            match (&polled, this.body.mid_message()) {
                (Poll::Ready(Some(Ok(_))), true) if this.place.is_none() => match take_place(serving, in_progress) {
                    Ok(place) => this.place = Some(place),
                    Err(busy) => return Poll::Ready(Some(Err(Box::new(busy)))),
                },
                (Poll::Ready(_), false) | (Poll::Ready(None | Some(Err(_))), _) => this.place = None,
                _ => {}
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<S: NamedService> NamedService for Admitted<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for Admitted<S>
where
    S: Service<http::Request<Placed<B>>, Response = http::Response<tonic::body::Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (pause, paced) = match request.uri().path() {
            MODEL_INFER => (self.body_pause, Paced::WholeBody),
            MODEL_STREAM_INFER => (self.body_pause, Paced::WithinMessages),
            _ => (None, Paced::WholeBody),
        };
        let places = (paced == Paced::WithinMessages).then(|| (self.serving.clone(), self.in_progress.clone()));
        let request = request.map(|body| Placed {
            body: PaceLimited::new(body, pause, paced, stalled_status),
            places,
            place: None,
        });
        if !INFERENCE_PATHS.contains(&request.uri().path()) {
            let answer = self.inner.call(request);
            return Box::pin(async move { Ok(with_client_faults(answer.await?)) });
        }
        match self.admit(request.uri().path()) {
            Err(refusal) => Box::pin(std::future::ready(Ok(refusal.into_http()))),
            Ok(admission) => {
                let answer = self.inner.call(request);
                Box::pin(async move {
                    let response = with_client_faults(answer.await?);
                    // The place goes with the answer's body: a stream holds its count to its end.
                    Ok(response.map(|body| {
                        tonic::body::Body::new(Holding {
                            body,
                            _admission: admission,
                        })
                    }))
                })
            }
        }
    }
}

/// `response`, or when it is a refusal in its headers alone (a unary call whose message could
/// not be read) that [`client_fault`] names the client's, that refusal instead.
fn with_client_faults(response: http::Response<tonic::body::Body>) -> http::Response<tonic::body::Body> {
    match Status::from_header_map(response.headers())
        .as_ref()
        .and_then(client_fault)
    {
        Some(refusal) => refusal.into_http(),
        None => response,
    }
}

/// An answer's body holding its call's place until it is dropped.
struct Holding {
    body: tonic::body::Body,
    _admission: Admission,
}

impl Body for Holding {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
