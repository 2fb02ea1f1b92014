//! One reconcile of one ModelOrchestra: route → fetch the facts → validate and render →
//! plan → dry-run → apply → prune → report. Nothing is applied or pruned until the whole
//! spec has rendered and every object that could be refused has passed a dry run (see
//! [`admission`] for which need none), and nothing is pruned until every apply succeeded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{json, Value};

use super::admission::{AdmissionWatch, Permissions};
use super::children::Caches;
use super::pods::Pods;
use super::prober::Prober;
use super::Settings;
use crate::chart::{Chart, Component};
use crate::error::RenderError;
use crate::operations::metrics::Metrics;
use crate::reconcile::admission::{self, Facts};
use crate::reconcile::backoff::{Backoff, Retry};
use crate::reconcile::condition::{ConditionType, Reason};
use crate::reconcile::drift::{combine, drift, Drift};
use crate::reconcile::gates::{self, Gated, Held, Promotions};
use crate::reconcile::group::{self, Group};
use crate::reconcile::model::{self, Download};
use crate::reconcile::plan::{self, ApplyPlan, Owner, PlannedObject, FIELD_MANAGER};
use crate::reconcile::promotion::{self, Ask, Progress};
use crate::reconcile::routing::{self, Route, RoutingFacts};
use crate::reconcile::status::{self, deployment_readiness, Health, Observed, Outcome, Report};
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::lines::{API_VERSION_ANNOTATION, ROUTING_LABEL};
use model_orchestra_api::v1alpha2::{ModelOrchestraStatus, PromotionPhase, PromotionStatus};
use model_orchestra_api::ApiVersion;

/// Objects of one CR applied (or dry-run) at once.
const APPLY_CONCURRENCY: usize = 8;

/// What the operator knows of the cluster: a client, the caches its watches fill, and the
/// kinds the cluster serves.
pub(super) struct ClusterView {
    pub client: Client,
    pub caches: Caches,
    pub pods: Pods,
    /// Kinds the cluster serves (the optional ones, KEDA and Prometheus, may be missing).
    pub served: Vec<Kind>,
    /// The version CRs are read and their status written at.
    pub read_at: ApiVersion,
    /// Asks candidates the success prompt.
    pub prober: Prober,
    /// Pulls Ollama applications' models into their replicas.
    pub puller: super::models::Puller,
    /// What admission the cluster configures (which creations need a dry run).
    pub admission: AdmissionWatch,
}

/// What every reconcile reads: the cluster view, the chart and the settings.
pub(super) struct Context {
    pub client: Client,
    pub caches: Caches,
    pub pods: Pods,
    pub served: Vec<Kind>,
    pub read_at: ApiVersion,
    pub(super) prober: Prober,
    pub(super) puller: super::models::Puller,
    admission: AdmissionWatch,
    /// Which kinds RBAC lets the operator create where.
    permissions: Permissions,
    pub chart: Arc<Chart>,
    pub settings: Arc<Settings>,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub backoff: Backoff,
    /// Per CR, one entry: what its last full apply left behind, the status this operator
    /// last wrote, and (another line's CR whose latest generation is not reconciled) since
    /// when this line has seen it so, and whether it said so.
    memory: super::memory::Memory<AppliedState, StatusWrite, Unserved>,
}

/// How often a status that only counts more ready pods is written while a CR comes up.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(3);

/// The status this operator last wrote for a CR.
#[derive(Debug, Clone)]
struct StatusWrite {
    /// Kept only until the cached CR shows it.
    status: Option<ModelOrchestraStatus>,
    /// The CR's resourceVersion that write returned.
    resource_version: Option<String>,
    at: Instant,
    /// A progress-only change waits for `PROGRESS_INTERVAL` to pass.
    waiting: bool,
}

/// A CR of another line whose current generation no line has reconciled yet.
#[derive(Debug, Clone)]
struct Unserved {
    uid: String,
    generation: Option<i64>,
    since: Instant,
    reported: bool,
}

impl Context {
    /// The ModelOrchestra resource CRs are read and their status written at.
    pub(super) fn cr_resource(&self) -> ApiResource {
        self.read_at.resource()
    }

