//! What the gateway and applications share: a pod-running component as the templates see
//! it, and the pieces both build it from — labels and the config checksum, image, Ingress
//! rules, pod settings, env.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, PodSecurityContext, Probe, ResourceRequirements, SecurityContext, ServicePort,
    Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, IngressBackend, IngressRule, IngressServiceBackend, ServiceBackendPort,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{COMPONENT_LABEL, CONFIG_CHECKSUM_ANNOTATION, INSTANCE_LABEL};
use crate::chart::names::Meta;
use crate::error::InputError;
use crate::model::PodSettings;
use model_orchestra_api::values::{IngressTls, PullPolicy, ScalingSpec, ServiceType};

/// One pod-running component (the gateway or an application), as the templates see it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ComponentContext<'a> {
    /// Name of every object of this component (and of its container).
    pub(super) name: String,
    /// What the `metadata` partial prints (a small object, because Handlebars clones a
    /// partial's context).
    pub(super) meta: Meta,
    /// The application's key in `spec.applications`; absent for the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) app: Option<&'a str>,
    /// The candidate of a revision being verified, not the application's own pods.
    #[serde(skip)]
    pub(super) candidate: bool,
    /// A distributed-llama group (its root and workers) instead of Takeoff readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dllama: Option<crate::chart::group::GroupContext>,
    /// Ollama, behind the application's own Service, instead of Takeoff readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ollama: Option<crate::chart::ollama::OllamaContext>,
    pub(super) selector_labels: BTreeMap<String, String>,
    pub(super) pod_labels: BTreeMap<String, String>,
    pub(super) pod_annotations: BTreeMap<String, String>,
    pub(super) image: String,
    pub(super) env: Vec<EnvVar>,
    pub(super) config_yaml: String,
    /// The volume mounted at `/code/models` (`v1alpha2` applications).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) models_volume: Option<std::borrow::Cow<'a, Volume>>,
    /// The claim and download Job of the application's model cache, when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) model_cache: Option<ModelCacheContext<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) replicas: Option<i32>,
    /// A sleeping application's `idleSeconds`: the model gateway owns its `replicas`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) idle_seconds: Option<String>,
    /// Ingress rules with the rules' defaults filled in, when the ingress is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ingress: Option<IngressRules>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) scaler: Option<Scaler<'a>>,
    /// The Deployment's strategy and progress deadline, when the values set them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) strategy: Option<&'a k8s_openapi::api::apps::v1::DeploymentStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) progress_deadline_seconds: Option<i32>,
    /// A PodDisruptionBudget of at most one pod unavailable: an application's serving pods
    /// when there may be more than one (`v1alpha2`'s chart renders it).
    pub(super) disruption_budget: bool,
    /// The pod's and Service's settings, with the GPU rules applied.
    pub(super) values: PodContext<'a>,
}

/// A model cache as the templates see it: its PersistentVolumeClaim and download Job.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ModelCacheContext<'a> {
    pub(super) claim: Meta,
    pub(super) job: Meta,
    /// The download pod's labels: the release's, and the component `model-<application>`
    /// (its pods are not the application's).
    pub(super) pod_labels: BTreeMap<String, String>,
    pub(super) size: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(super) storage_class_name: &'a str,
    pub(super) access_modes: &'a [String],
    pub(super) image: &'a str,
    pub(super) command: &'a [String],
    pub(super) env: Vec<EnvVar>,
    pub(super) backoff_limit: i32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PodContext<'a> {
    image: ImagePolicy,
    pod_security_context: &'a PodSecurityContext,
    security_context: &'a SecurityContext,
    ports: &'a [ContainerPort],
    liveness_probe: &'a Probe,
    readiness_probe: &'a Probe,
    resources: ResourceRequirements,
    volumes: &'a [Volume],
    volume_mounts: &'a [VolumeMount],
    node_selector: &'a BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
    affinity: &'a Affinity,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<ServiceContext<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ingress: Option<IngressContext<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ImagePolicy {
    pull_policy: PullPolicy,
}

#[derive(Serialize)]
struct ServiceContext<'a> {
    #[serde(rename = "type")]
    type_: ServiceType,
    ports: &'a [ServicePort],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IngressContext<'a> {
    class_name: &'a str,
    annotations: &'a BTreeMap<String, String>,
    tls: &'a [IngressTls],
}

/// An Ingress's `spec.rules`, as the templates read them (`ingress.rules`).
#[derive(Serialize)]
pub(super) struct IngressRules {
    rules: Vec<IngressRule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Scaler<'a> {
    pub(super) annotations: &'a BTreeMap<String, String>,
    pub(super) spec: &'a ScalingSpec,
    pub(super) trigger_metadata: BTreeMap<String, String>,
}

/// Labels, selector, pod labels and pod annotations of a component.
pub(super) struct PodMetadata {
    pub(super) labels: BTreeMap<String, String>,
    pub(super) selector: BTreeMap<String, String>,
    pub(super) pod_labels: BTreeMap<String, String>,
    pub(super) pod_annotations: BTreeMap<String, String>,
}

