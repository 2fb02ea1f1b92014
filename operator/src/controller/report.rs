//! The CR's status and Events: the next status computed from what was observed (or why the
//! reconcile failed), written only when it changed — progress alone at most every few
//! seconds — and the Events the change announces ([`events`]).

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};
use serde_json::json;

use super::context::Context;
use super::cr::Cr;
use super::error::ReconcileError;
use super::memory::StatusWrite;
use crate::reconcile::condition::ConditionType;
use crate::reconcile::events;
use crate::reconcile::merge_patch::merge_patch;
use crate::reconcile::plan::FIELD_MANAGER;
use crate::reconcile::status::{self, Observed, Outcome, Report};
use model_orchestra_api::v1alpha2::ModelOrchestraStatus;

/// How often a status that only counts more ready pods is written while a CR comes up.
pub(super) const PROGRESS_INTERVAL: Duration = Duration::from_secs(3);
/// How soon a CR whose status waits for the Deployment controller is reconciled again.
const AWAIT_CONTROLLERS: Duration = Duration::from_millis(500);

impl Context {
    /// When to reconcile a CR next: when a progress-only status change it holds back is due,
    /// else at the resync.
    pub(super) fn next_reconcile(&self, key: &str) -> Action {
        let awaiting = |e: Option<&super::memory::CrEntry>| {
            e.and_then(|e| e.applied.as_ref()).is_some_and(|a| a.awaiting_controllers)
        };
        if self.memory.read(key, awaiting) {
            // The Deployment's status update reconciles again; this covers a lost event.
            return Action::requeue(AWAIT_CONTROLLERS);
        }
        self.memory.read(key, |e| match e.and_then(|e| e.status.as_ref()).filter(|w| w.waiting) {
            Some(w) => Action::requeue(PROGRESS_INTERVAL.saturating_sub(w.at.elapsed()) + Duration::from_millis(50)),
            None => Action::requeue(self.settings.resync),
        })
    }

    /// The status to compute the next one from: the last one this operator wrote while the
    /// cached CR has not caught up with that write (then `true`), else the cached one.
    fn previous_status(&self, cr: &Cr) -> (ModelOrchestraStatus, bool) {
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
        match written {
            Some(status) => (status, true),
            None => (cr.previous.clone(), false),
        }
    }
}

/// Writes the status of a CR whose objects are all applied, if it changed; returns the
/// Ready condition's reason when it did. Held back while the Deployment controller has yet
/// to see what the last apply changed ([`status::hold_for_controllers`]).
pub(super) async fn report_applied(
    ctx: &Context,
    cr: &Cr<'_>,
    observed: Observed,
    hash: String,
) -> Result<Option<String>, ReconcileError> {
    let edited = cr.previous.observed_generation.unwrap_or(0) < cr.generation.unwrap_or(0);
    let held = ctx.memory.change(&cr.key, |e| match e.applied.as_mut() {
        Some(applied) => {
            applied.awaiting_controllers = status::hold_for_controllers(&observed, edited, applied.at.elapsed());
            applied.awaiting_controllers
        }
        None => false,
    });
    if held {
        return Ok(None);
    }
    write_status(ctx, cr, &Outcome::Applied { observed: Box::new(observed), hash })
        .await
        .map_err(ReconcileError::Status)
}

/// Records a failure in the status (and an Event); the error is what the caller returns.
pub(super) async fn report_failure(ctx: &Context, cr: &Cr<'_>, e: &ReconcileError) {
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
    let (previous, written) = ctx.previous_status(cr);
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
    publish(ctx, cr, &previous, &next).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &cr.namespace, &ctx.cr_resource());
    // A merge patch from the stored status, not server-side apply: SSA converts the object to
    // the version of every manager's entry, and a CR written at v1alpha1 cannot be typed as
    // v1alpha1 once it carries v1alpha2's status fields (the API server answers 500).
    // The stored status is read only now: most reconciles write nothing.
    let stored =
        if written { serde_json::to_value(&previous).expect("a status serialises") } else { cr.obj.status_json() };
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

/// Publishes the Events the change from `previous` to `next` announces.
async fn publish(ctx: &Context, cr: &Cr<'_>, previous: &ModelOrchestraStatus, next: &ModelOrchestraStatus) {
    let reference = cr.obj.object_ref(&ctx.cr_resource());
    for notice in events::notices(previous, next) {
        let event = Event {
            type_: if notice.warning { EventType::Warning } else { EventType::Normal },
            reason: notice.reason,
            note: Some(truncate(&notice.message, 1000)),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "cannot publish event");
        }
    }
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