    pub(super) fn new(
        view: ClusterView,
        chart: Arc<Chart>,
        settings: Arc<Settings>,
        metrics: Arc<Metrics>,
        recorder: Recorder,
    ) -> Self {
        let ClusterView { client, caches, pods, served, read_at, prober, puller, admission } = view;
        let backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(300));
        Context {
            client,
            caches,
            pods,
            served,
            read_at,
            prober,
            puller,
            admission,
            permissions: Permissions::default(),
            chart,
            settings,
            metrics,
            recorder,
            backoff,
            memory: Default::default(),
        }
    }

    /// Drops everything kept about the CR `key` (deleted, or routed to another line).
    pub(super) fn forget(&self, key: &str) {
        self.memory.forget_reconciles(key);
        self.prober.stop_all(key);
        self.puller.forget(key);
        self.backoff.succeeded(key);
        self.update_tracked();
    }

    /// Drops everything kept about CRs not in `live` (after a relist that may have missed
    /// deletions).
    pub(super) fn forget_all_but(&self, live: &std::collections::HashSet<String>) {
        self.memory.retain(live);
        self.prober.retain_crs(live);
        self.puller.retain_crs(live);
        self.backoff.retain(|k| live.contains(k));
        self.update_tracked();
    }

    /// Drops a deleted CR entirely.
    pub(super) fn deleted(&self, key: &str) {
        self.forget(key);
        self.memory.remove(key);
    }

    /// When to reconcile a CR next: when a progress-only status change it holds back is due,
    /// else at the resync.
    fn next_reconcile(&self, key: &str) -> Action {
        self.memory.read(key, |e| match e.and_then(|e| e.status.as_ref()).filter(|w| w.waiting) {
            Some(w) => Action::requeue(PROGRESS_INTERVAL.saturating_sub(w.at.elapsed()) + Duration::from_millis(50)),
            None => Action::requeue(self.settings.resync),
        })
    }

    /// The status to compute the next one from: the last one this operator wrote while the
    /// cached CR has not caught up with that write, else the cached one.
    fn previous_status(&self, cr: &Cr) -> (ModelOrchestraStatus, Value) {
        let number = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
        let cached = number(cr.obj.metadata.resource_version.as_deref());
        let written = self.memory.change(&cr.key, |e| {
            let w = e.status.as_mut()?;
            match (cached, number(w.resource_version.as_deref()), &w.status) {
                (Some(c), Some(written), Some(status)) if c < written => Some(status.clone()),
                _ => {
                    w.status = None;
                    None
                }
            }
        });
        if let Some(status) = written {
            let json = serde_json::to_value(&status).expect("a status serialises");
            return (status, json);
        }
        (cr.previous.clone(), cr.obj.data.get("status").cloned().unwrap_or(Value::Null))
    }

    fn remember(&self, key: String, state: AppliedState) {
        self.memory.change(&key, |e| e.applied = Some(state));
        self.update_tracked();
    }

    fn update_tracked(&self) {
        self.metrics.tracked.set(self.memory.applied() as i64);
        self.metrics.model_agents.set(self.puller.agents() as i64);
        self.metrics.verifications.set(self.prober.running() as i64);
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
    /// The CR's retry-promotion annotation (likewise).
    retry_annotation: Option<String>,
    /// The refresh value each cached application's model is downloaded for.
    refresh: BTreeMap<String, String>,
    hash: String,
    objects: Vec<Planned>,
    /// The render's warnings (the spec has not changed since).
    warnings: Vec<String>,
    /// Each application's verified promotion, as last decided.
    promotions: BTreeMap<String, PromotionStatus>,
    /// Objects left as they were (an application whose new revision is being verified):
    /// observed, never pruned.
    held: Vec<Planned>,
    /// Each distributed-llama group, as its root was last gated.
    groups: BTreeMap<String, Group>,
    /// The Ollama applications, whose replicas are synced on every reconcile.
    ollama: super::engine_models::OllamaApps,
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
    /// The applied body's digest (none for an object held as it was).
    digest: Option<String>,
    /// A download Job's revision and model.
    model: Option<model::CachedModel>,
}

/// Why a reconcile failed. The `kube::Error` stays the source, so the retry policy can tell
/// a conflict from a refusal from a server error.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReconcileError {
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
pub(super) enum Step {
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

    /// Whether the API server's answer is a refusal of the object dressed as a server
    /// error: a malformed quantity fails to decode before validation and comes back as a
    /// 500 ("quantities must match the regular expression …"). Retrying cannot fix it.
    fn invalid_in_disguise(&self) -> bool {
        match self {
            ReconcileError::Request { source: kube::Error::Api(s), .. } if s.code == 500 => {
                s.message.contains("quantities must match the regular expression")
            }
            _ => false,
        }
    }

    pub(super) fn reason(&self) -> Reason {
        if self.invalid_in_disguise() {
            return Reason::Invalid;
        }
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
    pub(super) fn retry(&self) -> Retry {
        if self.invalid_in_disguise() {
            return Retry::OnChange;
        }
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
pub(super) fn key(obj: &DynamicObject) -> String {
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
    /// `models.titanml.co/retry-promotion`.
    retry_annotation: Option<String>,
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
            retry_annotation: obj.annotations().get(promotion::RETRY_ANNOTATION).cloned(),
        }
    }

    fn owner(&self, api_version: String) -> Owner {
        Owner { api_version, name: self.name.clone(), uid: self.uid.clone() }
    }
}

/// What routing reads of a CR (its creating write is the one managedFields entry the watch
/// keeps, see `controller::run`).
fn routing_facts(obj: &DynamicObject) -> RoutingFacts<'_> {
    RoutingFacts {
        labels: obj.metadata.labels.as_ref(),
        annotations: obj.metadata.annotations.as_ref(),
        recorded: obj.data.get("status").and_then(|s| s.get("servedAs")).and_then(Value::as_str),
        creation: obj.metadata.managed_fields.as_ref().and_then(|m| m.first()),
    }
}

pub(super) async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let route = routing::route(&routing_facts(&obj));
    if !ctx.settings.line.takes(&route) {
        // Another line's CR: forget it, so taking it back later applies again.
        ctx.forget(&key(&obj));
        return Ok(notice_unserved(&obj, &route, &ctx).await);
    }
    ctx.memory.change(&key(&obj), |e| e.unserved = None);
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
        Ok((_, changes)) => {
            ctx.backoff.succeeded(&cr.key);
            changes.log(&cr);
        }
        Err(e) => {
            tracing::warn!(modelorchestra = %cr.key, generation = ?cr.generation, reason = %e.reason(), error = %e, "reconcile failed");
            report_failure(&ctx, &cr, e).await;
        }
    }
    result.map(|(action, _)| action)
}

/// What a reconcile changed in the cluster; nothing for most resyncs.
#[derive(Debug, Default)]
struct Changes {
    applied: usize,
    pruned: usize,
    /// The Ready condition's new reason, when the status changed.
    status: Option<String>,
}

