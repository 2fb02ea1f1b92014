//! The cached forms of Deployments and pods: only the fields the operator reads,
//! deserialized straight from the watch. `Deployment` and `Pod` are 2.4 and 2.2 KiB inline
//! (mostly empty options) before any field is set; with five of each per CR, holding them
//! was a fifth of the operator's memory at 1,000 CRs. Readers get the k8s-openapi types back,
//! built from these.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::reflector::Lookup;
use serde::Deserialize;

use crate::reconcile::plan::{controller_uids, Existing, MANAGED_BY_LABEL, OWNER_NAME_LABEL};
use model_orchestra_api::kinds::Kind;

/// A Deployment: its metadata, replicas, pod template annotations and status.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct CachedDeployment {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<CachedDeploymentSpec>,
    #[serde(default)]
    pub status: Option<DeploymentStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct CachedDeploymentSpec {
    #[serde(default)]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub template: CachedTemplate,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct CachedTemplate {
    #[serde(default)]
    pub metadata: Option<CachedTemplateMeta>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct CachedTemplateMeta {
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl CachedDeployment {
    pub(super) fn to_deployment(&self) -> Deployment {
        Deployment {
            metadata: self.metadata.clone(),
            spec: self.spec.as_ref().map(|s| DeploymentSpec {
                replicas: s.replicas,
                template: PodTemplateSpec {
                    metadata: s
                        .template
                        .metadata
                        .as_ref()
                        .map(|m| ObjectMeta { annotations: m.annotations.clone(), ..Default::default() }),
                    ..Default::default()
                },
                ..Default::default()
            }),
            status: self.status.clone(),
        }
    }
}

/// A pod: its metadata, node and status.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct CachedPod {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<CachedPodSpec>,
    #[serde(default)]
    pub status: Option<PodStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct CachedPodSpec {
    #[serde(default, rename = "nodeName")]
    pub node_name: Option<String>,
}

impl CachedPod {
    pub(super) fn to_pod(&self) -> Pod {
        Pod {
            metadata: self.metadata.clone(),
            spec: self
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .map(|n| PodSpec { node_name: Some(n), ..Default::default() }),
            status: self.status.clone(),
        }
    }
}

/// A child of a kind cached by its metadata alone (ConfigMaps, Services, …): what pruning
/// and drift checks read, in about a fifth of the memory of the `ObjectMeta` it is made
/// from. An `ObjectMeta` is some 350 bytes inline before any field is set, its two labels
/// take a whole B-tree node, and a store's key of a dynamic kind repeats the kind's five
/// names; with eleven such children per CR they were the largest part of the operator's
/// memory at 1,000 CRs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CachedMeta {
    pub name: String,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Its owner-name label.
    pub owner: Option<String>,
    /// Its managed-by label.
    pub managed_by: Option<String>,
    /// The UIDs of its controller ownerReferences.
    pub controllers: Vec<String>,
}

impl CachedMeta {
    pub(super) fn of(meta: &ObjectMeta) -> Self {
        let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key)).cloned();
        CachedMeta {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            owner: label(OWNER_NAME_LABEL),
            managed_by: label(MANAGED_BY_LABEL),
            controllers: controller_uids(meta),
        }
    }

    /// What the prune rule reads of it ([`Existing`]): the same as from its `ObjectMeta`,
    /// whose other labels the rule never reads.
    pub(super) fn existing(&self, kind: Kind) -> Existing {
        let labels = [(OWNER_NAME_LABEL, &self.owner), (MANAGED_BY_LABEL, &self.managed_by)]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
            .collect();
        Existing { kind, name: self.name.clone(), labels, controller_uids: self.controllers.clone() }
    }
}

/// A store's key needs no kind: each kind has a store of its own.
impl Lookup for CachedMeta {
    type DynamicType = ();
    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.namespace.as_deref().map(Cow::Borrowed)
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.resource_version.as_deref().map(Cow::Borrowed)
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        self.uid.as_deref().map(Cow::Borrowed)
    }
}

/// `kube::Resource` for a cached form of a namespaced built-in kind.
macro_rules! resource {
    ($type:ty, $group:literal, $version:literal, $kind:literal, $plural:literal) => {
        impl kube::Resource for $type {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;
            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(CachedDeployment, "apps", "v1", "Deployment", "deployments");
resource!(CachedPod, "", "v1", "Pod", "pods");

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cached_deployment_reads_back_replicas_revision_and_status() {
        let d: CachedDeployment = serde_json::from_value(json!({
            "metadata": {"name": "d", "generation": 3},
            "spec": {"replicas": 2, "selector": {}, "template": {"metadata": {"annotations": {"r": "1"}}, "spec": {"containers": []}}},
            "status": {"readyReplicas": 1, "observedGeneration": 3}
        }))
        .unwrap();
        let back = d.to_deployment();
        let spec = back.spec.unwrap();
        assert_eq!(spec.replicas, Some(2));
        assert_eq!(spec.template.metadata.unwrap().annotations.unwrap()["r"], "1");
        assert_eq!(back.status.unwrap().ready_replicas, Some(1));
        assert_eq!(back.metadata.generation, Some(3));
    }

    #[test]
    fn a_child_cached_by_its_metadata_is_pruned_by_the_same_facts_as_its_object_meta() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "c", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
            "labels": {OWNER_NAME_LABEL: "demo", MANAGED_BY_LABEL: "model-orchestra", "app": "x"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "K", "name": "o", "uid": "o1", "controller": true},
                {"apiVersion": "v1", "kind": "K", "name": "p", "uid": "o2"}
            ]
        }))
        .unwrap();
        let cached = CachedMeta::of(&meta);
        let (from_meta, from_cache) = (Existing::of(Kind::ConfigMap, &meta), cached.existing(Kind::ConfigMap));
        assert_eq!(from_cache.controller_uids, from_meta.controller_uids);
        assert_eq!(from_cache.name, from_meta.name);
        for label in [OWNER_NAME_LABEL, MANAGED_BY_LABEL] {
            assert_eq!(from_cache.labels.get(label), from_meta.labels.get(label));
        }
        assert_eq!((cached.uid(), cached.resource_version()), (Some("u1".into()), Some("7".into())));
    }

    #[test]
    fn a_cached_pod_reads_back_its_node_and_status() {
        let p: CachedPod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        let back = p.to_pod();
        assert_eq!(back.spec.unwrap().node_name.as_deref(), Some("n1"));
        assert_eq!(back.status.unwrap().phase.as_deref(), Some("Running"));
    }
}
