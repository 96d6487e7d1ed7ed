//! How long a client may pause while it sends a request body.
//!
//! A request holds its model's admission while its body arrives (HTTP), and a gRPC call its
//! server-wide place, so a few clients that send part of a body and then nothing would hold every
//! place for as long as they keep their connections, and every other client would be refused as
//! busy. A body that pauses longer than the limit ends in [`BodyStalled`] instead, and its place
//! goes back. Between two messages of a gRPC stream a client may pause for as long as it likes:
//! a stream waiting for its next message holds no place ([`crate::grpc_admission`]).

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// How long a sender may pause mid-body unless the server is told otherwise.
pub const DEFAULT_BODY_PAUSE: Duration = Duration::from_secs(30);

/// A body whose sender paused longer than the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyStalled {
    /// The limit.
    pub pause: Duration,
    /// Bytes that arrived before the pause.
    pub received: u64,
}

impl fmt::Display for BodyStalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the request body stalled: no bytes arrived for {:?} after the first {} bytes",
            self.pause, self.received
        )
    }
}

impl Error for BodyStalled {}

/// Where the pause limit applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paced {
    /// From the start of the body to its end (an HTTP body, a unary gRPC message).
    WholeBody,
    /// Only inside each gRPC message of a stream, from its first byte to its last.
    WithinMessages,
}

/// The error a [`PaceLimited`] body ends in when its sender pauses too long.
pub type StalledError = fn(BodyStalled) -> Box<dyn Error + Send + Sync>;

/// `B`, ending in an error once no frame has arrived for the limit where [`Paced`] applies it.
pub struct PaceLimited<B> {
    body: B,
    /// The limit; none: the body is passed through as it comes.
    pause: Option<Duration>,
    paced: Paced,
    stalled: StalledError,
    /// The end of the current pause, made at the first poll.
    timer: Option<Pin<Box<Sleep>>>,
    received: u64,
    /// Within a stream, the bytes of the current gRPC message (its 5-byte prefix included)
    /// still to come; 0 between messages.
    message_left: u64,
    /// The prefix of the next message, as far as it has arrived.
    prefix: Vec<u8>,
}

/// Bytes before each gRPC message: a compression flag and the message's length.
const GRPC_PREFIX: usize = 5;

impl<B> PaceLimited<B> {
    /// `body`, its sender allowed to pause `pause` at most (none: for ever) where `paced` says;
    /// `stalled` makes the error it ends in then.
    pub fn new(body: B, pause: Option<Duration>, paced: Paced, stalled: StalledError) -> Self {
        PaceLimited {
            body,
            pause,
            paced,
            stalled,
            timer: None,
            received: 0,
            message_left: 0,
            prefix: Vec::new(),
        }
    }

    /// The timer of the current pause, made at the first poll (inside the server's runtime).
    fn timer(&mut self, pause: Duration) -> Pin<&mut Sleep> {
        self.timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)))
            .as_mut()
    }

    fn restart_timer(&mut self) {
        if let Some(pause) = self.pause {
            self.timer(pause).reset(Instant::now() + pause);
        }
    }

    /// The limit, when a pause now counts against it.
    fn pacing(&self) -> Option<Duration> {
        let pacing = match self.paced {
            Paced::WholeBody => true,
            Paced::WithinMessages => self.mid_message(),
        };
        self.pause.filter(|_| pacing)
    }

    /// Whether part of a stream's message has arrived and the rest has not (always false for a
    /// body paced whole, whose messages it does not follow).
    pub fn mid_message(&self) -> bool {
        self.message_left > 0 || !self.prefix.is_empty()
    }

    /// Follows the gRPC messages through `bytes` of a stream.
    fn follow_messages(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.message_left > 0 {
                let taken = self.message_left.min(bytes.len() as u64);
                self.message_left -= taken;
                bytes = &bytes[taken as usize..];
                continue;
            }
            let wanted = GRPC_PREFIX - self.prefix.len();
            let taken = wanted.min(bytes.len());
            self.prefix.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
            if self.prefix.len() == GRPC_PREFIX {
                let length = u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]]);
                self.message_left = u64::from(length);
                self.prefix.clear();
            }
        }
    }
}

