//! What the operator applies for a CR is its render shaped by the cluster: an application
//! held or kept on an earlier model while its model downloads ([`model::Gate`]), verified
//! promotion holding its Deployment and ConfigMap back and running a candidate
//! ([`promotion::decide`]), a group's root held until every worker is ready
//! ([`group::Gate`]). Decided here from facts handed in ([`Live`]): the reconciler's come
//! from its caches, `diff`'s from reads, so both show the same objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::v1alpha2::{ModelOrchestraStatus, ModelPhase, PromotionStatus};
use serde_json::Value;

use super::group::{self, Group, Member};
use super::model::{self, Download};
use super::promotion::{self, Ask, Progress, Target};
use crate::chart::{Component, RenderedObject};

/// The cluster as far as the gates look at it, in the CR's namespace.
pub(crate) trait Live {
    /// A Job, by name.
    fn job(&self, name: &str) -> Option<Arc<Job>>;
    /// A Deployment, by name.
    fn deployment(&self, name: &str) -> Option<Arc<Deployment>>;
    /// The newest pod of the model download of `application`.
    fn download_pod(&self, application: &str) -> Option<Pod>;
    /// The members of the distributed-llama group of `component`.
    fn members(&self, component: &Component) -> Vec<Member>;
    /// The prober's progress on the verification `id` of `application` (the reconciler's
    /// prober keeps it running, probing once the candidate is `ready`); none when nothing
    /// probes.
    fn progress(&self, application: &str, id: &str, ask: Ask, ready: bool) -> Option<Progress>;
}

/// The CR the objects were rendered for.
pub(crate) struct Cr<'a> {
    pub namespace: &'a str,
    pub model: &'a crate::model::Model,
    /// Its last reported status.
    pub previous: &'a ModelOrchestraStatus,
    /// The refresh value each cached model is downloaded for.
    pub refresh: &'a BTreeMap<String, String>,
    /// Its `models.titanml.co/retry-promotion`.
    pub retry: Option<&'a str>,
    pub now: &'a Time,
}

/// An object left as it is: an application's Deployment or ConfigMap while its new
/// revision is verified.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub kind: Kind,
    pub name: String,
    pub component: Component,
}

/// What verified promotion decided for a CR's applications.
#[derive(Debug, Clone, Default)]
pub(crate) struct Promotions {
    pub statuses: BTreeMap<String, PromotionStatus>,
    /// Neither applied nor pruned.
    pub held: Vec<Held>,
}

/// What the gates decided.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gated {
    pub promotions: Promotions,
    pub groups: BTreeMap<String, Group>,
    /// Applications no verification runs for (any running one stops).
    pub unverified: Vec<String>,
    /// Each cached application's download as its gate saw it: the status reports these,
    /// never a newer read, so it cannot say a model is Ready before the gate that serves it
    /// was applied.
    pub downloads: BTreeMap<String, Download>,
}

/// Shapes the rendered `objects` of `cr` to its downloads, promotions and groups.
pub(crate) fn gate(objects: &mut Vec<RenderedObject>, cr: &Cr, live: &impl Live) -> Gated {
    let downloads = downloads(&model::cached_models(objects), cr.refresh, cr.previous, live);
    let (promotions, unverified) = promotions(objects, cr, &downloads, live);
    let gates = downloads.iter().map(|(app, d)| (app.clone(), d.gate())).collect();
    model::apply_gates(objects, &gates);
    let groups = groups(cr.model, live);
    group::apply_gates(objects, &groups.iter().map(|(app, g)| (app.clone(), g.gate.clone())).collect());
    Gated { promotions, groups, unverified, downloads }
}

/// Where each cached application's download stands, and what its pods run on meanwhile.
pub(crate) fn downloads(
    models: &BTreeMap<String, model::CachedModel>,
    refresh: &BTreeMap<String, String>,
    previous: &ModelOrchestraStatus,
    live: &impl Live,
) -> BTreeMap<String, Download> {
    models
        .iter()
        .map(|(app, m)| {
            let job = live.job(&m.job);
            let pod = live.download_pod(app);
            let (phase, message) = model::download_state(&m.job, job.as_deref(), pod.as_ref());
            let serving = model::serving(m, phase, previous.applications.get(app).and_then(|a| a.model.as_ref()));
            (app.clone(), Download { job: m.job.clone(), phase, message, refresh: refresh.get(app).cloned(), serving })
        })
        .collect()
}

/// Each distributed-llama group of the model, with its root's gate from its members' pods.
fn groups(stack: &crate::model::Model, live: &impl Live) -> BTreeMap<String, Group> {
    stack
        .applications
        .iter()
        .filter_map(|app| match &app.engine {
            crate::model::EngineModel::DistributedLlama(d) => {
                let members = live.members(&Component::Application(app.key.clone()));
                Some((app.key.clone(), Group { nodes: d.nodes, gate: group::gate(d.nodes, &members) }))
            }
            crate::model::EngineModel::Takeoff | crate::model::EngineModel::Ollama(_) => None,
        })
        .collect()
}

