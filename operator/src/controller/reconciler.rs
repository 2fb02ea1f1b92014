//! One reconcile of one ModelOrchestra: route → fetch the facts → validate and render →
//! plan → dry-run → apply → prune → report. Nothing is applied or pruned until the whole
//! spec has rendered and the API server has accepted every object in a dry run, and nothing
//! is pruned until every apply succeeded.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::children::Caches;
use super::pods::Pods;
use crate::chart::{Chart, Component};
use crate::error::RenderError;
use crate::operations::metrics::Metrics;
use crate::reconcile::backoff::{Backoff, Retry};
use crate::reconcile::condition::{ConditionType, Reason};
use crate::reconcile::drift::{combine, drift, Drift};
use crate::reconcile::model::{self, Download};
use crate::reconcile::plan::{self, ApplyPlan, Owner, PlannedObject, FIELD_MANAGER};
use crate::reconcile::routing::{self, is_routed_here};
use crate::reconcile::status::{self, deployment_readiness, Health, Observed, Outcome, Report};
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::v1alpha2::ModelOrchestraStatus;
use model_orchestra_api::KIND;

/// Objects of one CR applied (or dry-run) at once.
const APPLY_CONCURRENCY: usize = 8;

/// What the operator knows of the cluster: a client, the caches its watches fill, and the
/// kinds the cluster serves.
pub struct ClusterView {
    pub client: Client,
    pub caches: Caches,
    pub pods: Pods,
    /// Kinds the cluster serves (the optional ones, KEDA and Prometheus, may be missing).
    pub served: Vec<Kind>,
}

/// What every reconcile reads: the cluster view, the chart and the settings.
pub struct Context {
    pub client: Client,
    pub caches: Caches,
    pub pods: Pods,
    pub served: Vec<Kind>,
    pub chart: Arc<Chart>,
    pub settings: ReconcileSettings,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub backoff: Backoff,
    /// Per CR: what its last full apply left behind.
    memory: Mutex<HashMap<String, AppliedState>>,
}

/// The settings a reconcile needs.
#[derive(Debug, Clone)]
pub struct ReconcileSettings {
    pub routing: String,
    pub claim_unlabeled: bool,
    /// How often a converged CR is looked at again.
    pub resync: Duration,
    pub operator_version: String,
}

impl Context {
    /// The ModelOrchestra resource at the version this line serves (its chart's).
    pub fn cr_resource(&self) -> ApiResource {
        self.chart.api_version().resource()
    }

    pub fn new(
        view: ClusterView,
        chart: Arc<Chart>,
        settings: ReconcileSettings,
        metrics: Arc<Metrics>,
        recorder: Recorder,
    ) -> Self {
        let ClusterView { client, caches, pods, served } = view;
        let backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(300));
        Context {
            client,
            caches,
            pods,
            served,
            chart,
            settings,
            metrics,
            recorder,
            backoff,
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// Drops everything kept about the CR `key` (deleted, or routed to another line).
    pub fn forget(&self, key: &str) {
        self.memory.lock().expect("memory lock").remove(key);
        self.backoff.succeeded(key);
        self.update_tracked();
    }

    /// Drops everything kept about CRs not in `live` (after a relist that may have missed
    /// deletions).
    pub fn forget_all_but(&self, live: &std::collections::HashSet<String>) {
        self.memory.lock().expect("memory lock").retain(|k, _| live.contains(k));
        self.backoff.retain(|k| live.contains(k));
        self.update_tracked();
    }

    fn remember(&self, key: String, state: AppliedState) {
        self.memory.lock().expect("memory lock").insert(key, state);
        self.update_tracked();
    }

    fn update_tracked(&self) {
        let n = self.memory.lock().expect("memory lock").len();
        self.metrics.tracked.set(n as i64);
    }
}

/// What the last full apply of a CR left behind. While the CR's generation is the same (its
/// spec, hence its render, unchanged) and no child changed since (same resourceVersion, or
/// for Deployments the same generation: their status changes all the time), a reconcile
/// needs neither a render nor any write.
#[derive(Debug, Clone)]
struct AppliedState {
    uid: String,
    generation: Option<i64>,
    /// The CR's refresh annotation (it changes the render, not the generation).
    refresh_annotation: Option<String>,
    /// The refresh value each cached application's model is downloaded for.
    refresh: BTreeMap<String, String>,
    hash: String,
    objects: Vec<Planned>,
    at: Instant,
}

/// The facts about an applied object that drift checks and status need.
#[derive(Debug, Clone)]
struct Planned {
    kind: Kind,
    name: String,
    component: Component,
    /// A Service's first port.
    port: Option<i64>,
    /// resourceVersion (or, for a Deployment, generation) after the apply.
    version: Option<String>,
    /// A download Job's revision and model.
    model: Option<model::CachedModel>,
}

/// Why a reconcile failed. The `kube::Error` stays the source, so the retry policy can tell
/// a conflict from a refusal from a server error.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("{0}")]
    Render(#[from] RenderError),
    #[error("the cluster does not serve {0}: install its CRD or disable the feature in the spec")]
    Unserved(String),
    #[error("{step} {kind} {name}: {}", api_message(.source))]
    Request { step: Step, kind: &'static str, name: String, source: kube::Error },
    #[error("writing status: {}", api_message(.0))]
    Status(kube::Error),
}

/// The request a [`ReconcileError::Request`] failed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    DryRun,
    Apply,
    Prune,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::DryRun => "the API server refuses",
            Step::Apply => "applying",
            Step::Prune => "pruning",
        })
    }
}

