//! Watches of what the cluster configures that could refuse a creation the local validation
//! passed: webhooks and admission policy bindings (cluster-wide), ResourceQuotas and
//! LimitRanges (per namespace). Metadata only: whether any exists is all that
//! [`crate::reconcile::admission`] asks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use crate::reconcile::admission::Admission;

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