impl Changes {
    /// One info line per reconcile that changed something.
    fn log(&self, cr: &Cr) {
        if self.applied == 0 && self.pruned == 0 && self.status.is_none() {
            return;
        }
        tracing::info!(
            modelorchestra = %cr.key,
            generation = ?cr.generation,
            applied = self.applied,
            pruned = self.pruned,
            ready = self.status.as_deref().unwrap_or("unchanged"),
            "reconciled"
        );
    }
}

/// A CR routed to another line: if no line has reconciled its current generation for
/// `unserved_after`, say so once — an Event on the CR naming the line it waits for, and a
/// log line — without writing its status (only its own line does).
async fn notice_unserved(obj: &DynamicObject, route: &Route, ctx: &Context) -> Action {
    let key = key(obj);
    let observed = obj.data.get("status").and_then(|s| s["observedGeneration"].as_i64());
    if obj.metadata.deletion_timestamp.is_some() || (observed.is_some() && observed == obj.metadata.generation) {
        ctx.memory.change(&key, |e| e.unserved = None);
        return Action::await_change();
    }
    let (uid, generation) = (obj.uid().unwrap_or_default(), obj.metadata.generation);
    let elapsed = ctx.memory.change(&key, |e| {
        let entry = e.unserved.get_or_insert_with(|| Unserved {
            uid: uid.clone(),
            generation,
            since: Instant::now(),
            reported: false,
        });
        if entry.uid != uid || entry.generation != generation {
            *entry = Unserved { uid: uid.clone(), generation, since: Instant::now(), reported: false };
        }
        (!entry.reported).then(|| entry.since.elapsed())
    });
    let Some(elapsed) = elapsed else { return Action::requeue(ctx.settings.resync) };
    let bound = ctx.settings.unserved_after;
    if elapsed < bound {
        return Action::requeue(bound - elapsed + Duration::from_millis(500));
    }
    let message = format!(
        "no operator line has reconciled generation {} of this ModelOrchestra for {}s: it goes to {route}. {}",
        generation.unwrap_or_default(),
        elapsed.as_secs(),
        unserved_hint(route, &obj.name_any()),
    );
    tracing::warn!(modelorchestra = %key, generation = ?generation, "{message}");
    let event = Event {
        type_: EventType::Warning,
        reason: "NotServed".into(),
        note: Some(truncate(&message, 1000)),
        action: "Route".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &obj.object_ref(&ctx.cr_resource())).await {
        tracing::debug!(error = %e, "cannot publish event");
    }
    ctx.memory.change(&key, |e| {
        if let Some(entry) = e.unserved.as_mut() {
            entry.reported = true;
        }
    });
    Action::requeue(ctx.settings.resync)
}

/// What a user can do about a CR no running line serves.
fn unserved_hint(route: &Route, name: &str) -> String {
    let annotate = format!("kubectl annotate modelorchestra/{name} {API_VERSION_ANNOTATION}=<version>");
    match route {
        Route::Line(line) => format!(
            "Start or install the {line} line, or change its {ROUTING_LABEL} label (`kubectl label modelorchestra/{name} {ROUTING_LABEL}-` to route it by version)."
        ),
        Route::Version(version, _) => format!(
            "Start a line serving {version} that takes unlabelled CRs (`model-orchestra-operator run --api-version {version} --claim-unlabeled`, docs: Running the operator), or move the CR to a version a running line serves (`{annotate}`)."
        ),
        Route::Invalid(_) => format!("Fix the annotation: `{annotate} --overwrite`."),
    }
}

pub(super) fn error_policy(obj: Arc<DynamicObject>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    match err.retry() {
        Retry::Now => Action::requeue(Duration::from_millis(100)),
        Retry::OnChange => Action::requeue(ctx.settings.resync),
        Retry::Backoff => Action::requeue(ctx.backoff.failed(&key(&obj))),
    }
}

async fn reconcile_routed(cr: &Cr<'_>, ctx: &Context) -> Result<(Action, Changes), ReconcileError> {
    match since_last_apply(cr, ctx) {
        SinceLastApply::Unchanged(state) => {
            let all: Vec<Planned> = state.objects.iter().chain(&state.held).cloned().collect();
            let mut observed = observe(ctx, cr, &all, &BTreeMap::new(), &state.refresh, &state.groups);
            observed.pulls = sync_models(ctx, cr, &state.ollama).await;
            observed.warnings = state.warnings.clone();
            observed.promotions = state.promotions.clone();
            let status = report_applied(ctx, cr, observed, state.hash).await?;
            return Ok((ctx.next_reconcile(&cr.key), Changes { status, ..Default::default() }));
        }
        // The watch event that brings the cache up to date reconciles again; the requeue
        // covers a lost one.
        SinceLastApply::CacheBehind => return Ok((Action::requeue(Duration::from_secs(1)), Changes::default())),
        SinceLastApply::Changed => {}
    }
    let Prepared { plan, refresh, warnings, promotions, groups, ollama } = render_and_plan(cr, ctx)?;
    let admission = ctx.admission.admission(&cr.namespace);
    if admission == admission::Admission::Open {
        let kinds = plan.objects.iter().map(|o| o.kind).collect();
        ctx.permissions.ask(&ctx.client, &cr.namespace, &kinds).await;
    }
    let decisions = decide(ctx, cr, &plan, admission);
    dry_run(ctx, cr, &plan, &decisions).await?;
    let applied = apply(ctx, cr, &plan, &decisions).await?;
    let pruned = prune(ctx, cr, &plan, &promotions.held).await?;
    let deployments: BTreeMap<String, Deployment> = plan
        .objects
        .iter()
        .zip(&applied)
        .filter(|(o, _)| o.kind == Kind::Deployment)
        .filter_map(|(o, a)| {
            let a = a.as_ref()?;
            Some((o.name.clone(), serde_json::to_value(a).and_then(serde_json::from_value).ok()?))
        })
        .collect();
    let objects: Vec<Planned> = plan
        .objects
        .iter()
        .zip(&applied)
        .zip(decisions)
        .map(|((o, a), d)| match (a, d.kept) {
            (Some(a), _) => planned(o, a),
            (None, Some(kept)) => kept,
            (None, None) => unreachable!("only an object kept as it was is not applied"),
        })
        .collect();
    let held: Vec<Planned> = promotions.held.iter().map(held).collect();
    let all: Vec<Planned> = objects.iter().chain(&held).cloned().collect();
    let mut observed = observe(ctx, cr, &all, &deployments, &refresh, &groups);
    observed.pulls = sync_models(ctx, cr, &ollama).await;
    observed.warnings = warnings.clone();
    observed.promotions = promotions.statuses.clone();
    let state = AppliedState {
        uid: cr.uid.clone(),
        generation: cr.generation,
        refresh_annotation: cr.refresh_annotation.clone(),
        retry_annotation: cr.retry_annotation.clone(),
        refresh,
        hash: plan.hash.clone(),
        objects,
        warnings,
        promotions: promotions.statuses,
        held,
        groups,
        ollama,
        at: Instant::now(),
    };
    ctx.remember(cr.key.clone(), state);
    let applied = applied.iter().flatten().count();
    let status = report_applied(ctx, cr, observed, plan.hash).await?;
    let changes = Changes { applied, pruned, status };
    Ok((ctx.next_reconcile(&cr.key), changes))
}