impl ReconcileError {
    fn request(step: Step, o: &PlannedObject, source: kube::Error) -> Self {
        ReconcileError::Request { step, kind: o.kind.kind(), name: o.name.clone(), source }
    }

    /// The status code of the API server's answer, if there was one.
    fn code(&self) -> Option<u16> {
        match self {
            ReconcileError::Request { source: kube::Error::Api(s), .. }
            | ReconcileError::Status(kube::Error::Api(s)) => Some(s.code),
            _ => None,
        }
    }

    pub fn reason(&self) -> Reason {
        match (self, self.code()) {
            (ReconcileError::Render(_), _) => Reason::RenderFailed,
            (ReconcileError::Request { step: Step::DryRun, .. }, Some(400 | 422)) => Reason::Invalid,
            (ReconcileError::Request { step: Step::DryRun, .. }, Some(403)) => Reason::Forbidden,
            (ReconcileError::Status(_), _) => Reason::StatusFailed,
            _ => Reason::ApplyFailed,
        }
    }

    /// How to retry: a conflict at once; an invalid spec or object when the CR changes (or
    /// at the next resync); anything else (forbidden, server errors, timeouts) with backoff.
    pub fn retry(&self) -> Retry {
        match (self, self.code()) {
            (ReconcileError::Render(_), _) => Retry::OnChange,
            (_, Some(409)) => Retry::Now,
            (_, Some(400 | 404 | 422)) => Retry::OnChange,
            // A refusal can end without the CR changing: an admin grants the missing RBAC,
            // or the API server's admission learns a CRD version it had not mapped yet
            // ("cannot find RESTMapping", seconds after a CRD install). Backoff still
            // reaches the resync interval for one that lasts.
            _ => Retry::Backoff,
        }
    }

    /// What the status says about it.
    fn outcome(&self) -> Outcome {
        let message = self.to_string();
        match self.reason() {
            Reason::RenderFailed => Outcome::RenderFailed(message),
            reason @ (Reason::Invalid | Reason::Forbidden) => Outcome::Refused { reason, message },
            _ => Outcome::ApplyFailed(message),
        }
    }
}

/// `message (code Reason)` of an API error; the error itself otherwise.
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

/// `namespace/name` of a CR: the key of everything kept per CR.
pub fn key(obj: &DynamicObject) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The facts about the CR a reconcile starts from.
struct Cr<'a> {
    obj: &'a DynamicObject,
    key: String,
    namespace: String,
    name: String,
    uid: String,
    generation: Option<i64>,
    previous: ModelOrchestraStatus,
    /// `models.titanml.co/refresh`.
    refresh_annotation: Option<String>,
}