/// Decides each promoted application's revision (see [`promotion::decide`]) and shapes the
/// rendered objects to it: while a revision is verified, the application's Deployment and
/// ConfigMap are taken out (left as they are, never pruned) and its candidate runs and is
/// probed; once promoted, or when it serves, the candidate is taken out (pruned); a failed
/// one keeps its candidate at zero replicas. Also returns the applications no verification
/// runs for.
fn promotions(
    objects: &mut Vec<RenderedObject>,
    cr: &Cr,
    downloads: &BTreeMap<String, Download>,
    live: &impl Live,
) -> (Promotions, Vec<String>) {
    let mut out = Promotions::default();
    let mut unverified = Vec::new();
    let gateway = service_of(objects, &Component::Gateway);
    for app in &cr.model.applications {
        let Some(settings) = &app.promotion else {
            unverified.push(app.key.clone());
            continue;
        };
        let production = Component::Application(app.key.clone());
        let candidate = Component::Candidate(app.key.clone());
        let Some(deployment) = objects.iter().find(|o| o.kind == Kind::Deployment && o.component == production) else {
            continue;
        };
        let revision = revision_of(&deployment.object).unwrap_or_default();
        let (name, candidate_name) = (deployment.name.clone(), format!("{}-candidate", deployment.name));
        let live_revision =
            live.deployment(&name).and_then(|d| serde_json::to_value(&*d).ok()).and_then(|d| revision_of(&d));
        let model = match downloads.get(&app.key) {
            None => promotion::Model::Ready,
            Some(d) => match d.phase {
                ModelPhase::Ready => promotion::Model::Ready,
                ModelPhase::Failed => promotion::Model::Failed(d.message.clone()),
                _ => promotion::Model::Downloading(d.message.clone()),
            },
        };
        let thresholds = promotion::Thresholds {
            success: settings.success_threshold.max(1) as u32,
            failure: settings.failure_threshold.max(1) as u32,
            deadline: Duration::from_secs(settings.deadline_seconds.max(1) as u64),
        };
        let mut facts = promotion::Facts {
            revision: &revision,
            live: live_revision.as_deref(),
            previous: cr.previous.applications.get(&app.key).and_then(|a| a.promotion.as_ref()),
            retry: cr.retry,
            progress: None,
            model,
            thresholds,
            now: cr.now,
        };
        // First without the prober's progress: which verification (revision and retry)
        // this is; then with it.
        let (first, first_status) = promotion::decide(&facts);
        // Takeoff is asked through the gateway by the candidate's consumer group; Ollama
        // on the candidate's own Service, its first model.
        let asked = match &app.engine {
            crate::model::EngineModel::Ollama(o) => service_of(objects, &candidate)
                .zip(o.models.first())
                .map(|(s, model)| (s, Target::Ollama { model: model.clone() })),
            _ => gateway.clone().map(|s| (s, Target::Gateway { group: format!("verify-{revision}") })),
        };
        let progress;
        if let (promotion::Decision::Verify { probe, .. }, Some(((service, port), target))) = (&first, asked) {
            let ready = *probe && candidate_ready(live.deployment(&candidate_name).as_deref(), &revision);
            let id = format!("{revision}/{}", first_status.retry.as_deref().unwrap_or_default());
            let ask = Ask {
                namespace: cr.namespace.to_string(),
                service,
                port,
                target,
                prompt: settings.prompt.clone(),
                expect: settings.expect.clone(),
                max_tokens: settings.max_tokens,
                timeout: Duration::from_secs(settings.timeout_seconds.max(1) as u64),
                period: Duration::from_secs(settings.period_seconds.max(1) as u64),
                success_threshold: thresholds.success,
                failure_threshold: thresholds.failure,
            };
            progress = live.progress(&app.key, &id, ask, ready);
            facts.progress = progress.as_ref();
        }
        let (decision, status) = promotion::decide(&facts);
        let set_candidate_replicas = |objects: &mut Vec<RenderedObject>, replicas: i32| {
            for o in objects.iter_mut().filter(|o| o.kind == Kind::Deployment && o.component == candidate) {
                o.object["spec"]["replicas"] = Value::from(replicas);
            }
        };
        let mut hold = |objects: &mut Vec<RenderedObject>| {
            for o in objects
                .iter()
                .filter(|o| o.component == production && matches!(o.kind, Kind::Deployment | Kind::ConfigMap))
            {
                out.held.push(Held { kind: o.kind, name: o.name.clone(), component: o.component.clone() });
            }
            objects.retain(|o| !(o.component == production && matches!(o.kind, Kind::Deployment | Kind::ConfigMap)));
        };
        match decision {
            promotion::Decision::Serve | promotion::Decision::Promote => {
                unverified.push(app.key.clone());
                objects.retain(|o| o.component != candidate);
            }
            promotion::Decision::Verify { candidate_replicas, .. } => {
                hold(objects);
                set_candidate_replicas(objects, candidate_replicas);
            }
            promotion::Decision::Fail => {
                unverified.push(app.key.clone());
                hold(objects);
                set_candidate_replicas(objects, 0);
            }
        }
        out.statuses.insert(app.key.clone(), status);
    }
    (out, unverified)
}

/// The rendered Service of `component`: its name and its port named `http`.
fn service_of(objects: &[RenderedObject], component: &Component) -> Option<(String, u16)> {
    objects.iter().find(|o| o.kind == Kind::Service && &o.component == component).map(|s| {
        let ports = s.object["spec"]["ports"].as_array().cloned().unwrap_or_default();
        let http = ports.iter().find(|p| p["name"] == "http").or(ports.first()).and_then(|p| p["port"].as_u64());
        (s.name.clone(), http.unwrap_or(80) as u16)
    })
}

/// The revision a Deployment's pod template carries (verified promotion).
fn revision_of(deployment: &Value) -> Option<String> {
    deployment["spec"]["template"]["metadata"]["annotations"][crate::chart::REVISION_ANNOTATION]
        .as_str()
        .map(str::to_string)
}

/// Whether the candidate Deployment runs `revision` and one of its pods is available.
fn candidate_ready(candidate: Option<&Deployment>, revision: &str) -> bool {
    let Some(d) = candidate else { return false };
    let value = serde_json::to_value(d).unwrap_or_default();
    let status = d.status.clone().unwrap_or_default();
    revision_of(&value).as_deref() == Some(revision)
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && status.updated_replicas.unwrap_or(0) >= 1
        && status.available_replicas.unwrap_or(0) >= 1
}