pub(super) fn pod_metadata(
    common: &BTreeMap<String, String>,
    component: &str,
    pod: &PodSettings,
    config_yaml: &str,
) -> PodMetadata {
    let mut labels = common.clone();
    labels.insert(COMPONENT_LABEL.into(), component.to_string());
    let selector: BTreeMap<String, String> = [model_orchestra_api::keys::NAME_LABEL, INSTANCE_LABEL, COMPONENT_LABEL]
        .into_iter()
        .map(|k| (k.to_string(), labels[k].clone()))
        .collect();
    // The user's pod labels cannot override the selector, or the Deployment would not
    // select its own pods.
    let mut pod_labels = labels.clone();
    pod_labels.extend(pod.pod_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    pod_labels.extend(selector.clone());
    let mut pod_annotations = pod.pod_annotations.clone();
    pod_annotations.insert(CONFIG_CHECKSUM_ANNOTATION.into(), hex_sha256(config_yaml));
    PodMetadata { labels, selector, pod_labels, pod_annotations }
}

pub(super) fn hex_sha256(text: &str) -> String {
    use std::fmt::Write;
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// `repository:tag`; an empty tag is the chart's appVersion plus `-<suffix>`, a `sha256:`
/// tag pins a digest.
pub(super) fn image(image: &crate::model::ImageSettings, app_version: &str, suffix: &str) -> String {
    let repo = &image.repository;
    match image.tag.as_str() {
        "" => format!("{repo}:{app_version}-{suffix}"),
        digest if digest.starts_with("sha256:") => format!("{repo}@{digest}"),
        tag => format!("{repo}:{tag}"),
    }
}

/// Ingress rules with what a valid `networking.k8s.io/v1` Ingress needs (the contract's
/// rules): a path (`/`) and a pathType (`ImplementationSpecific`) for every host, backed by
/// the component's first Service port.
pub(super) fn ingress(pod: &PodSettings, name: &str, field: &str) -> Result<Option<IngressRules>, InputError> {
    let Some(settings) = pod.ingress.as_ref().filter(|i| i.enabled) else {
        return Ok(None);
    };
    let service_ports: &[ServicePort] = pod.service.as_ref().map_or(&[], |s| &s.ports);
    let Some(first) = service_ports.first() else {
        return Err(InputError::new(
            format!("{field}.service.ports"),
            "an enabled ingress needs at least one service port to route to",
        ));
    };
    if settings.hosts.is_empty() {
        return Err(InputError::new(format!("{field}.ingress.hosts"), "an enabled ingress needs at least one host"));
    }
    let backend = IngressBackend {
        service: Some(IngressServiceBackend {
            name: name.to_string(),
            port: Some(ServiceBackendPort { number: Some(first.port), ..Default::default() }),
        }),
        ..Default::default()
    };
    let rules = settings
        .hosts
        .iter()
        .map(|h| {
            let given = h.paths.as_deref().unwrap_or_default();
            let default_path = [model_orchestra_api::values::IngressPath::default()];
            let paths = if given.is_empty() { &default_path[..] } else { given };
            let paths = paths
                .iter()
                .map(|p| HTTPIngressPath {
                    path: Some(p.path.clone().unwrap_or_else(|| "/".into())),
                    path_type: p.path_type.map_or_else(|| "ImplementationSpecific".into(), path_type_name),
                    backend: backend.clone(),
                })
                .collect();
            IngressRule { host: h.host.clone().filter(|s| !s.is_empty()), http: Some(HTTPIngressRuleValue { paths }) }
        })
        .collect();
    Ok(Some(IngressRules { rules }))
}

fn path_type_name(t: model_orchestra_api::values::PathType) -> String {
    match t {
        model_orchestra_api::values::PathType::Exact => "Exact",
        model_orchestra_api::values::PathType::Prefix => "Prefix",
        model_orchestra_api::values::PathType::ImplementationSpecific => "ImplementationSpecific",
    }
    .into()
}

pub(super) fn pod_context<'a>(
    pod: &'a PodSettings,
    resources: ResourceRequirements,
    tolerations: Vec<Toleration>,
) -> PodContext<'a> {
    PodContext {
        image: ImagePolicy { pull_policy: pod.image.pull_policy },
        pod_security_context: &pod.pod_security_context,
        security_context: &pod.security_context,
        ports: &pod.ports,
        liveness_probe: &pod.liveness_probe,
        readiness_probe: &pod.readiness_probe,
        resources,
        volumes: &pod.volumes,
        volume_mounts: &pod.volume_mounts,
        node_selector: &pod.node_selector,
        tolerations,
        affinity: &pod.affinity,
        service: pod.service.as_ref().map(|s| ServiceContext { type_: s.type_, ports: &s.ports }),
        ingress: pod.ingress.as_ref().map(|i| IngressContext {
            class_name: &i.class_name,
            annotations: &i.annotations,
            tls: &i.tls,
        }),
    }
}

pub(super) fn env_var((name, value): (&str, &str)) -> EnvVar {
    EnvVar { name: name.to_string(), value: Some(value.to_string()), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ImageSettings;

    #[test]
    fn checksum_is_hex_sha256() {
        assert_eq!(hex_sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn empty_tag_defaults_to_app_version_and_suffix() {
        let settings = |tag: &str| ImageSettings {
            repository: "tytn/takeoff-pro".into(),
            pull_policy: PullPolicy::IfNotPresent,
            tag: tag.into(),
        };
        assert_eq!(image(&settings(""), "1.2.3", "gpu"), "tytn/takeoff-pro:1.2.3-gpu");
        assert_eq!(image(&settings("sha256:abc"), "1", "cpu"), "tytn/takeoff-pro@sha256:abc");
    }
}