impl<'a> Cr<'a> {
    fn fetch(obj: &'a DynamicObject) -> Self {
        Cr {
            obj,
            key: key(obj),
            namespace: obj.namespace().unwrap_or_else(|| "default".into()),
            name: obj.name_any(),
            uid: obj.uid().unwrap_or_default(),
            generation: obj.metadata.generation,
            previous: obj.data.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default(),
            refresh_annotation: obj.annotations().get(model::REFRESH_ANNOTATION).cloned(),
        }
    }

    fn owner(&self, api_version: String) -> Owner {
        Owner { api_version, name: self.name.clone(), uid: self.uid.clone() }
    }
}

pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let s = &ctx.settings;
    // The watch keeps only the user's last spec write of the managedFields (controller::run).
    let written = routing::written_version(obj.metadata.managed_fields.as_ref().and_then(|m| m.first()));
    if !is_routed_here(
        obj.metadata.labels.as_ref(),
        written,
        &s.routing,
        ctx.chart.api_version().as_str(),
        s.claim_unlabeled,
    ) {
        // Another line's CR: forget it, so taking it back later applies again.
        ctx.forget(&key(&obj));
        return Ok(Action::await_change());
    }
    if obj.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the children through their ownerReferences.
        ctx.forget(&key(&obj));
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let cr = Cr::fetch(&obj);
    let result = reconcile_routed(&cr, &ctx).await;
    ctx.metrics.observe_reconcile(started.elapsed(), result.as_ref().err().map(|e| e.reason().as_str()));
    match &result {
        Ok(_) => ctx.backoff.succeeded(&cr.key),
        Err(e) => {
            tracing::warn!(modelorchestra = %cr.key, reason = %e.reason(), error = %e, "reconcile failed");
            report_failure(&ctx, &cr, e).await;
        }
    }
    result
}

pub fn error_policy(obj: Arc<DynamicObject>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    match err.retry() {
        Retry::Now => Action::requeue(Duration::from_millis(100)),
        Retry::OnChange => Action::requeue(ctx.settings.resync),
        Retry::Backoff => Action::requeue(ctx.backoff.failed(&key(&obj))),
    }
}

async fn reconcile_routed(cr: &Cr<'_>, ctx: &Context) -> Result<Action, ReconcileError> {
    match since_last_apply(cr, ctx) {
        SinceLastApply::Unchanged(state) => {
            let observed = observe(ctx, cr, &state.objects, &BTreeMap::new(), &state.refresh);
            return report_applied(ctx, cr, observed, state.hash).await;
        }
        // The watch event that brings the cache up to date reconciles again; the requeue
        // covers a lost one.
        SinceLastApply::CacheBehind => return Ok(Action::requeue(Duration::from_secs(1))),
        SinceLastApply::Changed => {}
    }
    let (plan, refresh) = render_and_plan(cr, ctx)?;
    dry_run(ctx, cr, &plan).await?;
    let applied = apply(ctx, cr, &plan).await?;
    prune(ctx, cr, &plan).await?;
    let deployments: BTreeMap<String, Deployment> = applied
        .iter()
        .filter(|(o, _)| o.kind == Kind::Deployment)
        .filter_map(|(o, a)| Some((o.name.clone(), serde_json::to_value(a).and_then(serde_json::from_value).ok()?)))
        .collect();
    let objects: Vec<Planned> = applied.iter().map(|(o, a)| planned(o, a)).collect();
    let observed = observe(ctx, cr, &objects, &deployments, &refresh);
    let state = AppliedState {
        uid: cr.uid.clone(),
        generation: cr.generation,
        refresh_annotation: cr.refresh_annotation.clone(),
        refresh,
        hash: plan.hash.clone(),
        objects,
        at: Instant::now(),
    };
    ctx.remember(cr.key.clone(), state);
    report_applied(ctx, cr, observed, plan.hash).await
}

enum SinceLastApply {
    /// Neither the CR's spec nor any child changed: the state of the last full apply.
    Unchanged(AppliedState),
    /// Nothing changed that the cache shows yet, but it has not seen every write of the last apply.
    CacheBehind,
    /// The spec or a child changed, or there was no apply yet: render and apply.
    Changed,
}