enum SinceLastApply {
    /// Neither the CR's spec nor any child changed: the state of the last full apply.
    Unchanged(Box<AppliedState>),
    /// Nothing changed that the cache shows yet, but it has not seen every write of the last apply.
    CacheBehind,
    /// The spec or a child changed, or there was no apply yet: render and apply.
    Changed,
}

fn since_last_apply(cr: &Cr, ctx: &Context) -> SinceLastApply {
    ctx.memory.read(&cr.key, |e| match e.and_then(|e| e.applied.as_ref()) {
        Some(state) => since_applied(cr, ctx, state),
        None => SinceLastApply::Changed,
    })
}

fn since_applied(cr: &Cr, ctx: &Context, state: &AppliedState) -> SinceLastApply {
    // Not the CR's status.appliedHash: the cached CR often lags behind the status this
    // operator just wrote, and reading that as a change re-applied a third of the CRs of the
    // benchmark. The memory is what was applied; report_applied repairs the status.
    let same_spec = state.uid == cr.uid
        && state.generation == cr.generation
        && state.refresh_annotation == cr.refresh_annotation
        && state.retry_annotation == cr.retry_annotation;
    // A verification decides on every probe result, so its CR is planned again each time.
    let verifying = state.promotions.values().any(|p| p.phase == PromotionPhase::Verifying);
    // A group's root starts, stops and restarts with its workers' pods, which are not
    // children: their gate is decided again.
    let regated = state.groups.iter().any(|(app, g)| {
        let members = ctx.pods.members(&cr.namespace, &cr.name, &Component::Application(app.clone()));
        group::gate(g.nodes, &members) != g.gate
    });
    if !same_spec || verifying || regated {
        return SinceLastApply::Changed;
    }
    let since = state.at.elapsed();
    let children = state
        .objects
        .iter()
        .map(|o| drift(ctx.caches.version(o.kind, &cr.namespace, &o.name).as_deref(), o.version.as_deref(), since));
    match combine(children) {
        Drift::Same => SinceLastApply::Unchanged(Box::new(state.clone())),
        Drift::CacheBehind => SinceLastApply::CacheBehind,
        Drift::Changed => SinceLastApply::Changed,
    }
}

/// What a reconcile will apply: the plan, the refresh value each model is downloaded for,
/// and the render's warnings.
struct Prepared {
    plan: ApplyPlan,
    refresh: BTreeMap<String, String>,
    warnings: Vec<String>,
    promotions: Promotions,
    groups: BTreeMap<String, Group>,
    ollama: super::engine_models::OllamaApps,
}

/// Parses the CR strictly as the version this line serves, renders every object and plans
/// the apply: all before anything touches the cluster. An application whose model is being
/// downloaded is held at zero replicas, or kept on its earlier download of the same model
/// ([`model::Gate`]).
fn render_and_plan(cr: &Cr, ctx: &Context) -> Result<Prepared, ReconcileError> {
    let value = serde_json::to_value(cr.obj).expect("objects serialise");
    let doc = model_orchestra_api::parse::document(&value).map_err(RenderError::from)?;
    // Read at the storage version, which holds every version's fields; the spec is read
    // as the version the CR is served as, whatever version it is read at.
    let serves = ctx.settings.line.serves;
    let crate::reconcile::RenderedCr { model: stack, rendered, refresh } = crate::reconcile::render_cr(
        &ctx.chart,
        serves,
        &doc.spec,
        &cr.name,
        &cr.namespace,
        cr.refresh_annotation.as_deref(),
        &cr.previous,
    )?;
    let mut objects = rendered.objects;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let gated = gates::Cr {
        namespace: &cr.namespace,
        model: &stack,
        previous: &cr.previous,
        refresh: &refresh,
        retry: cr.retry_annotation.as_deref(),
        now: &now,
    };
    let Gated { promotions, groups, unverified } = gates::gate(&mut objects, &gated, &Cached { ctx, cr });
    for app in &unverified {
        ctx.prober.stop(&cr.key, app);
    }
    let plan = plan::plan(&cr.owner(serves.api_version()), objects);
    let unserved: Vec<String> = plan
        .objects
        .iter()
        .filter(|o| !ctx.served.contains(&o.kind))
        .map(|o| format!("{} ({})", o.kind.kind(), o.kind.api_version()))
        .collect();
    if !unserved.is_empty() {
        return Err(ReconcileError::Unserved(unserved.join(", ")));
    }
    let warnings = rendered.warnings.iter().map(ToString::to_string).collect();
    let ollama = stack
        .applications
        .iter()
        .filter_map(|a| match &a.engine {
            crate::model::EngineModel::Ollama(o) => Some((a.key.clone(), o.clone())),
            _ => None,
        })
        .collect();
    Ok(Prepared { plan, refresh, warnings, promotions, groups, ollama })
}

