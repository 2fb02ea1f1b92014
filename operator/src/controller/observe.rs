//! What a CR's children show: readiness per component from its Deployments and pods, the
//! models' downloads and pulls, and the gates' view of the cluster ([`Cached`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;

use super::applied::Planned;
use super::context::Context;
use super::cr::Cr;
use super::engine_models::{self, OllamaApps, Replicas};
use crate::chart::Component;
use crate::reconcile::gates;
use crate::reconcile::group::{self, Gate, Group};
use crate::reconcile::model::{self, Download};
use crate::reconcile::promotion::{Ask, Progress};
use crate::reconcile::status::{controller_behind, deployment_readiness, Health, Observed};
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::v1alpha2::PulledModelStatus;

/// Where each cached application's download stands, and what its pods run on meanwhile.
pub(super) fn downloads(
    ctx: &Context,
    cr: &Cr,
    models: &BTreeMap<String, model::CachedModel>,
    refresh: &BTreeMap<String, String>,
) -> BTreeMap<String, Download> {
    gates::downloads(models, refresh, &cr.previous, &Cached { ctx, cr })
}

/// The gates' view of the cluster: the caches, and the prober, which runs each verification
/// asked for.
pub(super) struct Cached<'c> {
    pub(super) ctx: &'c Context,
    pub(super) cr: &'c Cr<'c>,
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

/// The Ollama applications' replicas synced (see [`super::engine_models`]): their models
/// for the status.
pub(super) async fn sync_models(
    ctx: &Context,
    cr: &Cr<'_>,
    apps: &OllamaApps,
) -> BTreeMap<String, Vec<PulledModelStatus>> {
    if apps.is_empty() {
        ctx.puller.forget(&cr.key);
        return BTreeMap::new();
    }
    let reference = ObjectRef::new_with(&cr.name, ctx.cr_resource()).within(&cr.namespace);
    let replicas = Replicas { client: &ctx.client, pods: &ctx.pods, puller: &ctx.puller };
    let pulls =
        engine_models::sync(replicas, &reference, &cr.key, cr.refresh_annotation.as_deref(), apps, &cr.previous).await;
    // Agents start and stop here (the only place besides forgetting a CR): the gauges follow,
    // for CRs with Ollama applications only, not on every reconcile.
    ctx.update_tracked();
    pulls
}

/// Readiness per component, from the Deployments just applied (their response carries
/// status) or the cache, with the pods' problems; and the gateway Service's address.
/// `gated_before`: the groups' gates before this reconcile applied `groups` (the same when
/// nothing was applied), so that a root restarted now is reported with why.
pub(super) fn observe(
    ctx: &Context,
    cr: &Cr,
    objects: &[Planned],
    fresh: &BTreeMap<String, Deployment>,
    downloads: BTreeMap<String, Download>,
    groups: &BTreeMap<String, Group>,
    gated_before: &BTreeMap<String, Group>,
) -> Observed {
    let mut observed = Observed { models: downloads, refresh: cr.refresh_annotation.clone(), ..Default::default() };
    for o in objects {
        match (o.kind, &o.component) {
            (Kind::Deployment, component) => {
                let d = fresh
                    .get(&o.name)
                    .cloned()
                    .or_else(|| ctx.caches.deployment(&cr.namespace, &o.name).map(|d| (*d).clone()));
                let (replicas, rollout) = deployment_readiness(d.as_ref());
                observed.controllers_behind |= d.as_ref().is_some_and(controller_behind);
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
                    let restarted_from = match gated_before.get(app).map(|b| &b.gate) {
                        Some(before @ Gate::Serve { workers }) if *before != g.gate => Some(workers.as_str()),
                        _ => None,
                    };
                    let gate = group::gate(g.nodes, &members);
                    let status = group::status(g.nodes, &members, &gate, restarted_from, previous);
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