fn since_last_apply(cr: &Cr, ctx: &Context) -> SinceLastApply {
    let memory = ctx.memory.lock().expect("memory lock");
    let Some(state) = memory.get(&cr.key) else { return SinceLastApply::Changed };
    // Not the CR's status.appliedHash: the cached CR often lags behind the status this
    // operator just wrote, and reading that as a change re-applied a third of the CRs of the
    // benchmark. The memory is what was applied; report_applied repairs the status.
    let same_spec =
        state.uid == cr.uid && state.generation == cr.generation && state.refresh_annotation == cr.refresh_annotation;
    if !same_spec {
        return SinceLastApply::Changed;
    }
    let since = state.at.elapsed();
    let children = state
        .objects
        .iter()
        .map(|o| drift(ctx.caches.version(o.kind, &cr.namespace, &o.name).as_deref(), o.version.as_deref(), since));
    match combine(children) {
        Drift::Same => SinceLastApply::Unchanged(state.clone()),
        Drift::CacheBehind => SinceLastApply::CacheBehind,
        Drift::Changed => SinceLastApply::Changed,
    }
}

/// Parses the CR strictly, renders every object and plans the apply: all before anything
/// touches the cluster. An application whose model is being downloaded is held at zero
/// replicas, or kept on its earlier download of the same model ([`model::Gate`]). Returns
/// the plan and the refresh value each model is downloaded for.
fn render_and_plan(cr: &Cr, ctx: &Context) -> Result<(ApplyPlan, BTreeMap<String, String>), ReconcileError> {
    let value = serde_json::to_value(cr.obj).expect("objects serialise");
    let doc = model_orchestra_api::parse::document(&value).map_err(RenderError::from)?;
    // The watch is at the version this line serves (its chart's), so that is what arrives.
    let version = crate::versions::served(ctx.chart.api_version());
    let values = version.values(&doc.spec).map_err(|e| RenderError::from(e.prefixed("spec")))?;
    let apps: Vec<&str> = values.applications.iter().flatten().map(|(k, _)| k.as_str()).collect();
    let refresh = model::refresh_values(cr.refresh_annotation.as_deref(), &apps, &cr.previous);
    let mut rendered = ctx.chart.render(&cr.name, &cr.namespace, &values, &refresh)?.objects;
    let gates = downloads(ctx, cr, &model::cached_models(&rendered), &refresh)
        .into_iter()
        .map(|(app, d)| (app, d.gate()))
        .collect();
    model::apply_gates(&mut rendered, &gates);
    let plan = plan::plan(&cr.owner(ctx.cr_resource().api_version), rendered);
    let unserved: Vec<String> = plan
        .objects
        .iter()
        .filter(|o| !ctx.served.contains(&o.kind))
        .map(|o| format!("{} ({})", o.kind.kind(), o.kind.api_version()))
        .collect();
    if !unserved.is_empty() {
        return Err(ReconcileError::Unserved(unserved.join(", ")));
    }
    Ok((plan, refresh))
}

/// Where each cached application's download stands, and what its pods run on meanwhile.
fn downloads(
    ctx: &Context,
    cr: &Cr,
    models: &BTreeMap<String, model::CachedModel>,
    refresh: &BTreeMap<String, String>,
) -> BTreeMap<String, Download> {
    models
        .iter()
        .map(|(app, m)| {
            let cached = ctx.caches.job(&cr.namespace, &m.job);
            let pod = ctx.pods.download_pod(&cr.namespace, &cr.name, app);
            let (phase, message) = model::download_state(&m.job, cached.as_deref(), pod.as_ref());
            let previous = cr.previous.applications.get(app).and_then(|a| a.model.as_ref());
            let serving = model::serving(m, phase, previous);
            (app.clone(), Download { job: m.job.clone(), phase, message, refresh: refresh.get(app).cloned(), serving })
        })
        .collect()
}

/// Server-side applies one object (as a dry run, or for real).
async fn apply_one(
    ctx: &Context,
    namespace: &str,
    o: &PlannedObject,
    step: Step,
) -> Result<DynamicObject, ReconcileError> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &o.kind.resource());
    let params = PatchParams { dry_run: step == Step::DryRun, ..PatchParams::apply(FIELD_MANAGER).force() };
    api.patch(&o.name, &params, &Patch::Apply(&o.body)).await.map_err(|e| ReconcileError::request(step, o, e))
}

