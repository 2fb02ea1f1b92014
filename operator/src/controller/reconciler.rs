//! One reconcile of one ModelOrchestra: route → parse → render → plan → (skip if nothing
//! changed) apply → prune → status. The order matters: nothing is applied or pruned until
//! the whole spec has rendered, and nothing is pruned until every apply succeeded.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::children::{api_resource, Caches};
use crate::api::{ModelOrchestraStatus, GROUP, KIND, VERSION};
use crate::chart::Chart;
use crate::kinds::Kind;
use crate::operations::metrics::Metrics;
use crate::reconcile::backoff::Backoff;
use crate::reconcile::plan::{self, ApplyPlan, Owner, FIELD_MANAGER};
use crate::reconcile::routing::is_routed_here;
use crate::reconcile::status::{self, deployment_readiness, Observed, Outcome, READY};

/// What the reconciler needs; shared by every reconcile.
pub struct Context {
    pub client: Client,
    pub chart: Chart,
    pub caches: Caches,
    pub routing: String,
    pub claim_unlabeled: bool,
    pub resync: Duration,
    pub operator_version: String,
    /// Kinds the cluster serves (the optional ones, KEDA and Prometheus, may be missing).
    pub served: Vec<Kind>,
    pub backoff: Backoff,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    /// Per CR: the plan hash and children's resourceVersions after the last full apply.
    applied: Mutex<HashMap<String, AppliedState>>,
}

/// What the last full apply of a CR left behind. While the CR's generation is the same
/// (its spec, hence its render, unchanged) and every child still has the recorded
/// resourceVersion, a reconcile needs neither a render nor any write.
#[derive(Debug, Clone)]
struct AppliedState {
    uid: String,
    generation: Option<i64>,
    hash: String,
    objects: Vec<Planned>,
    versions: HashMap<(Kind, String), String>,
}

/// The facts about a planned object that drift checks and status need.
#[derive(Debug, Clone)]
struct Planned {
    kind: Kind,
    name: String,
    /// `gateway` or the application name.
    component: String,
    /// A Service's first port.
    port: Option<i64>,
}

fn planned(plan: &ApplyPlan) -> Vec<Planned> {
    plan.objects
        .iter()
        .map(|o| {
            let component = o.body["metadata"]["labels"]["app.kubernetes.io/component"].as_str().unwrap_or_default();
            Planned {
                kind: o.kind,
                name: o.name.clone(),
                component: component.strip_prefix("application-").unwrap_or(component).to_string(),
                port: o.body["spec"]["ports"][0]["port"].as_i64(),
            }
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("{0}")]
    Apply(String),
    #[error("writing status: {0}")]
    Status(#[source] kube::Error),
}

impl ReconcileError {
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Apply(_) => "ApplyFailed",
            ReconcileError::Status(_) => "StatusFailed",
        }
    }
}

impl Context {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        chart: Chart,
        caches: Caches,
        routing: String,
        claim_unlabeled: bool,
        resync: Duration,
        served: Vec<Kind>,
        metrics: Arc<Metrics>,
        recorder: Recorder,
    ) -> Self {
        Context {
            client,
            chart,
            caches,
            routing,
            claim_unlabeled,
            resync,
            operator_version: env!("CARGO_PKG_VERSION").into(),
            served,
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(300)),
            metrics,
            recorder,
            applied: Mutex::new(HashMap::new()),
        }
    }
}

pub fn mo_resource() -> ApiResource {
    ApiResource { group: GROUP.into(), version: VERSION.into(), api_version: format!("{GROUP}/{VERSION}"), kind: KIND.into(), plural: "modelorchestras".into() }
}

fn key(obj: &DynamicObject) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if !is_routed_here(obj.metadata.labels.as_ref(), &ctx.routing, ctx.claim_unlabeled) {
        // Another operator version's CR: forget it, so taking it back later re-applies.
        ctx.applied.lock().expect("applied lock").remove(&key(&obj));
        return Ok(Action::await_change());
    }
    if obj.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the children through their ownerReferences.
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let result = reconcile_routed(&obj, &ctx).await;
    ctx.metrics.observe_reconcile(started.elapsed(), result.as_ref().err().map(ReconcileError::reason));
    match &result {
        Ok(_) => ctx.backoff.succeeded(&key(&obj)),
        Err(e) => tracing::warn!(modelorchestra = %key(&obj), reason = e.reason(), error = %e, "reconcile failed"),
    }
    result
}

