//! One reconcile of one ModelOrchestra: route → fetch the facts → validate and render →
//! plan → dry-run → apply → prune → report. Nothing is applied or pruned until the whole
//! spec has rendered and every object that could be refused has passed a dry run (see
//! [`admission`] for which need none), and nothing is pruned until every apply succeeded.
//! The steps live by concern: [`applied`](super::applied) (is the last apply still good?),
//! [`apply`](super::apply) (dry-run, apply, roll back, prune), [`observe`](super::observe)
//! (what the children show), [`report`](super::report) (status and Events) and
//! [`other_line`](super::other_line) (CRs routed elsewhere).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;

use super::applied::{since_applied, AppliedState, Planned, SinceLastApply};
use super::apply::{apply, decide, dry_run, prune};
use super::cached_cr::CachedCr;
use super::context::Context;
use super::cr::{key, Cr};
use super::engine_models::OllamaApps;
use super::error::ReconcileError;
use super::observe::{observe, sync_models, Cached};
use super::other_line::notice_unserved;
use super::report::{report_applied, report_failure};
use crate::error::RenderError;
use crate::reconcile::admission;
use crate::reconcile::backoff::Retry;
use crate::reconcile::gates::{self, Gated, Promotions};
use crate::reconcile::group::Group;
use crate::reconcile::model::Download;
use crate::reconcile::plan::{self, ApplyPlan};
use crate::reconcile::routing::{self, Route, RoutingFacts};
use model_orchestra_api::kinds::Kind;

/// Where a CR goes, from what routing reads of it (its creating write is the one
/// managedFields entry the watch keeps, see `controller::run`).
fn route_of(obj: &CachedCr) -> Route {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Recorded {
        served_as: Option<String>,
    }
    let recorded = obj.status::<Recorded>().and_then(|r| r.served_as);
    routing::route(&RoutingFacts {
        labels: obj.metadata.labels.as_ref(),
        annotations: obj.metadata.annotations.as_ref(),
        recorded: recorded.as_deref(),
        creation: obj.metadata.managed_fields.as_ref().and_then(|m| m.first()),
    })
}

pub(super) async fn reconcile(obj: Arc<CachedCr>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let route = route_of(&obj);
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
        Err(e) if e.retry() == Retry::Soon => {
            tracing::info!(modelorchestra = %cr.key, generation = ?cr.generation, reason = %e.reason(), error = %e, "waiting");
            report_failure(&ctx, &cr, e).await;
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

pub(super) fn error_policy(obj: Arc<CachedCr>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    match err.retry() {
        Retry::Now => Action::requeue(Duration::from_millis(100)),
        Retry::OnChange => Action::requeue(ctx.settings.resync),
        Retry::Backoff => Action::requeue(ctx.backoff.failed(&key(&obj))),
        Retry::Soon => Action::requeue(crate::reconcile::backoff::SOON),
    }
}

async fn reconcile_routed(cr: &Cr<'_>, ctx: &Context) -> Result<(Action, Changes), ReconcileError> {
    match since_last_apply(cr, ctx) {
        (SinceLastApply::Unchanged(state), downloads) => {
            let all: Vec<Planned> = state.objects.iter().chain(&state.held).cloned().collect();
            let mut observed = observe(ctx, cr, &all, &BTreeMap::new(), downloads, &state.groups, &state.groups);
            observed.pulls = sync_models(ctx, cr, &state.ollama).await;
            observed.warnings = state.warnings.clone();
            observed.promotions = state.promotions.clone();
            let status = report_applied(ctx, cr, observed, state.hash).await?;
            return Ok((ctx.next_reconcile(&cr.key), Changes { status, ..Default::default() }));
        }
        // The watch event that brings the cache up to date reconciles again; the requeue
        // covers a lost one.
        (SinceLastApply::CacheBehind, _) => return Ok((Action::requeue(Duration::from_secs(1)), Changes::default())),
        (SinceLastApply::Changed, _) => {}
    }
    let Prepared { plan, refresh, warnings, promotions, groups, ollama, downloads } = render_and_plan(cr, ctx)?;
    served(ctx, &plan).await?;
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
            (Some(a), _) => Planned::applied(o, a),
            (None, Some(kept)) => kept,
            (None, None) => unreachable!("only an object kept as it was is not applied"),
        })
        .collect();
    let held: Vec<Planned> = promotions.held.iter().map(Planned::held).collect();
    let all: Vec<Planned> = objects.iter().chain(&held).cloned().collect();
    let gated_before = ctx.memory.read(&cr.key, |e| {
        e.and_then(|e| e.applied.as_ref()).map(|a| a.groups.clone()).unwrap_or_else(|| groups.clone())
    });
    let download_gates = downloads.iter().map(|(app, d)| (app.clone(), d.gate())).collect();
    let mut observed = observe(ctx, cr, &all, &deployments, downloads, &groups, &gated_before);
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
        download_gates,
        ollama,
        at: Instant::now(),
        awaiting_controllers: false,
    };
    ctx.remember(cr.key.clone(), state);
    let applied = applied.iter().flatten().count();
    let status = report_applied(ctx, cr, observed, plan.hash).await?;
    let changes = Changes { applied, pruned, status };
    Ok((ctx.next_reconcile(&cr.key), changes))
}