/// Applies every object of the plan, several at once, in `step` (dry run or real);
/// returns what the server answered, in plan order.
async fn apply_all(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &ApplyPlan,
    step: Step,
) -> Result<Vec<DynamicObject>, ReconcileError> {
    // Indices, not references, go through the stream: its futures must be `Send` for any
    // lifetime the controller picks.
    stream::iter(0..plan.objects.len())
        .map(|i| apply_one(ctx, &cr.namespace, &plan.objects[i], step))
        .buffered(APPLY_CONCURRENCY)
        .try_collect()
        .await
}

/// Every object, server-side applied as a dry run: any refusal (schema, admission policy,
/// RBAC) means nothing at all is written.
async fn dry_run(ctx: &Context, cr: &Cr<'_>, plan: &ApplyPlan) -> Result<(), ReconcileError> {
    apply_all(ctx, cr, plan, Step::DryRun).await.map(drop)
}

/// Server-side applies every object; returns each with what the server answered.
async fn apply<'p>(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &'p ApplyPlan,
) -> Result<Vec<(&'p PlannedObject, DynamicObject)>, ReconcileError> {
    let applied = apply_all(ctx, cr, plan, Step::Apply).await?;
    ctx.metrics.count_applied(applied.len());
    Ok(plan.objects.iter().zip(applied).collect())
}

/// Deletes what this CR's previous renders produced and this one does not (see
/// [`plan::prune`] for what may be deleted).
async fn prune(ctx: &Context, cr: &Cr<'_>, plan: &ApplyPlan) -> Result<(), ReconcileError> {
    let owner = cr.owner(ctx.cr_resource().api_version);
    let children = ctx.caches.children(&cr.namespace, &cr.name);
    let existing: Vec<_> = children.iter().map(|c| c.existing.clone()).collect();
    for gone in plan::prune(&owner, plan, &existing) {
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &cr.namespace, &gone.kind.resource());
        // The precondition makes sure a same-named object created since the cache saw it
        // is not the one deleted.
        let uid = children.iter().find(|c| c.existing == *gone).and_then(|c| c.uid.clone());
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions { uid, resource_version: None }),
            ..Default::default()
        };
        match api.delete(&gone.name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(ReconcileError::Request {
                    step: Step::Prune,
                    kind: gone.kind.kind(),
                    name: gone.name.clone(),
                    source,
                })
            }
        }
        ctx.metrics.count_pruned(1);
        tracing::info!(modelorchestra = %cr.key, kind = gone.kind.kind(), name = %gone.name, "pruned");
    }
    Ok(())
}

fn planned(o: &PlannedObject, applied: &DynamicObject) -> Planned {
    let version = match o.kind {
        Kind::Deployment => applied.metadata.generation.map(|g| g.to_string()),
        _ => applied.metadata.resource_version.clone(),
    };
    let model = (o.kind == Kind::Job).then(|| model::CachedModel::of_job(&o.name, &o.body));
    Planned {
        kind: o.kind,
        name: o.name.clone(),
        component: o.component.clone(),
        port: o.body["spec"]["ports"][0]["port"].as_i64(),
        version,
        model,
    }
}

/// Readiness per component, from the Deployments just applied (their response carries
/// status) or the cache, with the pods' problems; and the gateway Service's address.
fn observe(
    ctx: &Context,
    cr: &Cr,
    objects: &[Planned],
    fresh: &BTreeMap<String, Deployment>,
    refresh: &BTreeMap<String, String>,
) -> Observed {
    let models: BTreeMap<String, model::CachedModel> = objects
        .iter()
        .filter_map(|o| match (&o.component, &o.model) {
            (Component::Application(app), Some(m)) => Some((app.clone(), m.clone())),
            _ => None,
        })
        .collect();
    let mut observed = Observed {
        models: downloads(ctx, cr, &models, refresh),
        refresh: cr.refresh_annotation.clone(),
        ..Default::default()
    };
    for o in objects {
        match (o.kind, &o.component) {
            (Kind::Deployment, component) => {
                let d = fresh
                    .get(&o.name)
                    .cloned()
                    .or_else(|| ctx.caches.deployment(&cr.namespace, &o.name).map(|d| (*d).clone()));
                let replicas = deployment_readiness(d.as_ref());
                let problem = if replicas.ready { None } else { ctx.pods.problem(&cr.namespace, &cr.name, component) };
                let health = Health { replicas, problem };
                match component {
                    Component::Gateway => observed.gateway = health,
                    Component::Application(app) => {
                        observed.applications.insert(app.clone(), health);
                    }
                    Component::Release => {}
                }
            }
            (Kind::Service, Component::Gateway) => {
                observed.gateway_address = Some(format!("{}.{}.svc:{}", o.name, cr.namespace, o.port.unwrap_or(80)));
            }
            _ => {}
        }
    }
    observed
}