impl<B> Body for PaceLimited<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    if this.paced == Paced::WithinMessages {
                        this.follow_messages(data);
                    }
                }
                this.restart_timer();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.pacing() {
                None => {
                    this.restart_timer();
                    Poll::Pending
                }
                Some(pause) => match this.timer(pause).poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err((this.stalled)(BodyStalled {
                        pause,
                        received: this.received,
                    })))),
                    Poll::Pending => Poll::Pending,
                },
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use std::convert::Infallible;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    const PAUSE: Duration = Duration::from_millis(50);

    type Sender = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;
    type Frames = StreamBody<ReceiverStream<Result<Frame<Bytes>, Infallible>>>;

    /// A body whose frames the returned sender sends, limited to `PAUSE` where `paced` says.
    fn paced(paced: Paced) -> (Sender, PaceLimited<Frames>) {
        let (sender, receiver) = mpsc::channel(8);
        let body = StreamBody::new(ReceiverStream::new(receiver));
        (
            sender,
            PaceLimited::new(body, Some(PAUSE), paced, |stalled| Box::new(stalled)),
        )
    }

    async fn send(sender: &Sender, bytes: &'static [u8]) {
        sender.send(Ok(Frame::data(Bytes::from_static(bytes)))).await.unwrap();
    }

    /// The body's next frame's bytes, or its error, or `None` when nothing came within `wait`.
    async fn next(
        body: &mut (impl Body<Data = Bytes, Error = Box<dyn Error + Send + Sync>> + Unpin),
        wait: Duration,
    ) -> Option<Result<Bytes, String>> {
        let frame = tokio::time::timeout(wait, body.frame()).await.ok()?;
        Some(match frame.expect("the body has not ended") {
            Ok(frame) => Ok(frame.into_data().expect("a data frame")),
            Err(error) => Err(error.to_string()),
        })
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_body_that_keeps_coming_passes_and_one_that_pauses_too_long_fails_naming_the_bytes_it_had() {
        runtime().block_on(async {
            let (sender, mut body) = paced(Paced::WholeBody);
            for _ in 0..4 {
                send(&sender, b"abc").await;
                assert_eq!(next(&mut body, PAUSE).await, Some(Ok(Bytes::from_static(b"abc"))));
                tokio::time::sleep(PAUSE / 2).await;
            }
            let stalled = next(&mut body, 10 * PAUSE).await;
            assert_eq!(
                stalled,
                Some(Err(
                    "the request body stalled: no bytes arrived for 50ms after the first 12 bytes".into()
                ))
            );
        });
    }

    #[test]
    fn a_stream_may_pause_between_messages_but_not_inside_one() {
        runtime().block_on(async {
            let (sender, mut body) = paced(Paced::WithinMessages);
            // One whole message of 3 bytes (its 5-byte prefix first), in two frames.
            send(&sender, &[0, 0, 0, 0, 3, b'a']).await;
            assert!(next(&mut body, PAUSE).await.is_some_and(|frame| frame.is_ok()));
            send(&sender, b"bc").await;
            assert!(next(&mut body, PAUSE).await.is_some_and(|frame| frame.is_ok()));
            assert_eq!(
                next(&mut body, 4 * PAUSE).await,
                None,
                "a pause between messages is allowed"
            );
            // The next message's prefix, then nothing.
            send(&sender, &[0, 0, 0]).await;
            assert!(next(&mut body, PAUSE).await.is_some_and(|frame| frame.is_ok()));
            let stalled = next(&mut body, 10 * PAUSE).await;
            assert!(stalled.is_some_and(|frame| frame.is_err_and(|e| e.contains("after the first 11 bytes"))));
        });
    }
}