/// Whether the last full apply of the CR still holds (see [`since_applied`]), and where its
/// downloads stand now. A download whose gate is no longer the one applied (its Job
/// completed since) is a change even when no child changed: the Job's completion may have
/// come with the apply's own answer, so that its version is the one remembered. The
/// status reports the same reading of the downloads the decision was made on.
fn since_last_apply(cr: &Cr, ctx: &Context) -> (SinceLastApply, BTreeMap<String, Download>) {
    ctx.memory.read(&cr.key, |e| match e.and_then(|e| e.applied.as_ref()) {
        Some(state) => {
            let downloads = super::observe::downloads(ctx, cr, &state.cached_models(), &state.refresh);
            let regated = downloads.iter().any(|(app, d)| state.download_gates.get(app) != Some(&d.gate()));
            let since =
                if regated { SinceLastApply::Changed } else { since_applied(cr, &ctx.caches, &ctx.pods, state) };
            (since, downloads)
        }
        None => (SinceLastApply::Changed, BTreeMap::new()),
    })
}

/// What a reconcile will apply: the plan, the refresh value each model is downloaded for,
/// and the render's warnings.
struct Prepared {
    plan: ApplyPlan,
    refresh: BTreeMap<String, String>,
    warnings: Vec<String>,
    promotions: Promotions,
    groups: BTreeMap<String, Group>,
    ollama: OllamaApps,
    /// The downloads as the gates saw them.
    downloads: BTreeMap<String, Download>,
}

/// Whether the cluster serves every kind the plan holds. A kind the operator does not watch
/// is asked about again: the operator learns new kinds every 15 s, so one installed since
/// (KEDA's CRD applied just before this CR) is served — the CR is correct, and the controller
/// restarts with its watch — while one still missing is the user's to install.
async fn served(ctx: &Context, plan: &ApplyPlan) -> Result<(), ReconcileError> {
    let mut unserved: Vec<Kind> = plan.objects.iter().map(|o| o.kind).filter(|k| !ctx.served.contains(k)).collect();
    unserved.sort_by_key(|k| k.kind());
    unserved.dedup();
    if unserved.is_empty() {
        return Ok(());
    }
    let names = unserved.iter().map(|k| format!("{} ({})", k.kind(), k.api_version())).collect::<Vec<_>>().join(", ");
    for kind in &unserved {
        if !super::serves(&ctx.client, kind.group(), kind.version(), kind.kind()).await.unwrap_or(false) {
            return Err(ReconcileError::Unserved(names));
        }
    }
    ctx.rediscover.notify_one();
    Err(ReconcileError::NotWatchedYet(names))
}

/// Parses the CR strictly as the version this line serves, renders every object and plans
/// the apply: all before anything touches the cluster. An application whose model is being
/// downloaded is held at zero replicas, or kept on its earlier download of the same model
/// ([`crate::reconcile::model::Gate`]).
fn render_and_plan(cr: &Cr, ctx: &Context) -> Result<Prepared, ReconcileError> {
    let value = cr.obj.to_json(&ctx.cr_resource());
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
    let Gated { promotions, groups, unverified, downloads } = gates::gate(&mut objects, &gated, &Cached { ctx, cr });
    for app in &unverified {
        ctx.prober.stop(&cr.key, app);
    }
    let plan = plan::plan(&cr.owner(serves.api_version()), objects);
    let warnings = rendered.warnings.iter().map(ToString::to_string).collect();
    let ollama = stack
        .applications
        .iter()
        .filter_map(|a| match &a.engine {
            crate::model::EngineModel::Ollama(o) => Some((a.key.clone(), o.clone())),
            _ => None,
        })
        .collect();
    Ok(Prepared { plan, refresh, warnings, promotions, groups, ollama, downloads })
}
