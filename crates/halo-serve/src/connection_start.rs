//! A gRPC connection must start speaking HTTP/2 within a time limit.
//!
//! The HTTP/2 server holds a connection for as long as its client keeps it, and before the
//! client's preface arrives it has no way to tell a slow client from one that sends nothing: so
//! clients that connect and then send nothing (or part of the preface) would each keep a socket
//! for ever, and enough of them would use up the server's file descriptors. A connection whose
//! first [`PREFACE_BYTES`] have not arrived within the limit fails its read, and the server closes
//! it. After that, HTTP/2's keepalive pings find a client that went silent.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;
use tonic::transport::server::Connected;

/// The bytes of HTTP/2's connection preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`).
pub const PREFACE_BYTES: usize = 24;

/// `IO`, whose reads fail once the limit passes before its first [`PREFACE_BYTES`] arrive.
pub struct StartLimited<IO> {
    io: IO,
    /// The end of the wait for the preface; none once it has arrived (or without a limit).
    deadline: Option<Pin<Box<Sleep>>>,
    received: usize,
}

impl<IO> StartLimited<IO> {
    /// `io`, its preface to arrive within `limit` (none: no limit). Inside a tokio runtime.
    pub fn new(io: IO, limit: Option<Duration>) -> Self {
        StartLimited {
            io,
            deadline: limit.map(|limit| Box::pin(tokio::time::sleep(limit))),
            received: 0,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for StartLimited<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.deadline.is_none() {
            return read;
        }
        this.received += buf.filled().len() - before;
        if this.received >= PREFACE_BYTES {
            this.deadline = None;
            return read;
        }
        match (read, this.deadline.as_mut().map(|deadline| deadline.as_mut().poll(cx))) {
            (Poll::Pending, Some(Poll::Ready(()))) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client sent {} of HTTP/2's {PREFACE_BYTES}-byte preface in the time allowed",
                    this.received
                ),
            ))),
            (read, _) => read,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for StartLimited<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bytes)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl<IO: Connected> Connected for StartLimited<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}
