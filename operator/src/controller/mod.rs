//! The controller: watches ModelOrchestras (their spec untyped, as JSON text, so an invalid
//! spec reaches the reconciler and is reported instead of stalling the watch; see
//! [`cached_cr`]), every kind the chart renders and the pods of its Deployments, and
//! reconciles each CR routed to this operator version.

mod admission;
mod applied;
mod apply;
mod cached_cr;
mod children;
mod compact;
mod context;
mod cr;
mod engine_models;
mod error;
mod memory;
mod models;
mod observe;
mod other_line;
mod pods;
mod prober;
mod reconciler;
mod report;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cached_cr::CachedCr;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::core::GroupVersion;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};

use crate::chart::Chart;
use crate::operations::metrics::Metrics;
use crate::reconcile::routing::Line;
use context::Context;
use cr::key;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::ApiVersion;
use reconciler::{error_policy, reconcile};

/// How this operator runs: built once (by `run`) and shared by every reconcile.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The line it is: its routing value, the version it serves, whether it takes
    /// unlabelled CRs.
    pub line: Line,
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    pub resync: Duration,
    /// How long a CR's generation may go unreconciled by every line before a line that sees
    /// it says so.
    pub unserved_after: Duration,
    pub concurrency: u16,
    pub identity: String,
    /// The release this operator was installed as, reported in `status.operatorVersion`.
    pub release: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the ModelOrchestra CRD (modelorchestras.models.titanml.co, version {version}) is not served by the cluster; install it with `make install` or `model-orchestra-operator crd | kubectl apply --server-side -f -`")]
    CrdMissing { version: String },
    #[error("API discovery of {group_version} failed: {source}")]
    Discovery { group_version: String, source: kube::Error },
}

/// Whether the cluster serves `kind` of `group/version`: one request to that group
/// version (a 404 means not served).
async fn serves(client: &Client, group: &str, version: &str, kind: &str) -> Result<bool, StartError> {
    let gv = GroupVersion::gv(group, version);
    match kube::discovery::pinned_group(client, &gv).await {
        Ok(g) => Ok(g.versioned_resources(version).iter().any(|(ar, _)| ar.kind == kind)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(StartError::Discovery { group_version: format!("{group}/{version}"), source }),
    }
}

/// What the cluster serves: the version CRs are read and their status written at, and the
/// kinds of `Kind::ALL`.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// The storage version when the CRD serves it (a superset of every version's fields,
    /// so neither reading nor a status write drops a field), else the line's version (an
    /// older CRD).
    pub read_at: ApiVersion,
    pub kinds: Vec<Kind>,
}

/// What the cluster serves, once it serves the ModelOrchestra CRD at `version`. Only the
/// CRD and the optional kinds (KEDA, Prometheus Operator) are asked about — a few requests,
/// not a walk of every API group.
pub async fn served(client: &Client, version: ApiVersion) -> Result<Served, StartError> {
    let serves_crd = |v: ApiVersion| serves(client, model_orchestra_api::GROUP, v.as_str(), model_orchestra_api::KIND);
    if !serves_crd(version).await? {
        return Err(StartError::CrdMissing { version: version.as_str().into() });
    }
    let read_at = if version == ApiVersion::STORAGE || serves_crd(ApiVersion::STORAGE).await? {
        ApiVersion::STORAGE
    } else {
        version
    };
    Ok(Served { read_at, kinds: served_kinds(client).await? })
}