fn held(h: &Held) -> Planned {
    Planned {
        kind: h.kind,
        name: h.name.clone(),
        component: h.component.clone(),
        port: None,
        version: None,
        digest: None,
        model: None,
    }
}

/// Where each cached application's download stands, and what its pods run on meanwhile.
fn downloads(
    ctx: &Context,
    cr: &Cr,
    models: &BTreeMap<String, model::CachedModel>,
    refresh: &BTreeMap<String, String>,
) -> BTreeMap<String, Download> {
    gates::downloads(models, refresh, &cr.previous, &Cached { ctx, cr })
}

/// The gates' view of the cluster: the caches, and the prober, which runs each verification
/// asked for.
struct Cached<'c> {
    ctx: &'c Context,
    cr: &'c Cr<'c>,
}

impl gates::Live for Cached<'_> {
    fn job(&self, name: &str) -> Option<Arc<Job>> {
        self.ctx.caches.job(&self.cr.namespace, name)
    }

    fn deployment(&self, name: &str) -> Option<Arc<Deployment>> {
        self.ctx.caches.deployment(&self.cr.namespace, name)
    }

    fn download_pod(&self, application: &str) -> Option<Pod> {
        self.ctx.pods.download_pod(&self.cr.namespace, &self.cr.name, application)
    }

    fn members(&self, component: &Component) -> Vec<group::Member> {
        self.ctx.pods.members(&self.cr.namespace, &self.cr.name, component)
    }

    fn progress(&self, application: &str, id: &str, ask: Ask, ready: bool) -> Option<Progress> {
        let cr = ObjectRef::new_with(&self.cr.name, self.ctx.cr_resource()).within(&self.cr.namespace);
        Some(self.ctx.prober.ensure(&cr, application, id, ask, ready))
    }
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

/// What one reconcile does with one planned object.
#[derive(Debug, Clone)]
struct Decision {
    step: admission::Step,
    /// It exists (cached, or applied by an earlier reconcile).
    exists: bool,
    /// What the last apply left, for an object it left unchanged.
    kept: Option<Planned>,
}

/// Decides, per object, whether it needs a dry run, only the apply, or nothing.
fn decide(ctx: &Context, cr: &Cr, plan: &ApplyPlan, admission: admission::Admission) -> Vec<Decision> {
    ctx.memory.read(&cr.key, |e| decide_from(ctx, cr, plan, admission, e.and_then(|e| e.applied.as_ref())))
}

fn decide_from(
    ctx: &Context,
    cr: &Cr,
    plan: &ApplyPlan,
    admission: admission::Admission,
    last: Option<&AppliedState>,
) -> Vec<Decision> {
    let last = last.filter(|s| s.uid == cr.uid);
    plan.objects
        .iter()
        .map(|o| {
            let live = ctx.caches.version(o.kind, &cr.namespace, &o.name);
            let before = last.and_then(|s| s.objects.iter().find(|p| p.kind == o.kind && p.name == o.name));
            let unchanged = before
                .is_some_and(|p| p.digest.as_ref() == Some(&o.digest) && p.version.is_some() && p.version == live);
            let facts = Facts {
                exists: live.is_some() || before.is_some(),
                unchanged,
                admission,
                kind_admitted: ctx.permissions.allows(&cr.namespace, o.kind),
            };
            let step = admission::step(facts);
            let kept = (step == admission::Step::Skip).then(|| before.cloned()).flatten();
            Decision { step, exists: facts.exists, kept }
        })
        .collect()
}

/// Sends the objects `which` of the plan, several at once, as `step` (dry run or real);
/// every answer, in plan order.
async fn send(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &ApplyPlan,
    which: Vec<usize>,
    step: Step,
) -> Vec<(usize, Result<DynamicObject, ReconcileError>)> {
    // Indices, not references, go through the stream: its futures must be `Send` for any
    // lifetime the controller picks.
    stream::iter(which)
        .map(|i| async move { (i, apply_one(ctx, &cr.namespace, &plan.objects[i], step).await) })
        .buffered(APPLY_CONCURRENCY)
        .collect()
        .await
}

fn indices(decisions: &[Decision], pick: impl Fn(&Decision) -> bool) -> Vec<usize> {
    decisions.iter().enumerate().filter(|(_, d)| pick(d)).map(|(i, _)| i).collect()
}

/// `which` split in two: the objects but RoleBindings of a Role the plan applies, and those
/// RoleBindings. The API server lets the operator bind a Role only once it can read the
/// Role (to check it holds its permissions), so they are applied after it, and not dry-run
/// (the dry run of the Role creates nothing to read).
fn bindings_last(plan: &ApplyPlan, which: Vec<usize>) -> (Vec<usize>, Vec<usize>) {
    let roles: Vec<&str> = plan.objects.iter().filter(|o| o.kind == Kind::Role).map(|o| o.name.as_str()).collect();
    which.into_iter().partition(|&i| {
        let o = &plan.objects[i];
        let binds = o.body.pointer("/roleRef/kind").and_then(Value::as_str) == Some("Role")
            && o.body.pointer("/roleRef/name").and_then(Value::as_str).is_some_and(|r| roles.contains(&r));
        !(o.kind == Kind::RoleBinding && binds)
    })
}

