//! Caches of the objects the operator owns, fed by the same watches that trigger
//! reconciles: metadata only (managedFields dropped) for most kinds, Deployments with their
//! status for readiness. Reconciles read these instead of listing.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use super::compact::{CachedDeployment, CachedMeta, CachedTemplate, CachedTemplateMeta};
use crate::reconcile::plan::{Existing, MANAGED_BY, MANAGED_BY_LABEL, OWNER_NAME_LABEL};
use model_orchestra_api::keys::IDLE_SECONDS_ANNOTATION;
use model_orchestra_api::kinds::Kind;

/// One cached child: enough to prune it (with a UID precondition).
#[derive(Debug, Clone)]
pub(super) struct CachedChild {
    pub existing: Existing,
    pub uid: Option<String>,
}

pub(super) struct Caches {
    metadata: BTreeMap<Kind, Store<CachedMeta>>,
    deployments: Store<CachedDeployment>,
    jobs: Store<Job>,
}

fn config() -> watcher::Config {
    watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY},{OWNER_NAME_LABEL}"))
}

/// Metadata-only requests: the API server sends PartialObjectMetadata, not whole objects.
fn metadata_api(client: &Client, ns: Option<&str>, ar: &ApiResource) -> Api<PartialObjectMeta<DynamicObject>> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

pub(super) type MetadataStream = BoxStream<'static, Result<PartialObjectMeta<DynamicObject>, watcher::Error>>;
pub(super) type DeploymentStream = BoxStream<'static, Result<CachedDeployment, watcher::Error>>;
pub(super) type JobStream = BoxStream<'static, Result<Job, watcher::Error>>;

/// The streams that feed the caches, to be polled by the controller as owner triggers.
pub(super) struct Streams {
    pub metadata: Vec<(ApiResource, MetadataStream)>,
    pub deployments: Option<DeploymentStream>,
    pub jobs: Option<JobStream>,
}

/// Starts the watches of every kind in `kinds` (in `namespace`, or everywhere): the caches
/// and the streams that feed them.
pub(super) fn watch(client: &Client, namespace: Option<&str>, kinds: &[Kind]) -> (Caches, Streams) {
    let mut metadata = BTreeMap::new();
    let mut streams = Vec::new();
    let (deployments, writer) = reflector::store::<CachedDeployment>();
    let mut deploy_writer = Some(writer);
    let mut deploy_stream = None;
    let (jobs, job_writer) = reflector::store::<Job>();
    let mut job_writer = Some(job_writer);
    let mut job_stream = None;
    for &kind in kinds {
        if kind == Kind::Job {
            let Some(writer) = job_writer.take() else {
                continue;
            };
            let api: Api<Job> = match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            let s = watcher(api, config())
                .default_backoff()
                .modify(|j: &mut Job| {
                    slim(&mut j.metadata);
                    // The download's state is in the status; the pod template is the bulk.
                    j.spec = None;
                })
                .reflect(writer)
                .touched_objects()
                .boxed();
            job_stream = Some(s);
            continue;
        }
        if kind == Kind::Deployment {
            let Some(writer) = deploy_writer.take() else {
                continue;
            };
            let api: Api<CachedDeployment> = match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            let s = watcher(api, config())
                .default_backoff()
                .modify(|d: &mut CachedDeployment| {
                    // Whether the application sleeps (its replicas are the model gateway's).
                    let idle = d.metadata.annotations.as_mut().and_then(|a| a.remove_entry(IDLE_SECONDS_ANNOTATION));
                    slim(&mut d.metadata);
                    d.metadata.annotations = idle.map(|i| [i].into());
                    // Readiness needs replicas, the status counts and whether the rollout is
                    // past its deadline; verified promotion the revision its pods run.
                    if let Some(spec) = d.spec.as_mut() {
                        let revision = spec
                            .template
                            .metadata
                            .as_mut()
                            .and_then(|m| m.annotations.take())
                            .and_then(|mut a| a.remove_entry(crate::chart::REVISION_ANNOTATION));
                        spec.template = CachedTemplate {
                            metadata: revision.map(|r| CachedTemplateMeta { annotations: Some([r].into()) }),
                        };
                    }
                    if let Some(status) = d.status.as_mut() {
                        let conditions = status.conditions.take().unwrap_or_default();
                        let stuck: Vec<_> = conditions
                            .into_iter()
                            .filter(|c| {
                                c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
                            })
                            .map(|c| DeploymentCondition { last_transition_time: None, last_update_time: None, ..c })
                            .collect();
                        status.conditions = (!stuck.is_empty()).then_some(stuck);
                    }
                })
                .reflect(writer)
                .touched_objects()
                .boxed();
            deploy_stream = Some(s);
            continue;
        }
        let ar = kind.resource();
        // The store keeps the compact form; the objects the watch passes on to trigger
        // reconciles are dropped once mapped to their CR.
        let mut writer = reflector::store::Writer::<CachedMeta>::new(());
        metadata.insert(kind, writer.as_reader());
        let s = watcher(metadata_api(client, namespace, &ar), config())
            .default_backoff()
            .inspect_ok(move |event| writer.apply_watcher_event(&compact(event)))
            .touched_objects()
            .boxed();
        streams.push((ar, s));
    }
    (
        Caches { metadata, deployments, jobs },
        Streams { metadata: streams, deployments: deploy_stream, jobs: job_stream },
    )
}

