//! The model gateway (`model-orchestra-operator gateway`): one per ModelOrchestra whose
//! applications are open engines, in the gateway's place. It routes OpenAI's API (`/v1`)
//! and Ollama's (`/api`) by the request's `model` to the application serving it, streams
//! answers through, holds requests while a sleeping application wakes, and puts idle ones
//! to sleep. Its routes come from its ModelOrchestra, watched: resolved and rendered by the
//! operator's own code, so they follow the spec without a restart.

pub mod metrics;
pub mod proxy;
pub mod routes;
pub mod scale;
#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::StatusCode;
use hyper::body::Incoming;
use hyper::Request;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use tokio::sync::{watch, Notify};

use proxy::{text, Gateway};
use routes::Table;

/// Where the gateway serves and what it routes.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    pub namespace: String,
    /// The ModelOrchestra whose applications it routes to.
    pub name: String,
    pub listen: SocketAddr,
}

/// How often idle applications are looked for.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Runs the gateway until the process is stopped.
pub async fn run(client: kube::Client, options: GatewayOptions) -> std::io::Result<()> {
    let (routes_tx, routes) = watch::channel(Arc::new(Table::default()));
    let changed = Arc::new(Notify::new());
    let loaded = Arc::new(AtomicBool::new(false));
    let scaler = Arc::new(scale::KubeScaler { api: Api::namespaced(client.clone(), &options.namespace) });
    let gateway = Arc::new(Gateway::new(routes, changed.clone(), scaler));

    let ar = kube::core::ApiResource {
        group: model_orchestra_api::GROUP.into(),
        version: "v1alpha2".into(),
        api_version: format!("{}/v1alpha2", model_orchestra_api::GROUP),
        kind: "ModelOrchestra".into(),
        plural: "modelorchestras".into(),
    };
    let crs: Api<DynamicObject> = Api::namespaced_with(client, &options.namespace, &ar);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", options.name));
    let (name, watch_loaded) = (options.name.clone(), loaded.clone());
    tokio::spawn(async move {
        let mut events = watcher(crs, config).boxed();
        while let Some(event) = events.next().await {
            let cr = match event {
                Ok(watcher::Event::Apply(cr) | watcher::Event::InitApply(cr)) => cr,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "watching the ModelOrchestra");
                    continue;
                }
            };
            match serde_json::to_value(&cr).map_err(|e| e.to_string()).and_then(|v| Table::of(&v)) {
                Ok(table) => {
                    routes_tx.send_replace(Arc::new(table));
                    watch_loaded.store(true, Ordering::SeqCst);
                    changed.notify_waiters();
                }
                // The last good routes keep serving; the operator's status says what is wrong.
                Err(e) => tracing::warn!(modelorchestra = %name, error = %e, "cannot route: keeping the last routes"),
            }
        }
    });

    let idle = gateway.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(IDLE_CHECK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if idle.has_routes() {
                idle.sleep_idle().await;
            }
        }
    });

    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    tracing::info!(address = %listener.local_addr()?, modelorchestra = %options.name, "model gateway serving");
    let serving = tokio::spawn(serve(listener, gateway.clone(), loaded));
    stopped().await;
    // Kubernetes has taken the pod out of its Service: no new connection comes; the
    // requests in flight (held ones included) are answered before the process ends.
    serving.abort();
    let drained = tokio::time::Instant::now() + DRAIN;
    while gateway.in_flight() > 0 && tokio::time::Instant::now() < drained {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::info!(unanswered = gateway.in_flight(), "stopping");
    Ok(())
}

/// The longest the requests in flight are waited for on SIGTERM (within Kubernetes' default
/// grace period of 30 s).
const DRAIN: Duration = Duration::from_secs(25);

/// SIGTERM (Kubernetes stopping the pod) or Ctrl-C.
async fn stopped() {
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Serves the gateway's requests on `listener` (`/healthz`, `/readyz` once `loaded`,
/// `/metrics`, and the routed APIs) until the process stops.
pub async fn serve(listener: tokio::net::TcpListener, gateway: Arc<Gateway>, loaded: Arc<AtomicBool>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (gateway, loaded) = (gateway.clone(), loaded.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (gateway, loaded) = (gateway.clone(), loaded.clone());
                async move {
                    let response = match req.uri().path() {
                        "/healthz" => text(StatusCode::OK, "ok\n"),
                        "/readyz" if loaded.load(Ordering::SeqCst) => text(StatusCode::OK, "ok\n"),
                        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "no routes yet\n"),
                        "/metrics" => hyper::Response::builder()
                            .header("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
                            .body(proxy::full_body(gateway.metrics.encode()))
                            .expect("a valid response"),
                        _ => gateway.handle(req).await,
                    };
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}
