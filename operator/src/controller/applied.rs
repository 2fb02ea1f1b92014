//! What the last full apply of a CR left behind, and whether it still holds: while it does,
//! a reconcile needs neither a render nor any write.

use std::collections::BTreeMap;
use std::time::Instant;

use kube::api::DynamicObject;

use super::children::Caches;
use super::cr::Cr;
use super::engine_models::OllamaApps;
use super::pods::Pods;
use crate::chart::Component;
use crate::reconcile::drift::{combine, drift, Drift};
use crate::reconcile::gates::Held;
use crate::reconcile::group::{self, Group};
use crate::reconcile::model;
use crate::reconcile::plan::PlannedObject;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::v1alpha2::{PromotionPhase, PromotionStatus};

/// What the last full apply of a CR left behind. While the CR's generation is the same (its
/// spec, hence its render, unchanged) and no child changed since (same resourceVersion, or
/// for Deployments the same generation: their status changes all the time), a reconcile
/// needs neither a render nor any write.
#[derive(Debug, Clone)]
pub(super) struct AppliedState {
    pub(super) uid: String,
    pub(super) generation: Option<i64>,
    /// The CR's refresh annotation (it changes the render, not the generation).
    pub(super) refresh_annotation: Option<String>,
    /// The CR's retry-promotion annotation (likewise).
    pub(super) retry_annotation: Option<String>,
    /// The refresh value each cached application's model is downloaded for.
    pub(super) refresh: BTreeMap<String, String>,
    pub(super) hash: String,
    pub(super) objects: Vec<Planned>,
    /// The render's warnings (the spec has not changed since).
    pub(super) warnings: Vec<String>,
    /// Each application's verified promotion, as last decided.
    pub(super) promotions: BTreeMap<String, PromotionStatus>,
    /// Objects left as they were (an application whose new revision is being verified):
    /// observed, never pruned.
    pub(super) held: Vec<Planned>,
    /// Each distributed-llama group, as its root was last gated.
    pub(super) groups: BTreeMap<String, Group>,
    /// Each cached application's download gate, as applied.
    pub(super) download_gates: BTreeMap<String, model::Gate>,
    /// The Ollama applications, whose replicas are synced on every reconcile.
    pub(super) ollama: OllamaApps,
    pub(super) at: Instant,
    /// The status is held until the Deployment controller has seen what this apply changed
    /// ([`crate::reconcile::status::hold_for_controllers`]): the reconcile comes back soon.
    pub(super) awaiting_controllers: bool,
}

/// The facts about an applied object that drift checks and status need.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub(super) kind: Kind,
    pub(super) name: String,
    pub(super) component: Component,
    /// A Service's first port.
    pub(super) port: Option<i64>,
    /// resourceVersion (or, for a Deployment, generation) after the apply.
    pub(super) version: Option<String>,
    /// The applied body's digest (none for an object held as it was).
    pub(super) digest: Option<String>,
    /// A download Job's revision and model.
    pub(super) model: Option<model::CachedModel>,
}

pub(super) enum SinceLastApply {
    /// Neither the CR's spec nor any child changed: the state of the last full apply.
    Unchanged(Box<AppliedState>),
    /// Nothing changed that the cache shows yet, but it has not seen every write of the last apply.
    CacheBehind,
    /// The spec or a child changed, or there was no apply yet: render and apply.
    Changed,
}

/// Whether what the last apply left still holds: the same spec, no verification or group
/// gate to decide again, and every child as it was left (`caches`, `pods`: what the watches show).
pub(super) fn since_applied(cr: &Cr, caches: &Caches, pods: &Pods, state: &AppliedState) -> SinceLastApply {
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
        let members = pods.members(&cr.namespace, &cr.name, &Component::Application(app.clone()));
        group::gate(g.nodes, &members) != g.gate
    });
    if !same_spec || verifying || regated {
        return SinceLastApply::Changed;
    }
    let since = state.at.elapsed();
    let children = state
        .objects
        .iter()
        .map(|o| drift(caches.version(o.kind, &cr.namespace, &o.name).as_deref(), o.version.as_deref(), since));
    match combine(children) {
        Drift::Same => SinceLastApply::Unchanged(Box::new(state.clone())),
        Drift::CacheBehind => SinceLastApply::CacheBehind,
        Drift::Changed => SinceLastApply::Changed,
    }
}

impl AppliedState {
    /// Each cached application's download, as applied (its Job's revision and model).
    pub(super) fn cached_models(&self) -> BTreeMap<String, model::CachedModel> {
        self.objects
            .iter()
            .filter_map(|o| match (&o.component, &o.model) {
                (Component::Application(app), Some(m)) => Some((app.clone(), m.clone())),
                _ => None,
            })
            .collect()
    }
}

impl Planned {
    /// An object held as it was (an application whose new revision is being verified).
    pub(super) fn held(h: &Held) -> Self {
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

    /// An object as its apply left it.
    pub(super) fn applied(o: &PlannedObject, applied: &DynamicObject) -> Self {
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
}
