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
use serde::Deserialize;

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