pub fn error_policy(obj: Arc<DynamicObject>, _err: &ReconcileError, ctx: Arc<Context>) -> Action {
    Action::requeue(ctx.backoff.failed(&key(&obj)))
}

async fn reconcile_routed(obj: &DynamicObject, ctx: &Context) -> Result<Action, ReconcileError> {
    let ns = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let previous: ModelOrchestraStatus = obj.data.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default();
    let generation = obj.metadata.generation;
    let key = key(obj);
    let uid = obj.uid().unwrap_or_default();

    // Fast path: same spec as the last full apply and no child changed since.
    let unchanged = ctx.applied.lock().expect("applied lock").get(&key).cloned().filter(|state| {
        state.uid == uid
            && state.generation == generation
            && previous.applied_hash.as_deref() == Some(state.hash.as_str())
            && state.objects.iter().all(|o| ctx.caches.resource_version(o.kind, &ns, &o.name).as_ref() == state.versions.get(&(o.kind, o.name.clone())))
    });
    if let Some(state) = unchanged {
        let observed = observe(ctx, &ns, &state.objects, BTreeMap::new());
        return report(ctx, obj, &ns, &previous, observed, state.hash).await;
    }

    // Parse strictly and render everything before touching the cluster.
    let value = serde_json::to_value(obj).expect("objects serialise");
    let rendered = crate::input::from_value(&value)
        .map_err(crate::error::RenderError::from)
        .and_then(|mo| crate::render(&ctx.chart, &mo, &ns));
    let rendered = match rendered {
        Ok(r) => r,
        Err(e) => {
            let message = format!("{e}");
            ctx.metrics.count_error("RenderFailed");
            let status = status::next_status(&previous, generation, &Outcome::RenderFailed(message.clone()), &Observed::default(), &ctx.operator_version, None, &now());
            publish_if_new(ctx, obj, &previous, &status, EventType::Warning, "RenderFailed", &message).await;
            write_status(ctx, &ns, &name, &previous, status).await?;
            // Retrying cannot help: the next change to the CR triggers the next attempt.
            return Ok(Action::await_change());
        }
    };
    let owner = Owner { name: name.clone(), uid: uid.clone() };
    let plan = plan::plan(&owner, rendered);

    let missing: Vec<String> = plan
        .objects
        .iter()
        .filter(|o| !ctx.served.contains(&o.kind))
        .map(|o| format!("{} ({})", o.kind.kind(), o.kind.api_version()))
        .collect();
    if !missing.is_empty() {
        let message = format!("the cluster does not serve {}: install its CRD or disable the feature in the spec", missing.join(", "));
        return fail(ctx, obj, &previous, message).await;
    }

    let mut fresh_deployments: BTreeMap<String, Deployment> = BTreeMap::new();
    let mut versions = HashMap::new();
    for o in &plan.objects {
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &api_resource(o.kind));
        let applied = api
            .patch(&o.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&o.body))
            .await
            .map_err(|e| format!("applying {} {}: {}", o.kind.kind(), o.name, api_error(&e)));
        let applied = match applied {
            Ok(a) => a,
            Err(message) => return fail(ctx, obj, &previous, message).await,
        };
        if let Some(rv) = applied.resource_version() {
            versions.insert((o.kind, o.name.clone()), rv);
        }
        if o.kind == Kind::Deployment {
            if let Ok(d) = serde_json::to_value(&applied).and_then(serde_json::from_value::<Deployment>) {
                fresh_deployments.insert(o.name.clone(), d);
            }
        }
    }
    ctx.metrics.count_applied(plan.objects.len());

    let children = ctx.caches.children(&ns, &name);
    let existing: Vec<_> = children.iter().map(|c| c.existing.clone()).collect();
    for gone in plan::prune(&owner, &plan, &existing) {
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &api_resource(gone.kind));
        // The precondition makes sure a same-named object created since the cache saw it
        // is not the one deleted.
        let child_uid = children.iter().find(|c| c.existing == *gone).and_then(|c| c.uid.clone());
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions { uid: child_uid, resource_version: None }),
            ..Default::default()
        };
        match api.delete(&gone.name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return fail(ctx, obj, &previous, format!("pruning {} {}: {}", gone.kind.kind(), gone.name, api_error(&e))).await,
        }
        ctx.metrics.count_pruned(1);
        tracing::info!(modelorchestra = %key, kind = gone.kind.kind(), name = %gone.name, "pruned");
    }

    let objects = planned(&plan);
    let observed = observe(ctx, &ns, &objects, fresh_deployments);
    let state = AppliedState { uid, generation, hash: plan.hash.clone(), objects, versions };
    ctx.applied.lock().expect("applied lock").insert(key, state);
    report(ctx, obj, &ns, &previous, observed, plan.hash).await
}