/// The objects that could be refused, server-side applied as a dry run: any refusal
/// (schema, admission policy, RBAC) means nothing at all is written.
async fn dry_run(ctx: &Context, cr: &Cr<'_>, plan: &ApplyPlan, decisions: &[Decision]) -> Result<(), ReconcileError> {
    let (which, _) = bindings_last(plan, indices(decisions, |d| d.step == admission::Step::DryRunThenApply));
    for (_, answer) in send(ctx, cr, plan, which.clone(), Step::DryRun).await {
        answer?;
    }
    let created = which.into_iter().filter(|&i| !decisions[i].exists).map(|i| plan.objects[i].kind);
    ctx.permissions.learn(&cr.namespace, created);
    Ok(())
}

/// Server-side applies every object that is not as the last apply left it; returns what
/// the server answered (none for an object left alone), in plan order.
///
/// The creations applied without a dry run go first, alone: if one is refused (by what no
/// watch shows: another controller's object of the same name, a permission revoked), the
/// others just created are deleted again, nothing else has been written, and the next
/// attempt dry-runs every object of the namespace.
async fn apply(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &ApplyPlan,
    decisions: &[Decision],
) -> Result<Vec<Option<DynamicObject>>, ReconcileError> {
    let mut applied: Vec<Option<DynamicObject>> = vec![None; plan.objects.len()];
    let (unverified, unverified_bindings) =
        bindings_last(plan, indices(decisions, |d| d.step == admission::Step::Apply));
    let mut refused = None;
    for wave in [unverified, unverified_bindings] {
        for (i, answer) in send(ctx, cr, plan, wave, Step::Apply).await {
            match answer {
                Ok(o) => applied[i] = Some(o),
                Err(e) => refused = refused.or(Some(e)),
            }
        }
        if refused.is_some() {
            break;
        }
    }
    if let Some(e) = refused {
        ctx.permissions.distrust(&cr.namespace);
        roll_back(ctx, cr, plan, &applied).await;
        // The dry run of everything names the refusal as it would have named it first.
        let (all, _) = bindings_last(plan, (0..plan.objects.len()).collect());
        for (_, answer) in send(ctx, cr, plan, all, Step::DryRun).await {
            answer?;
        }
        return Err(e);
    }
    let created = applied.iter().zip(&plan.objects).filter(|(a, _)| a.is_some()).map(|(_, o)| o.kind);
    ctx.permissions.learn(&cr.namespace, created);
    let (verified, verified_bindings) =
        bindings_last(plan, indices(decisions, |d| d.step == admission::Step::DryRunThenApply));
    for wave in [verified, verified_bindings] {
        for (i, answer) in send(ctx, cr, plan, wave, Step::Apply).await {
            applied[i] = Some(answer?);
        }
    }
    ctx.metrics.count_applied(applied.iter().flatten().count());
    Ok(applied)
}

/// Deletes the objects `created` holds (each only if it is still the one created).
async fn roll_back(ctx: &Context, cr: &Cr<'_>, plan: &ApplyPlan, created: &[Option<DynamicObject>]) {
    for (o, created) in plan.objects.iter().zip(created) {
        let Some(created) = created else { continue };
        match delete_if_same(ctx, &cr.namespace, o.kind, &o.name, created.metadata.uid.clone()).await {
            Ok(_) => tracing::info!(modelorchestra = %cr.key, kind = o.kind.kind(), name = %o.name, "rolled back"),
            Err(e) => {
                tracing::warn!(modelorchestra = %cr.key, kind = o.kind.kind(), name = %o.name, error = %e, "cannot roll back")
            }
        }
    }
}

/// Deletes what this CR's previous renders produced and this one does not (see
/// [`plan::prune`] for what may be deleted).
async fn prune(ctx: &Context, cr: &Cr<'_>, plan: &ApplyPlan, held: &[Held]) -> Result<usize, ReconcileError> {
    let owner = cr.owner(ctx.settings.line.serves.api_version());
    let mut pruned = 0;
    let children = ctx.caches.children(&cr.namespace, &cr.name);
    let existing: Vec<_> = children.iter().map(|c| c.existing.clone()).collect();
    let kept = |e: &&plan::Existing| !held.iter().any(|h| h.kind == e.kind && h.name == e.name);
    for gone in plan::prune(&owner, plan, &existing).into_iter().filter(kept) {
        let uid = children.iter().find(|c| c.existing == *gone).and_then(|c| c.uid.clone());
        match delete_if_same(ctx, &cr.namespace, gone.kind, &gone.name, uid).await {
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
        pruned += 1;
        tracing::info!(modelorchestra = %cr.key, kind = gone.kind.kind(), name = %gone.name, "pruned");
    }
    Ok(pruned)
}

/// Deletes an object (its dependents in the background) if it is still the one with `uid`:
/// a same-named object created since is not the one deleted.
async fn delete_if_same(
    ctx: &Context,
    namespace: &str,
    kind: Kind,
    name: &str,
    uid: Option<String>,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &kind.resource());
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions { uid, resource_version: None }),
        ..Default::default()
    };
    api.delete(name, &params).await.map(drop)
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
        digest: Some(o.digest.clone()),
        model,
    }
}

