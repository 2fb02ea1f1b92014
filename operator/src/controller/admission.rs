//! What could refuse a creation the local validation passed, as the operator learns it:
//! webhooks and admission policy bindings (cluster-wide), ResourceQuotas and LimitRanges
//! (per namespace), watched as metadata — whether any exists is all that
//! [`crate::reconcile::admission`] asks —, and RBAC, asked once per namespace and kind.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use crate::reconcile::admission::Admission;
use model_orchestra_api::kinds::Kind;

/// The admission kinds that apply cluster-wide, wherever they are served.
const CLUSTER_KINDS: [&str; 4] = [
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicyBinding",
];
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
const RETRY: Duration = Duration::from_secs(15);

type MetaStore = Store<PartialObjectMeta<DynamicObject>>;

/// One watched kind: its cache and whether it has listed once.
struct Source {
    namespaced: bool,
    store: MetaStore,
    listed: Arc<AtomicBool>,
}

/// What the watches know; `None` until discovery has found the kinds to watch.
#[derive(Clone, Default)]
pub(super) struct AdmissionWatch {
    sources: Arc<Mutex<Option<Vec<Source>>>>,
}

impl AdmissionWatch {
    /// Whether anything could refuse a creation in `namespace`.
    pub(super) fn admission(&self, namespace: &str) -> Admission {
        let sources = self.sources.lock().expect("admission lock");
        let Some(sources) = sources.as_ref() else { return Admission::Unknown };
        if !sources.iter().all(|s| s.listed.load(Ordering::Acquire)) {
            return Admission::Unknown;
        }
        let guarded = sources.iter().any(|s| {
            if s.namespaced {
                s.store.state().iter().any(|o| o.metadata.namespace.as_deref() == Some(namespace))
            } else {
                !s.store.is_empty()
            }
        });
        if guarded {
            Admission::Guarded
        } else {
            Admission::Open
        }
    }

    /// Discovers the admission kinds the cluster serves, then keeps their caches (in
    /// `namespace`, or everywhere, for the namespaced ones) until dropped. Until every
    /// watch has listed — forever, if the operator may not list one — creations are dry-run.
    pub(super) async fn run(self, client: Client, namespace: Option<String>) {
        let resources = loop {
            match kube::discovery::group(&client, ADMISSION_GROUP).await {
                Ok(group) => {
                    break group
                        .recommended_resources()
                        .into_iter()
                        .map(|(ar, _)| ar)
                        .filter(|ar| CLUSTER_KINDS.contains(&ar.kind.as_str()))
                        .collect::<Vec<_>>()
                }
                Err(e) => {
                    tracing::debug!(error = %e, "admission discovery failed; creations are dry-run meanwhile");
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
        let core = |kind: &str, plural: &str| ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let namespaced = [core("ResourceQuota", "resourcequotas"), core("LimitRange", "limitranges")];
        let mut sources = Vec::new();
        let mut streams = Vec::new();
        let kinds = resources.into_iter().map(|ar| (ar, false)).chain(namespaced.into_iter().map(|ar| (ar, true)));
        for (ar, is_namespaced) in kinds {
            let api: Api<PartialObjectMeta<DynamicObject>> = match (&namespace, is_namespaced) {
                (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
                _ => Api::all_with(client.clone(), &ar),
            };
            let writer = reflector::store::Writer::new(ar.clone());
            let listed = Arc::new(AtomicBool::new(false));
            sources.push(Source { namespaced: is_namespaced, store: writer.as_reader(), listed: listed.clone() });
            let kind = ar.kind.clone();
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|o| o.metadata.managed_fields = None)
                .reflect(writer)
                .for_each(move |event| {
                    match event {
                        Ok(watcher::Event::InitDone) => listed.store(true, Ordering::Release),
                        Ok(_) => {}
                        // Until it has listed again, what it shows may be stale.
                        Err(e) => {
                            listed.store(false, Ordering::Release);
                            tracing::debug!(kind, error = %e, "cannot watch admission; creations are dry-run");
                        }
                    }
                    async {}
                });
            streams.push(stream);
        }
        *self.sources.lock().expect("admission lock") = Some(sources);
        futures::future::join_all(streams).await;
    }
}

/// Which kinds RBAC lets the operator create in which namespace: asked once per namespace
/// and kind (SelfSubjectAccessReviews for `create` and `patch`, what a server-side apply of
/// a new object needs), and learnt from every creation the API server admitted.
#[derive(Default)]
pub(super) struct Permissions {
    allowed: Mutex<HashSet<(String, Kind)>>,
    /// Namespaces where a creation applied without its dry run was refused: every
    /// creation there is dry-run from then on.
    distrusted: Mutex<HashSet<String>>,
    /// One question at a time: the first CRs of a namespace, reconciled together, wait for
    /// one answer rather than each asking.
    asking: tokio::sync::Mutex<()>,
}

impl Permissions {
    /// Whether a creation of `kind` in `namespace` is known to be allowed.
    pub(super) fn allows(&self, namespace: &str, kind: Kind) -> bool {
        !self.distrusted.lock().expect("permissions lock").contains(namespace)
            && self.allowed.lock().expect("permissions lock").contains(&(namespace.to_string(), kind))
    }

    /// Remembers creations of `kinds` the API server admitted in `namespace`.
    pub(super) fn learn(&self, namespace: &str, kinds: impl IntoIterator<Item = Kind>) {
        let mut allowed = self.allowed.lock().expect("permissions lock");
        allowed.extend(kinds.into_iter().map(|k| (namespace.to_string(), k)));
    }

    /// After a refused creation that had no dry run: dry-run every creation in `namespace`.
    pub(super) fn distrust(&self, namespace: &str) {
        self.distrusted.lock().expect("permissions lock").insert(namespace.to_string());
    }

    /// Asks the API server about the `kinds` not yet known in `namespace`. A kind it does not
    /// allow, or that cannot be asked about, stays unknown (its creations are dry-run, and the
    /// dry run names the refusal).
    pub(super) async fn ask(&self, client: &Client, namespace: &str, kinds: &BTreeSet<Kind>) {
        let unknown = |p: &Self| -> Vec<Kind> { kinds.iter().copied().filter(|&k| !p.allows(namespace, k)).collect() };
        if unknown(self).is_empty() || self.distrusted.lock().expect("permissions lock").contains(namespace) {
            return;
        }
        let _one = self.asking.lock().await;
        let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
        for kind in unknown(self) {
            let mut allowed = true;
            for verb in ["create", "patch"] {
                let review = SelfSubjectAccessReview {
                    spec: SelfSubjectAccessReviewSpec {
                        resource_attributes: Some(ResourceAttributes {
                            namespace: Some(namespace.to_string()),
                            verb: Some(verb.into()),
                            group: Some(kind.group().into()),
                            resource: Some(kind.plural().into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                match api.create(&PostParams::default(), &review).await {
                    Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
                    Ok(_) => allowed = false,
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot ask for permissions; creations are dry-run");
                        allowed = false;
                    }
                }
            }
            if allowed {
                self.learn(namespace, [kind]);
            }
        }
    }
}