/// Writes the status of a CR whose objects are all applied (if it changed).
async fn report(ctx: &Context, obj: &DynamicObject, ns: &str, previous: &ModelOrchestraStatus, observed: Observed, hash: String) -> Result<Action, ReconcileError> {
    let status = status::next_status(previous, obj.metadata.generation, &Outcome::Applied, &observed, &ctx.operator_version, Some(hash), &now());
    let ready = status::condition(&status, READY);
    let (reason, message) = match ready {
        Some(c) if c.status == "True" => ("Ready", c.message.clone()),
        Some(c) => ("Progressing", c.message.clone()),
        None => ("Progressing", String::new()),
    };
    publish_if_new(ctx, obj, previous, &status, EventType::Normal, reason, &message).await;
    write_status(ctx, ns, &obj.name_any(), previous, status).await?;
    Ok(Action::requeue(ctx.resync))
}

/// Records an apply failure in the status and returns the error that backs the CR off.
async fn fail(ctx: &Context, obj: &DynamicObject, previous: &ModelOrchestraStatus, message: String) -> Result<Action, ReconcileError> {
    let ns = obj.namespace().unwrap_or_else(|| "default".into());
    let status = status::next_status(previous, obj.metadata.generation, &Outcome::ApplyFailed(message.clone()), &Observed { components: previous.applications.clone(), gateway_address: previous.gateway_address.clone() }, &ctx.operator_version, None, &now());
    publish_if_new(ctx, obj, previous, &status, EventType::Warning, "ApplyFailed", &message).await;
    // The status write may fail for the same reason; the apply error is what matters.
    let _ = write_status(ctx, &ns, &obj.name_any(), previous, status).await;
    Err(ReconcileError::Apply(message))
}

/// Per-component readiness: Deployments just applied (their response carries status) or
/// from the cache; and the gateway Service's address.
fn observe(ctx: &Context, ns: &str, objects: &[Planned], fresh: BTreeMap<String, Deployment>) -> Observed {
    let mut observed = Observed::default();
    for o in objects {
        match o.kind {
            Kind::Deployment => {
                let d = fresh.get(&o.name).cloned().or_else(|| ctx.caches.deployment(ns, &o.name).map(|d| (*d).clone()));
                observed.components.insert(o.component.clone(), deployment_readiness(d.as_ref()));
            }
            Kind::Service if o.component == "gateway" => {
                observed.gateway_address = Some(format!("{}.{ns}.svc:{}", o.name, o.port.unwrap_or(80)));
            }
            _ => {}
        }
    }
    observed
}

async fn write_status(ctx: &Context, ns: &str, name: &str, previous: &ModelOrchestraStatus, status: ModelOrchestraStatus) -> Result<(), ReconcileError> {
    if *previous == status {
        return Ok(());
    }
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &mo_resource());
    let body = json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": KIND, "status": status});
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await.map_err(ReconcileError::Status)?;
    Ok(())
}

/// Publishes an Event when the Ready condition's reason or message changes (a transition
/// or a new failure), not on every reconcile.
async fn publish_if_new(ctx: &Context, obj: &DynamicObject, previous: &ModelOrchestraStatus, next: &ModelOrchestraStatus, type_: EventType, reason: &str, message: &str) {
    let before = status::condition(previous, READY).map(|c| (c.reason.clone(), c.message.clone()));
    let after = status::condition(next, READY).map(|c| (c.reason.clone(), c.message.clone()));
    if before == after {
        return;
    }
    let event = Event { type_, reason: reason.into(), note: Some(truncate(message, 1000)), action: "Reconcile".into(), secondary: None };
    let reference = obj.object_ref(&mo_resource());
    if let Err(e) = ctx.recorder.publish(&event, &reference).await {
        tracing::debug!(error = %e, "cannot publish event");
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn api_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}