/// The Ollama applications' replicas synced (see [`super::engine_models`]): their models
/// for the status.
async fn sync_models(
    ctx: &Context,
    cr: &Cr<'_>,
    apps: &super::engine_models::OllamaApps,
) -> BTreeMap<String, Vec<model_orchestra_api::v1alpha2::PulledModelStatus>> {
    if apps.is_empty() {
        ctx.puller.forget(&cr.key);
        return BTreeMap::new();
    }
    let reference = ObjectRef::new_with(&cr.name, ctx.cr_resource()).within(&cr.namespace);
    let replicas = super::engine_models::Replicas { client: &ctx.client, pods: &ctx.pods, puller: &ctx.puller };
    let pulls =
        super::engine_models::sync(replicas, &reference, &cr.key, cr.refresh_annotation.as_deref(), apps, &cr.previous)
            .await;
    // Agents start and stop here (the only place besides forgetting a CR): the gauges follow,
    // for CRs with Ollama applications only, not on every reconcile.
    ctx.update_tracked();
    pulls
}

/// Readiness per component, from the Deployments just applied (their response carries
/// status) or the cache, with the pods' problems; and the gateway Service's address.
fn observe(
    ctx: &Context,
    cr: &Cr,
    objects: &[Planned],
    fresh: &BTreeMap<String, Deployment>,
    refresh: &BTreeMap<String, String>,
    groups: &BTreeMap<String, Group>,
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
                let (replicas, rollout) = deployment_readiness(d.as_ref());
                let sleeps = d
                    .as_ref()
                    .and_then(|d| d.metadata.annotations.as_ref())
                    .is_some_and(|a| a.contains_key(model_orchestra_api::keys::IDLE_SECONDS_ANNOTATION));
                let mut health = Health { replicas, rollout, problem: None, sleeps };
                let group = match component {
                    Component::Application(app) => groups.get(app).map(|g| (app, g)),
                    _ => None,
                };
                if let Some((app, g)) = group {
                    let members = ctx.pods.members(&cr.namespace, &cr.name, component);
                    let previous = cr.previous.applications.get(app).and_then(|a| a.group.as_ref());
                    let status = group::status(g.nodes, &members, &group::gate(g.nodes, &members), previous);
                    health = group::health(health, status);
                }
                if !health.replicas.ready {
                    health.problem = ctx.pods.problem(&cr.namespace, &cr.name, component);
                }
                match component {
                    Component::Gateway => observed.gateway = health,
                    Component::Application(app) => {
                        observed.applications.insert(app.clone(), health);
                    }
                    Component::Release | Component::Candidate(_) => {}
                }
            }
            (Kind::Service, Component::Gateway) => {
                observed.gateway_address = Some(format!("{}.{}.svc:{}", o.name, cr.namespace, o.port.unwrap_or(80)));
            }
            _ => {}
        }
    }
    observed.no_gateway = !objects.iter().any(|o| o.kind == Kind::Deployment && o.component == Component::Gateway);
    // An application with a Service of its own (a group's API, named as its root; an Ollama
    // application's) is reached there.
    let roots: Vec<(&str, &Component)> =
        objects.iter().filter(|o| o.kind == Kind::Deployment).map(|o| (o.name.as_str(), &o.component)).collect();
    for o in objects.iter().filter(|o| o.kind == Kind::Service && roots.contains(&(o.name.as_str(), &o.component))) {
        let Component::Application(app) = &o.component else { continue };
        if let Some(h) = observed.applications.get_mut(app) {
            h.replicas.address = Some(format!("{}.{}.svc:{}", o.name, cr.namespace, o.port.unwrap_or(80)));
        }
    }
    observed
}

/// Writes the status of a CR whose objects are all applied, if it changed; returns the
/// Ready condition's reason when it did.
async fn report_applied(
    ctx: &Context,
    cr: &Cr<'_>,
    observed: Observed,
    hash: String,
) -> Result<Option<String>, ReconcileError> {
    write_status(ctx, cr, &Outcome::Applied { observed: Box::new(observed), hash })
        .await
        .map_err(ReconcileError::Status)
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

/// Computes the next status; writes it (and publishes Events for what changed) only if it
/// differs from the last one. Returns the Ready condition's reason when it wrote.
///
/// Written at the version CRs are read at (the storage version): a status write at an
/// older version would drop the fields it does not know from the stored CR.
async fn write_status(ctx: &Context, cr: &Cr<'_>, outcome: &Outcome) -> Result<Option<String>, kube::Error> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let line = &ctx.settings.line;
    let (previous, stored) = ctx.previous_status(cr);
    let next = status::next_status(&Report {
        previous: &previous,
        generation: cr.generation,
        outcome,
        operator_version: &ctx.settings.release,
        served_as: line.serves.as_str(),
        line: &line.routing,
        now: &now,
    });
    let held = ctx.memory.change(&cr.key, |e| {
        let last = e.status.as_mut();
        if next == previous {
            if let Some(w) = last {
                w.waiting = false;
            }
            return true;
        }
        // More pods ready, nothing else: written at most every PROGRESS_INTERVAL (the
        // reconcile is requeued for it); a change of any condition is written at once.
        if let Some(w) = last.filter(|w| w.at.elapsed() < PROGRESS_INTERVAL) {
            if status::only_progress(&previous, &next) {
                w.waiting = true;
                return true;
            }
        }
        false
    });
    if held {
        return Ok(None);
    }
    publish_if_new(ctx, cr, &previous, &next).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &cr.namespace, &ctx.cr_resource());
    // A merge patch from the stored status, not server-side apply: SSA converts the object to
    // the version of every manager's entry, and a CR written at v1alpha1 cannot be typed as
    // v1alpha1 once it carries v1alpha2's status fields (the API server answers 500).
    let next_json = serde_json::to_value(&next).expect("a status serialises");
    let body = json!({"status": merge_patch(&stored, &next_json)});
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    let written = api.patch_status(&cr.name, &params, &Patch::Merge(&body)).await?;
    let reason = status::condition(&next, ConditionType::Ready).map(|c| c.reason.clone());
    let write = StatusWrite {
        status: Some(next),
        resource_version: written.metadata.resource_version,
        at: Instant::now(),
        waiting: false,
    };
    ctx.memory.change(&cr.key, |e| e.status = Some(write));
    Ok(reason)
}

