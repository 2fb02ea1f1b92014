//! The operations endpoint: `/metrics`, `/healthz` (the process serves), `/readyz` (the
//! controller is running: caches synced, or standing by for the lease).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};

use super::metrics::Metrics;

pub struct Health {
    pub ready: AtomicBool,
}

/// Serves until the returned task is aborted.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (metrics, health) = (metrics.clone(), health.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let response = respond(req.uri().path(), &metrics, &health);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((bound, task))
}

fn respond(path: &str, metrics: &Metrics, health: &Health) -> Response<Full<Bytes>> {
    let (code, content_type, body) = match path {
        "/metrics" => (200, "application/openmetrics-text; version=1.0.0; charset=utf-8", metrics.encode()),
        "/healthz" | "/livez" => (200, "text/plain", "ok\n".to_string()),
        "/readyz" if health.ready.load(Ordering::Relaxed) => (200, "text/plain", "ok\n".to_string()),
        "/readyz" => (503, "text/plain", "not ready\n".to_string()),
        _ => (404, "text/plain", "not found\n".to_string()),
    };
    Response::builder()
        .status(code)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}
