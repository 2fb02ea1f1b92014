//! The controller: watches ModelOrchestras (as untyped objects, so an invalid spec reaches
//! the reconciler and is reported instead of stalling the watch) and every kind the chart
//! renders, and reconciles each CR routed to this operator version.

pub mod children;
pub mod reconciler;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::discovery::Discovery;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};

use crate::chart::Chart;
use crate::kinds::Kind;
use crate::operations::metrics::Metrics;
use reconciler::{error_policy, mo_resource, reconcile, Context};

pub struct Settings {
    pub routing: String,
    pub claim_unlabeled: bool,
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    pub resync: Duration,
    pub concurrency: u16,
    pub identity: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the ModelOrchestra CRD (modelorchestras.models.titanml.co, version v1alpha1) is not served by the cluster; install it with `make install` or `model-orchestra-operator crd | kubectl apply --server-side -f -`")]
    CrdMissing,
    #[error("API discovery failed: {0}")]
    Discovery(#[source] kube::Error),
}

/// The kinds of `Kind::ALL` the cluster serves.
pub async fn served_kinds(client: &Client) -> Result<Vec<Kind>, StartError> {
    let discovery = Discovery::new(client.clone()).run().await.map_err(StartError::Discovery)?;
    let serves = |group: &str, version: &str, kind: &str| {
        discovery.groups().any(|g| g.name() == group && g.versioned_resources(version).iter().any(|(ar, _)| ar.kind == kind))
    };
    if !serves(crate::api::GROUP, crate::api::VERSION, crate::api::KIND) {
        return Err(StartError::CrdMissing);
    }
    Ok(Kind::ALL.into_iter().filter(|k| serves(k.group(), k.version(), k.kind())).collect())
}

/// Discovery, retried (capped exponential backoff) until it works: at startup the API
/// server may be briefly unavailable, or the CRD not yet installed.
async fn discover(client: &Client) -> Vec<Kind> {
    let mut delay = Duration::from_millis(200);
    loop {
        match served_kinds(client).await {
            Ok(kinds) => return kinds,
            Err(e) => tracing::warn!(error = %e, retry_in = ?delay, "cannot start the controller yet"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(client: Client, chart: Chart, settings: Settings, metrics: Arc<Metrics>, on_ready: impl FnOnce(), shutdown: impl Future<Output = ()> + Send + Sync + 'static) -> Result<(), StartError> {
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let served = tokio::select! {
        kinds = discover(&client) => kinds,
        _ = shutdown.clone() => return Ok(()),
    };
    let missing: Vec<&str> = Kind::ALL.iter().filter(|k| !served.contains(k)).map(|k| k.kind()).collect();
    if !missing.is_empty() {
        tracing::warn!(?missing, "optional kinds are not served; CRs that need them report ApplyFailed");
    }
    let (caches, meta_streams, deploy_stream) = children::watch(&client, settings.namespace.as_deref(), &served);
    let ar = mo_resource();
    let crs: Api<DynamicObject> = match &settings.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let recorder = Recorder::new(client.clone(), Reporter { controller: "model-orchestra-operator".into(), instance: Some(settings.identity.clone()) });
    // Our own reflector for the CRs, so that managedFields (the bulk of a CR with status)
    // are dropped before caching.
    let writer = reflector::store::Writer::new(ar.clone());
    let reader = writer.as_reader();
    let cr_stream = watcher(crs, watcher::Config::default())
        .default_backoff()
        .modify(|o: &mut DynamicObject| o.metadata.managed_fields = None)
        .reflect(writer)
        .applied_objects();
    let mut controller = Controller::for_stream_with(cr_stream, reader, ar.clone())
        .with_config(ControllerConfig::default().concurrency(settings.concurrency).debounce(Duration::from_millis(200)));
    for (child, stream) in meta_streams {
        controller = controller.owns_stream_with(stream, child);
    }
    if let Some(stream) = deploy_stream {
        controller = controller.owns_stream(stream);
    }
    let ctx = Arc::new(Context::new(client, chart, caches, settings.routing.clone(), settings.claim_unlabeled, settings.resync, served, metrics, recorder));
    let ready_ctx = ctx.clone();
    let controller = controller.graceful_shutdown_on(shutdown).run(reconcile, error_policy, ctx);
    tokio::pin!(controller);
    // Readiness: once the child caches have listed (prune decisions need them complete).
    tokio::select! {
        _ = ready_ctx.caches.wait_until_ready() => on_ready(),
        _ = controller.next() => {}
    }
    controller
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
    Ok(())
}
