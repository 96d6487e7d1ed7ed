//! The HTTP port's connections: each served by hyper with a time limit on every request's head,
//! and all of them finishing their requests in flight at shutdown.
//!
//! `axum::serve` sets no limit on a request's head, so a client that sends part of one and then
//! nothing kept its connection (a socket, a task) for as long as it liked, and enough such
//! clients would exhaust the server's file descriptors.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long accepting waits after a failure (no file descriptor left, say) before it tries
/// again, so that it does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `stop` completes, each request's head to arrive within
/// `head_time` (none: no limit) or its connection is closed; then waits for the requests in
/// flight on every connection and returns.
pub async fn serve(listener: TcpListener, app: Router, head_time: Option<Duration>, stop: impl Future<Output = ()>) {
    let connections = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accepting an HTTP connection failed");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(head_time);
        let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "an HTTP connection ended with an error");
            }
        });
    }
    connections.shutdown().await;
}