/// The kinds of `Kind::ALL` the cluster serves.
async fn served_kinds(client: &Client) -> Result<Vec<Kind>, StartError> {
    let mut kinds = Vec::new();
    for kind in Kind::ALL {
        if !kind.is_optional() || serves(client, kind.group(), kind.version(), kind.kind()).await? {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// Discovery, retried (capped exponential backoff) until it works: at startup the API
/// server may be briefly unavailable, or the CRD not yet installed.
async fn discover(client: &Client, version: ApiVersion) -> Served {
    let mut delay = Duration::from_millis(200);
    loop {
        match served(client, version).await {
            Ok(served) => return served,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?delay, "cannot start the controller yet")
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// How often the optional kinds the cluster did not serve are asked about again.
const REDISCOVERY_INTERVAL: Duration = Duration::from_secs(15);

/// Runs the controller until `shutdown` resolves. When an optional kind the cluster did
/// not serve becomes served (KEDA or the Prometheus Operator installed after the
/// operator), the controller stops and starts again with that kind's watch, so the CRs
/// that reported "install its CRD" are reconciled without restarting the process.
/// The operator's clients of the API server.
pub struct Clients {
    pub api: Client,
    /// For the probes of promotion candidates (through the API server's service proxy):
    /// without kube's default retries.
    pub probes: Client,
}

pub async fn run(
    clients: Clients,
    chart: Chart,
    settings: Settings,
    metrics: Arc<Metrics>,
    on_ready: impl FnOnce(),
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), StartError> {
    let Clients { api: client, probes } = clients;
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let mut served = tokio::select! {
        served = discover(&client, settings.line.serves) => served,
        _ = shutdown.clone() => return Ok(()),
    };
    let settings = Arc::new(settings);
    let chart = Arc::new(chart);
    let mut on_ready = Some(on_ready);
    loop {
        let (found_tx, mut found_rx) = tokio::sync::watch::channel(None);
        let rediscover = Arc::new(tokio::sync::Notify::new());
        let poll = tokio::spawn(newly_served(client.clone(), served.kinds.clone(), found_tx, rediscover.clone()));
        let stop = {
            let (shutdown, mut found) = (shutdown.clone(), found_rx.clone());
            async move {
                // A closed channel (nothing left to discover) is no reason to stop.
                tokio::select! {
                    _ = shutdown => {}
                    Ok(()) = found.changed() => {}
                }
            }
        };
        run_controller(
            &client,
            &probes,
            chart.clone(),
            settings.clone(),
            metrics.clone(),
            served.clone(),
            rediscover,
            || on_ready.take().map_or((), |f| f()),
            stop,
        )
        .await;
        poll.abort();
        let Some(kinds) = found_rx.borrow_and_update().clone() else { return Ok(()) };
        let added: Vec<&str> = kinds.iter().filter(|k| !served.kinds.contains(k)).map(|k| k.kind()).collect();
        tracing::info!(?added, "newly served kinds: restarting the controller with their watches");
        served.kinds = kinds;
    }
}

/// The CR a child belongs to: its controller ownerReference to a ModelOrchestra of any
/// version. A line writes the version it serves there (`v1alpha1` for the v0 line) while
/// CRs are read at the storage version; kube's `owns` matches the apiVersion exactly, so it
/// dropped every child event of the v0 line, whose CRs then became Ready only at a resync.
fn owner<K: kube::Resource>(cr: kube::api::ApiResource) -> impl Fn(K) -> Option<ObjectRef<CachedCr>> {
    move |child| {
        let meta = child.meta();
        let owner = meta.owner_references.iter().flatten().find(|o| {
            o.controller == Some(true)
                && o.kind == model_orchestra_api::KIND
                && ApiVersion::from_api_version(&o.api_version).is_some()
        })?;
        let reference = ObjectRef::new_with(&owner.name, cr.clone());
        Some(match meta.namespace.as_deref() {
            Some(ns) => reference.within(ns),
            None => reference,
        })
    }
}

/// Resolves (sends) the served kinds once they include one `served` lacks.
async fn newly_served(
    client: Client,
    served: Vec<Kind>,
    found: tokio::sync::watch::Sender<Option<Vec<Kind>>>,
    now: Arc<tokio::sync::Notify>,
) {
    if served.len() == Kind::ALL.len() {
        return;
    }
    loop {
        // Every REDISCOVERY_INTERVAL, or at once when a reconcile found a kind served that
        // this run does not watch.
        tokio::select! {
            _ = tokio::time::sleep(REDISCOVERY_INTERVAL) => {}
            _ = now.notified() => {}
        }
        if let Ok(kinds) = served_kinds(&client).await {
            if kinds.iter().any(|k| !served.contains(k)) {
                let _ = found.send(Some(kinds));
                return;
            }
        }
    }
}

/// One run of the controller with the watches of `served`, until `stop` resolves.
#[allow(clippy::too_many_arguments)]
async fn run_controller(
    client: &Client,
    probes: &Client,
    chart: Arc<Chart>,
    settings: Arc<Settings>,
    metrics: Arc<Metrics>,
    served: Served,
    rediscover: Arc<tokio::sync::Notify>,
    on_ready: impl FnOnce(),
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let missing: Vec<&str> = Kind::ALL.iter().filter(|k| !served.kinds.contains(k)).map(|k| k.kind()).collect();
    if !missing.is_empty() {
        tracing::warn!(
            ?missing,
            "optional kinds are not served; CRs that need them report ApplyFailed until their CRDs are installed"
        );
    }
    let namespace = settings.namespace.as_deref();
    let (caches, streams) = children::watch(client, namespace, &served.kinds);
    let (pods, pod_stream) = pods::watch(client, namespace);
    let recorder = Recorder::new(
        client.clone(),
        Reporter { controller: "model-orchestra-operator".into(), instance: Some(settings.identity.clone()) },
    );
    let (concurrency, read_at) = (settings.concurrency, served.read_at);
    let (prober, woken) = prober::Prober::new(probes.clone(), prober::Route::detect(), metrics.clone());
    let woken = futures::stream::unfold(woken, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    // A model pull's progress reconciles its CR (Ollama applications).
    let (puller, pulled) = models::Puller::new(probes.clone(), prober::Route::detect());
    let pulled = futures::stream::unfold(pulled, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let admission = admission::AdmissionWatch::default();
    let admission_task = tokio::spawn(admission.clone().run(client.clone(), namespace.map(str::to_string)));
    let view = context::ClusterView {
        client: client.clone(),
        caches,
        pods,
        served: served.kinds,
        rediscover,
        read_at,
        prober,
        puller,
        admission,
    };
    let ctx = Arc::new(Context::new(view, chart, settings.clone(), metrics, recorder));

    let ar = ctx.cr_resource();
    let crs: Api<CachedCr> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    // Our own reflector for the CRs, so that managedFields (the bulk of a CR with status)
    // are dropped before caching, and so that deletions reach the context: a deleted CR's
    // state is forgotten (the reconciler never hears of it).
    let writer = reflector::store::Writer::new(ar.clone());
    let reader = writer.as_reader();
    let (forget_ctx, store) = (ctx.clone(), reader.clone());
    let cr_stream = watcher(crs, watcher::Config::default())
        .default_backoff()
        // managedFields are dropped except the write that created the CR, without its
        // field set: its apiVersion routes an unlabelled CR never served yet
        // (`reconcile::routing`).
        .modify(|o: &mut CachedCr| {
            let fields = o.metadata.managed_fields.take().unwrap_or_default();
            let created = o.metadata.creation_timestamp.as_ref();
            o.metadata.managed_fields =
                crate::reconcile::routing::creation_write(&fields, crate::reconcile::plan::FIELD_MANAGER, created)
                    .map(|e| vec![ManagedFieldsEntry { fields_v1: None, ..e.clone() }]);
        })
        .reflect(writer)
        .inspect_ok(move |event| match event {
            watcher::Event::Delete(o) => forget_ctx.deleted(&key(o)),
            // A relist may have missed deletions: keep only what the new list has.
            watcher::Event::InitDone => {
                forget_ctx.forget_all_but(&store.state().iter().map(|o| key(o)).collect::<HashSet<_>>())
            }
            _ => {}
        })
        .applied_objects();
    let mut controller = Controller::for_stream_with(cr_stream, reader, ar.clone())
        .with_config(ControllerConfig::default().concurrency(concurrency).debounce(Duration::from_millis(200)));
    for (child, stream) in streams.metadata {
        controller = controller.watches_stream_with(stream, owner(ar.clone()), child);
    }
    if let Some(stream) = streams.deployments {
        controller = controller.watches_stream_with(stream, owner(ar.clone()), ());
    }
    if let Some(stream) = streams.jobs {
        controller = controller.watches_stream_with(stream, owner(ar.clone()), ());
    }
    // A pod's labels name its release (the CR): its problems go to that CR's status.
    let pod_owner_ar = ar.clone();
    controller = controller.watches_stream_with(
        pod_stream,
        move |pod| {
            pods::Pods::owner(&pod).map(|(name, ns)| ObjectRef::new_with(&name, pod_owner_ar.clone()).within(&ns))
        },
        (),
    );
    // A probe's result reconciles its CR (verified promotion).
    controller = controller.reconcile_on(woken);
    controller = controller.reconcile_on(pulled);
    let ready_ctx = ctx.clone();
    let controller = controller.graceful_shutdown_on(stop).run(reconcile, error_policy, ctx);
    tokio::pin!(controller);
    // Readiness: once the child caches have listed (prune decisions need them complete).
    tokio::select! {
        _ = async { ready_ctx.caches.wait_until_ready().await; ready_ctx.pods.wait_until_ready().await } => on_ready(),
        _ = controller.next() => {}
    }
    controller
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
    admission_task.abort();
}