/// The watch event of a child cached by its metadata, as its store keeps it.
fn compact(event: &watcher::Event<PartialObjectMeta<DynamicObject>>) -> watcher::Event<CachedMeta> {
    use watcher::Event;
    match event {
        Event::Apply(o) => Event::Apply(CachedMeta::of(&o.metadata)),
        Event::Delete(o) => Event::Delete(CachedMeta::of(&o.metadata)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(CachedMeta::of(&o.metadata)),
        Event::InitDone => Event::InitDone,
    }
}

/// Keeps only what pruning, drift checks and routing of events need: name, namespace,
/// uid, resourceVersion, generation, the two identity labels and ownerReferences. With
/// thousands of children this is most of the operator's memory.
fn slim(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.annotations = None;
    meta.creation_timestamp = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|k, _| k == OWNER_NAME_LABEL || k == MANAGED_BY_LABEL);
    }
    for r in meta.owner_references.iter_mut().flatten() {
        r.block_owner_deletion = None;
    }
}

impl Caches {
    /// Waits until every cache has listed once (prune decisions need complete caches).
    pub(super) async fn wait_until_ready(&self) {
        for store in self.metadata.values() {
            let _ = store.wait_until_ready().await;
        }
        let _ = self.deployments.wait_until_ready().await;
        let _ = self.jobs.wait_until_ready().await;
    }

    /// The children of the CR `owner` in `namespace`, by the owner label.
    pub(super) fn children(&self, namespace: &str, owner: &str) -> Vec<CachedChild> {
        let mine = |m: &ObjectMeta| {
            m.namespace.as_deref() == Some(namespace)
                && m.labels.as_ref().and_then(|l| l.get(OWNER_NAME_LABEL)).map(String::as_str) == Some(owner)
        };
        let mut out = Vec::new();
        let ours =
            |m: &&Arc<CachedMeta>| m.namespace.as_deref() == Some(namespace) && m.owner.as_deref() == Some(owner);
        for (&kind, store) in &self.metadata {
            for m in store.state().iter().filter(ours) {
                out.push(CachedChild { existing: m.existing(kind), uid: m.uid.clone() });
            }
        }
        for d in self.deployments.state().iter().filter(|d| mine(&d.metadata)) {
            out.push(cached(Kind::Deployment, &d.metadata));
        }
        for j in self.jobs.state().iter().filter(|j| mine(&j.metadata)) {
            out.push(cached(Kind::Job, &j.metadata));
        }
        out
    }

    /// One cached download Job (its status; no spec).
    pub(super) fn job(&self, namespace: &str, name: &str) -> Option<Arc<Job>> {
        self.jobs.get(&ObjectRef::new(name).within(namespace))
    }

    /// One cached Deployment.
    pub(super) fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<Deployment>> {
        self.deployments.get(&ObjectRef::new(name).within(namespace)).map(|d| Arc::new(d.to_deployment()))
    }

    /// What tells whether one child changed since it was applied (a hash lookup, unlike
    /// [`Self::children`]): its resourceVersion, or for a Deployment its generation, which
    /// moves with its spec but not with its ever-changing status.
    pub(super) fn version(&self, kind: Kind, namespace: &str, name: &str) -> Option<String> {
        if kind == Kind::Deployment {
            let key = ObjectRef::new(name).within(namespace);
            return self.deployments.get(&key)?.metadata.generation.map(|g| g.to_string());
        }
        if kind == Kind::Job {
            return self.job(namespace, name)?.metadata.resource_version.clone();
        }
        let store = self.metadata.get(&kind)?;
        store.get(&ObjectRef::new_with(name, ()).within(namespace))?.resource_version.clone()
    }
}

fn cached(kind: Kind, m: &ObjectMeta) -> CachedChild {
    CachedChild { existing: Existing::of(kind, m), uid: m.uid.clone() }
}