/// Writes the status of a CR whose objects are all applied (if it changed).
async fn report_applied(
    ctx: &Context,
    cr: &Cr<'_>,
    observed: Observed,
    hash: String,
) -> Result<Action, ReconcileError> {
    write_status(ctx, cr, &Outcome::Applied { observed: Box::new(observed), hash })
        .await
        .map_err(ReconcileError::Status)?;
    Ok(Action::requeue(ctx.settings.resync))
}

/// Records a failure in the status (and an Event); the error is what the caller returns.
async fn report_failure(ctx: &Context, cr: &Cr<'_>, e: &ReconcileError) {
    if matches!(e, ReconcileError::Status(_)) {
        return;
    }
    // The status write may fail for the same reason; the original error is what matters.
    if let Err(status_error) = write_status(ctx, cr, &e.outcome()).await {
        tracing::debug!(modelorchestra = %cr.key, error = %status_error, "cannot record the failure in the status");
    }
}

/// Computes the next status; writes it (and publishes an Event when the Ready condition's
/// reason or message changes) only if it differs from the last one.
async fn write_status(ctx: &Context, cr: &Cr<'_>, outcome: &Outcome) -> Result<(), kube::Error> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let next = status::next_status(&Report {
        previous: &cr.previous,
        generation: cr.generation,
        outcome,
        operator_version: &ctx.settings.operator_version,
        now: &now,
    });
    if next == cr.previous {
        return Ok(());
    }
    publish_if_new(ctx, cr, &next).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &cr.namespace, &ctx.cr_resource());
    let body = json!({"apiVersion": ctx.cr_resource().api_version, "kind": KIND, "status": next});
    api.patch_status(&cr.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await?;
    Ok(())
}

/// Publishes an Event when the Ready condition's reason or message changes (a transition
/// or a new failure), not on every reconcile.
async fn publish_if_new(ctx: &Context, cr: &Cr<'_>, next: &ModelOrchestraStatus) {
    let ready = |s: &ModelOrchestraStatus| {
        status::condition(s, ConditionType::Ready).map(|c| (c.reason.clone(), c.message.clone()))
    };
    let (before, after) = (ready(&cr.previous), ready(next));
    let Some((reason, message)) = after.filter(|a| before.as_ref() != Some(a)) else {
        return;
    };
    let warning = next.conditions.iter().any(|c| c.type_ == ConditionType::Degraded.as_str() && c.status == "True");
    let event = Event {
        type_: if warning { EventType::Warning } else { EventType::Normal },
        reason,
        note: Some(truncate(&message, 1000)),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = cr.obj.object_ref(&ctx.cr_resource());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> ReconcileError {
        let status: kube::core::Status =
            serde_json::from_value(serde_json::json!({"code": code, "message": "m", "reason": "R"})).expect("a Status");
        ReconcileError::Request {
            step: Step::Apply,
            kind: "ServiceAccount",
            name: "x".into(),
            source: kube::Error::Api(Box::new(status)),
        }
    }

    #[test]
    fn a_conflict_is_retried_at_once() {
        assert_eq!(api_error(409).retry(), Retry::Now);
    }

    #[test]
    fn an_invalid_object_waits_for_a_change() {
        assert_eq!(api_error(422).retry(), Retry::OnChange);
    }

    #[test]
    fn a_forbidden_write_is_retried_with_backoff_since_rbac_can_change_without_the_cr() {
        assert_eq!(api_error(403).retry(), Retry::Backoff);
    }

    #[test]
    fn a_server_error_backs_off() {
        assert_eq!(api_error(503).retry(), Retry::Backoff);
    }
}
