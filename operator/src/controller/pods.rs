//! The pods of the operator's Deployments, watched read-only so that a CR says *why* its
//! pods are not running — the scheduler's own message ("0/4 nodes are available: …") or a
//! container that cannot start — within seconds, not after the Deployment's 10-minute
//! progress deadline. Only what that needs is cached.

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use super::compact::CachedPod;
use crate::chart::{
    Component, COMPONENT_LABEL, INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, MODELS_ANNOTATION,
    MODELS_READY_CONDITION, POD_INDEX_LABEL, ROLE_LABEL,
};
use crate::reconcile::group::{self, Member, WORKERS_ANNOTATION};
use crate::reconcile::pod_health::{newness, pod_problem, PodProblem};

pub(super) type PodStream = BoxStream<'static, Result<CachedPod, watcher::Error>>;

/// The cache of our pods.
#[derive(Clone)]
pub(super) struct Pods {
    store: Store<CachedPod>,
}

/// Watches the pods the chart's Deployments create (in `namespace`, or everywhere): the
/// cache, and the stream that feeds it (polled by the controller, which maps each pod to
/// its CR).
pub(super) fn watch(client: &Client, namespace: Option<&str>) -> (Pods, PodStream) {
    let api: Api<CachedPod> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (store, writer) = reflector::store();
    let config = watcher::Config::default()
        .labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY},{INSTANCE_LABEL},{COMPONENT_LABEL}"));
    let stream = watcher(api, config).default_backoff().modify(slim).reflect(writer).touched_objects().boxed();
    (Pods { store }, stream)
}

/// Keeps the identity labels (a group member's role and ordinal too), the node, the
/// scheduling and readiness conditions (an Ollama replica's models-ready one too), the
/// address and the containers' waiting states.
fn slim(pod: &mut CachedPod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    // A group's root: the workers it started with; an Ollama replica under promotion: the
    // models its revision serves.
    meta.annotations = meta.annotations.take().and_then(|mut a| {
        a.retain(|k, _| k == WORKERS_ANNOTATION || k == MODELS_ANNOTATION);
        (!a.is_empty()).then_some(a)
    });
    meta.owner_references = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|k, _| [INSTANCE_LABEL, COMPONENT_LABEL, ROLE_LABEL, POD_INDEX_LABEL].contains(&k.as_str()));
    }
    if let Some(status) = pod.status.take() {
        let scheduled = status
            .conditions
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "PodScheduled" || c.type_ == "Ready" || c.type_ == MODELS_READY_CONDITION)
            .map(|c| PodCondition { last_probe_time: None, last_transition_time: None, ..c });
        let mut containers = status.container_statuses.unwrap_or_default();
        for c in &mut containers {
            c.last_state = None;
            c.image_id = String::new();
            c.container_id = None;
            c.volume_mounts = None;
            c.resources = None;
            c.allocated_resources = None;
        }
        pod.status = Some(PodStatus {
            conditions: Some(scheduled.collect()),
            container_statuses: Some(containers),
            phase: status.phase,
            pod_ip: status.pod_ip,
            ..Default::default()
        });
    }
}

impl Pods {
    pub(super) async fn wait_until_ready(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    /// The cached pods of the release `release` in `namespace` whose component label is `component`.
    fn labelled<'a>(&self, namespace: &'a str, release: &'a str, component: &'a str) -> impl Iterator<Item = Pod> + 'a {
        self.store
            .state()
            .into_iter()
            .filter(move |p| {
                let labels = p.metadata.labels.as_ref();
                p.metadata.namespace.as_deref() == Some(namespace)
                    && labels.and_then(|l| l.get(INSTANCE_LABEL)).map(String::as_str) == Some(release)
                    && labels.and_then(|l| l.get(COMPONENT_LABEL)).map(String::as_str) == Some(component)
            })
            .map(|p| p.to_pod())
    }

    /// Why the pods of `component` of the release `release` in `namespace` are not running,
    /// if one of them says: the newest such pod's problem (during a rollout, the new
    /// template's pods matter, not the old ones on their way out).
    pub(super) fn problem(&self, namespace: &str, release: &str, component: &Component) -> Option<PodProblem> {
        let label = component.label_value()?;
        self.labelled(namespace, release, &label)
            .filter_map(|p| Some((newness(&p), pod_problem(&p)?)))
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, problem)| problem)
    }

    /// The members of the distributed-llama group of `component` of the release `release`
    /// in `namespace`.
    pub(super) fn members(&self, namespace: &str, release: &str, component: &Component) -> Vec<Member> {
        let Some(label) = component.label_value() else { return Vec::new() };
        self.labelled(namespace, release, &label).filter_map(|p| group::member(&p)).collect()
    }

    /// The pods of `component` of the release `release` in `namespace` that run (phase
    /// Running, not being deleted).
    pub(super) fn running(&self, namespace: &str, release: &str, component: &Component) -> Vec<Pod> {
        let Some(label) = component.label_value() else { return Vec::new() };
        self.labelled(namespace, release, &label)
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect()
    }

    /// The newest pod of the model download of `application` (component
    /// `model-<application>`) of the release `release` in `namespace`.
    pub(super) fn download_pod(&self, namespace: &str, release: &str, application: &str) -> Option<Pod> {
        let label = format!("model-{application}");
        self.labelled(namespace, release, &label).max_by(|a, b| newness(a).cmp(&newness(b)))
    }

    /// The release (CR name) and namespace a cached pod belongs to.
    pub(super) fn owner(pod: &CachedPod) -> Option<(String, String)> {
        let release = pod.metadata.labels.as_ref()?.get(INSTANCE_LABEL)?.clone();
        Some((release, pod.metadata.namespace.clone()?))
    }
}
