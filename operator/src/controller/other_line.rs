//! CRs routed to another operator line. This line does not reconcile them nor write their
//! status; it only says so — once, with an Event naming the line the CR waits for — when no
//! line has reconciled the CR's current generation for a while.

use std::time::{Duration, Instant};

use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};

use super::cached_cr::CachedCr;
use super::context::Context;
use super::cr::key;
use super::memory::Unserved;
use super::report::truncate;
use crate::reconcile::routing::Route;
use model_orchestra_api::lines::{API_VERSION_ANNOTATION, ROUTING_LABEL};

/// A CR routed to another line: if no line has reconciled its current generation for
/// `unserved_after`, say so once — an Event on the CR naming the line it waits for, and a
/// log line — without writing its status (only its own line does).
pub(super) async fn notice_unserved(obj: &CachedCr, route: &Route, ctx: &Context) -> Action {
    let key = key(obj);
    let observed = obj.status_json()["observedGeneration"].as_i64();
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