/// Publishes an Event when the Ready condition's reason or message changes (a transition
/// or a new failure), and when `Degraded` becomes true for a reason of its own (warnings
/// about the spec, a stuck rollout) — not on every reconcile, and not for pods still
/// coming up (`ApplicationsNotReady`): the status shows that progress, an Event per step
/// of it was a request per CR for nothing a user acts on.
async fn publish_if_new(ctx: &Context, cr: &Cr<'_>, previous: &ModelOrchestraStatus, next: &ModelOrchestraStatus) {
    let of = |s: &ModelOrchestraStatus, t: ConditionType| {
        status::condition(s, t).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    let degraded = of(next, ConditionType::Degraded).filter(|(status, ..)| status == "True");
    let mut events = Vec::new();
    let progress = Reason::ApplicationsNotReady.as_str();
    if let Some((ready, reason, message)) = of(next, ConditionType::Ready)
        .filter(|r| of(previous, ConditionType::Ready).as_ref() != Some(r))
        .filter(|(_, reason, _)| reason != progress)
    {
        // Ready is good news even while warnings about the spec keep Degraded (they have an
        // Event of their own).
        let type_ = if degraded.is_some() && ready != "True" { EventType::Warning } else { EventType::Normal };
        events.push((type_, reason, message));
    }
    if let Some((_, reason, message)) = degraded.filter(|d| of(previous, ConditionType::Degraded).as_ref() != Some(d)) {
        if !events.iter().any(|(_, r, m)| *r == reason && *m == message) {
            events.push((EventType::Warning, reason, message));
        }
    }
    events.extend(sleep_events(previous, next));
    let reference = cr.obj.object_ref(&ctx.cr_resource());
    for (type_, reason, message) in events {
        let event =
            Event { type_, reason, note: Some(truncate(&message, 1000)), action: "Reconcile".into(), secondary: None };
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "cannot publish event");
        }
    }
}

/// An Event per application that fell asleep, began waking, or woke (with how long the
/// wake-up took).
fn sleep_events(previous: &ModelOrchestraStatus, next: &ModelOrchestraStatus) -> Vec<(EventType, String, String)> {
    use model_orchestra_api::v1alpha2::SleepPhase;
    let mut events = Vec::new();
    for (app, now) in &next.applications {
        let before = previous.applications.get(app);
        let (Some(phase), Some(was)) = (now.sleep, before.and_then(|b| b.sleep)) else { continue };
        let took = || {
            let since = before.and_then(|b| b.sleep_since.as_ref())?;
            let at = now.sleep_since.as_ref()?;
            Some(at.0.duration_since(since.0).as_secs_f64())
        };
        let event = match (was, phase) {
            (SleepPhase::Awake, SleepPhase::Sleeping) => {
                ("Sleeping", format!("{app}: idle, scaled to zero by the model gateway; the next request wakes it"))
            }
            (SleepPhase::Sleeping, SleepPhase::Waking) => {
                ("Waking", format!("{app}: a request woke it; the model gateway holds requests until it serves"))
            }
            (SleepPhase::Waking, SleepPhase::Awake) => (
                "Woke",
                match took() {
                    Some(s) => format!("{app}: serving {s:.1} s after the wake-up began"),
                    None => format!("{app}: serving"),
                },
            ),
            (SleepPhase::Sleeping, SleepPhase::Awake) => ("Woke", format!("{app}: serving")),
            _ => continue,
        };
        events.push((EventType::Normal, event.0.to_string(), event.1));
    }
    events
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`: changed and new keys as in
/// `to`, keys `to` lacks set to null; objects compared key by key, anything else replaced.
fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = serde_json::Map::new();
            for (k, v) in b {
                match a.get(k) {
                    Some(old) if old == v => {}
                    Some(old) => {
                        patch.insert(k.clone(), merge_patch(old, v));
                    }
                    None => {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                patch.insert(k.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        (_, to) => to.clone(),
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
    fn a_merge_patch_sets_what_changed_and_nulls_what_is_gone() {
        let from = json!({"a": 1, "b": {"c": 1, "d": 2}, "e": [1], "gone": true});
        let to = json!({"a": 1, "b": {"c": 3}, "e": [2], "new": "x"});
        assert_eq!(merge_patch(&from, &to), json!({"b": {"c": 3, "d": null}, "e": [2], "new": "x", "gone": null}));
        assert_eq!(merge_patch(&Value::Null, &to), to);
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

    #[test]
    fn a_malformed_quantity_answered_as_a_server_error_is_invalid_and_waits_for_a_change() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": 500,
            "message": "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            "reason": "InternalError"
        }))
        .expect("a Status");
        let e = ReconcileError::Request {
            step: Step::DryRun,
            kind: "PersistentVolumeClaim",
            name: "x".into(),
            source: kube::Error::Api(Box::new(status)),
        };
        assert_eq!((e.reason(), e.retry()), (Reason::Invalid, Retry::OnChange));
    }
}
