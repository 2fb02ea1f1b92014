//! The replicas of a CR's Ollama applications, each reconcile: every running pod — the
//! application's and its candidate's — is told what to hold (its agent pulls and deletes,
//! [`super::models`]), its models-ready condition is set as decided (`reconcile::pulls`), and
//! the application's replicas report each listed model for the status.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use model_orchestra_api::v1alpha2::PulledModelStatus;
use serde_json::json;

use super::cached_cr::CachedCr;
use super::models::{Puller, Replica, Want};
use super::pods::Pods;
use crate::chart::{Component, MODELS_ANNOTATION, MODELS_READY_CONDITION};
use crate::model::OllamaSettings;
use crate::reconcile::model::refresh_selects;
use crate::reconcile::plan::FIELD_MANAGER;
use crate::reconcile::pulls::{self, Replica as ReplicaModels};

/// What an Ollama application needs of the reconcile: its settings.
pub(super) type OllamaApps = BTreeMap<String, OllamaSettings>;

/// What the sync reads and writes: the API, the pods cache and the pullers.
pub(super) struct Replicas<'a> {
    pub client: &'a Client,
    pub pods: &'a Pods,
    pub puller: &'a Puller,
}

/// Syncs the replicas of `apps` (of the CR `name` in `namespace`); returns, per
/// application, its models over the replicas that serve.
pub(super) async fn sync(
    ctx: Replicas<'_>,
    cr: &ObjectRef<CachedCr>,
    key: &str,
    refresh_annotation: Option<&str>,
    apps: &OllamaApps,
    previous: &model_orchestra_api::v1alpha2::ModelOrchestraStatus,
) -> BTreeMap<String, Vec<PulledModelStatus>> {
    let (namespace, name) = (cr.namespace.clone().unwrap_or_default(), cr.name.clone());
    let names: Vec<&str> = apps.keys().map(String::as_str).collect();
    let refreshed = refresh_annotation.map(|v| refresh_selects(v, &names)).unwrap_or_default();
    let mut live = HashSet::new();
    let mut out = BTreeMap::new();
    for (app, settings) in apps {
        let refresh = refreshed.contains(&app.as_str()).then(|| refresh_annotation.unwrap_or_default().to_string());
        let mut serving = Vec::new();
        let mut serving_models: Option<Vec<String>> = None;
        for component in [Component::Application(app.clone()), Component::Candidate(app.clone())] {
            for pod in ctx.pods.running(&namespace, &name, &component) {
                let Some(uid) = pod.uid() else { continue };
                let listed = models_of(&pod).unwrap_or_else(|| settings.models.clone());
                let want = Want {
                    models: listed.iter().map(|m| (m.clone(), settings.pull_name(m))).collect(),
                    insecure: settings.insecure,
                    stall: Duration::from_secs(settings.stall_seconds.max(1) as u64),
                    refresh: refresh.clone(),
                };
                live.insert(uid.clone());
                let replica = Replica {
                    namespace: namespace.clone(),
                    pod: pod.name_any(),
                    uid,
                    ip: pod.status.as_ref().and_then(|s| s.pod_ip.clone()),
                    port: settings.port as u16,
                };
                let models = ReplicaModels {
                    pod: replica.pod.clone(),
                    gate: gate_of(&pod),
                    models: ctx.puller.ensure(cr, &replica, want),
                };
                let decided = pulls::gate(&listed, &models);
                if models.gate != Some(decided) {
                    set_gate(ctx.client, &namespace, &replica.pod, decided, &pulls::gate_message(&listed, &models))
                        .await;
                }
                if matches!(component, Component::Application(_)) {
                    serving.push(models);
                    serving_models.get_or_insert(listed);
                }
            }
        }
        // The status reports what the serving revision serves.
        let listed = serving_models.unwrap_or_else(|| settings.models.clone());
        let earlier = previous.applications.get(app).map(|a| a.models.as_slice()).unwrap_or_default();
        out.insert(app.clone(), pulls::statuses(&listed, &serving, earlier));
    }
    ctx.puller.retain(key, &live);
    out
}

/// The models the pod's revision serves, when its template says (under verified
/// promotion).
fn models_of(pod: &Pod) -> Option<Vec<String>> {
    let listed = pod.metadata.annotations.as_ref()?.get(MODELS_ANNOTATION)?;
    Some(listed.split(',').filter(|m| !m.is_empty()).map(str::to_string).collect())
}

/// The pod's models-ready condition, as cached.
fn gate_of(pod: &Pod) -> Option<bool> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == MODELS_READY_CONDITION).map(|c| c.status == "True")
}

/// Sets the pod's models-ready condition (a strategic merge patch of its status: the
/// conditions merge by type).
async fn set_gate(client: &Client, namespace: &str, pod: &str, ready: bool, message: &str) {
    let now = k8s_openapi::jiff::Timestamp::now();
    let (status, reason) = if ready { ("True", "ModelsPresent") } else { ("False", "ModelsPulling") };
    let patch = json!({"status": {"conditions": [{
        "type": MODELS_READY_CONDITION,
        "status": status,
        "reason": reason,
        "message": message.chars().take(1000).collect::<String>(),
        "lastTransitionTime": now.to_string(),
    }]}});
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    if let Err(e) = api.patch_status(pod, &params, &Patch::Strategic(&patch)).await {
        tracing::debug!(%pod, error = %e, "cannot set the models-ready condition");
    }
}
