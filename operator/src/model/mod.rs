//! The one internal model of a ModelOrchestra, whatever API version it was written in.
//!
//! Each served version ([`crate::versions`]) turns its spec into [`Values`] (every field
//! optional, as written); [`resolve`] merges them over the chart's `values.yaml` (Helm's
//! merge, [`merge`]) into a [`Model`], where nothing is left to default. Validation, the
//! renderer and the reconciler read only the model; no code outside `versions` knows which
//! version a CR was written in.

mod keys;
pub(crate) mod merge;
pub(crate) mod resolve;
pub mod values;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecretKeySelector, SecurityContext, ServicePort, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use model_orchestra_api::values::{
    Device, GatewayConfig, IngressHost, IngressTls, PullPolicy, ReaderConfig, ScalingSpec, ServiceType,
};

pub use keys::snake_case;
pub use resolve::resolve;
pub use values::{ApplicationValues, GatewayValues, Values};

/// The rules of a values contract that the renderer computes rather than the templates:
/// one per API version, given by its module in [`crate::versions`].
#[derive(Debug)]
pub struct ContractRules {
    /// The root key of every `config.yaml`.
    pub config_root: &'static str,
    /// Env every reader gets unless it names the variable itself, in this order.
    pub required_application_env: fn() -> Vec<EnvVar>,
    /// Whether the KEDA trigger also carries `target_<application>` (besides the consumer
    /// group's target).
    pub trigger_targets_application: bool,
}

/// Everything the chart renders for one ModelOrchestra.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub rules: &'static ContractRules,
    pub name_override: String,
    pub fullname_override: String,
    pub image_pull_secrets: Vec<LocalObjectReference>,
    pub service_account: ServiceAccountSettings,
    pub gateway: GatewayModel,
    /// The model gateway's settings, where the contract has one (`v1alpha2`).
    pub model_gateway: Option<ModelGatewaySettings>,
    /// `applicationTemplate.env`: applications take the names they do not set themselves.
    pub template_env: Vec<EnvVar>,
    /// In key order.
    pub applications: Vec<ApplicationModel>,
    /// The values as the user wrote them (before any default), for the checks that name
    /// where a value was written.
    pub written: Values,
}

impl Model {
    /// Whether the chart renders the model gateway: the contract has one and every
    /// application is an open engine (Ollama), so no Takeoff gateway takes its place.
    pub fn has_model_gateway(&self) -> bool {
        self.model_gateway.is_some()
            && !self.applications.is_empty()
            && self.applications.iter().all(|a| matches!(a.engine, EngineModel::Ollama(_)))
    }
}

impl PartialEq for ContractRules {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServiceAccountSettings {
    pub create: bool,
    pub automount: bool,
    pub annotations: BTreeMap<String, String>,
    /// Empty: the generated full name (or `default` when not created).
    pub name: String,
}

/// What the gateway and every application share: one Deployment's pod, and (where the
/// contract has them) its Service and Ingress.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSettings {
    pub image: ImageSettings,
    pub env: Vec<EnvVar>,
    pub replica_count: i32,
    pub pod_annotations: BTreeMap<String, String>,
    pub pod_labels: BTreeMap<String, String>,
    pub pod_security_context: PodSecurityContext,
    pub security_context: SecurityContext,
    pub ports: Vec<ContainerPort>,
    /// `None` where the contract gives the component no Service of its own.
    pub service: Option<ServiceSettings>,
    /// `None` where the contract gives the component no Ingress of its own.
    pub ingress: Option<IngressSettings>,
    pub resources: ResourceRequirements,
    pub liveness_probe: Probe,
    pub readiness_probe: Probe,
    pub volumes: Vec<Volume>,
    pub volume_mounts: Vec<VolumeMount>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    pub affinity: Affinity,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImageSettings {
    pub repository: String,
    pub pull_policy: PullPolicy,
    /// Empty: the chart's appVersion and a `-cpu`/`-gpu` suffix; `sha256:…` pins a digest.
    pub tag: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServiceSettings {
    pub type_: ServiceType,
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IngressSettings {
    pub enabled: bool,
    pub class_name: String,
    pub annotations: BTreeMap<String, String>,
    pub hosts: Vec<IngressHost>,
    pub tls: Vec<IngressTls>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayModel {
    pub pod: PodSettings,
    /// `gateway.config` as merged (its open-ended keys included).
    pub config: GatewayConfig,
    pub internal_port: i32,
    pub export_prometheus_metrics: bool,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApplicationModel {
    /// The key in `spec.applications`.
    pub key: String,
    pub pod: PodSettings,
    /// The application's own `env` (before the template's and the required ones).
    pub own_env: Vec<EnvVar>,
    /// `readerConfig` as merged (its open-ended keys included).
    pub reader: ReaderConfig,
    pub device: Device,
    pub consumer_group: String,
    pub scaling: ScalingSettings,
    /// The volume mounted at `/code/models`, where the contract has one.
    pub models_volume: Option<Volume>,
    /// The model cache, when enabled.
    pub model_cache: Option<ModelCacheSettings>,
    /// The Deployment's strategy; `None`: Kubernetes' default.
    pub strategy: Option<DeploymentStrategy>,
    /// The Deployment's progress deadline; `None`: Kubernetes' default.
    pub progress_deadline_seconds: Option<i32>,
    /// Verified promotion, when enabled.
    pub promotion: Option<PromotionSettings>,
    pub engine: EngineModel,
    /// Scale to zero when idle, when enabled.
    pub sleep: Option<SleepSettings>,
    pub origin: Origin,
}

/// The inference engine of an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineModel {
    /// Takeoff readers, registered with the gateway.
    Takeoff,
    /// A distributed-llama group.
    DistributedLlama(DllamaSettings),
    /// Ollama, behind the application's own Service.
    Ollama(OllamaSettings),
}

impl EngineModel {
    /// Whether the application's pods are Takeoff readers (which the Takeoff gateway routes to).
    pub fn is_takeoff(&self) -> bool {
        matches!(self, EngineModel::Takeoff)
    }
}

/// An Ollama application's engine, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OllamaSettings {
    /// The models as written (`smollm2:135m`), in the order listed.
    pub models: Vec<String>,
    /// `host[:port]` of the registry the models come from; empty: Ollama's own.
    pub registry: String,
    pub insecure: bool,
    pub image: String,
    pub port: i32,
    pub stall_seconds: i32,
}

impl OllamaSettings {
    /// The name Ollama pulls a model as: the registry's host in front when one is set
    /// (`registry.example.com:5000/library/smollm2:135m`), the name as written otherwise.
    pub fn pull_name(&self, model: &str) -> String {
        if self.registry.is_empty() {
            return model.to_string();
        }
        let with_namespace = if model.contains('/') { model.to_string() } else { format!("library/{model}") };
        format!("{}/{with_namespace}", self.registry)
    }
}

/// A distributed-llama group, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DllamaSettings {
    /// Members, the root included.
    pub nodes: i32,
    pub image: String,
    pub nthreads: i32,
    pub buffer_float_type: model_orchestra_api::values::BufferFloatType,
    pub max_seq_len: i32,
    pub port: i32,
    pub downloader_image: String,
    pub downloader_command: Vec<String>,
}

/// An enabled verified promotion, resolved: `values.yaml` ← `applicationTemplate.promotion`
/// ← the application's own, key by key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionSettings {
    pub prompt: String,
    /// As written (its validity is checked with the other values).
    pub expect: String,
    pub max_tokens: i32,
    pub timeout_seconds: i32,
    pub period_seconds: i32,
    pub success_threshold: i32,
    pub failure_threshold: i32,
    pub deadline_seconds: i32,
}

/// The model gateway (`values.yaml` ← `spec.modelGateway`, key by key).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelGatewaySettings {
    pub image: String,
    pub resources: ResourceRequirements,
}

/// Scale to zero, resolved (`values.yaml` ← template ← own, key by key), when enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SleepSettings {
    pub idle_seconds: i32,
    pub hold_seconds: i32,
    pub max_held_requests: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScalingSettings {
    pub enabled: bool,
    pub metric_target: i64,
    pub annotations: BTreeMap<String, String>,
    pub spec: ScalingSpec,
}

/// An enabled model cache, resolved: `values.yaml` ← `applicationTemplate.modelCache` ←
/// the application's own, key by key.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCacheSettings {
    pub size: String,
    /// Empty: the cluster's default StorageClass.
    pub storage_class_name: String,
    pub access_modes: Vec<String>,
    pub image: String,
    pub command: Vec<String>,
    pub env: Vec<EnvVar>,
    pub token_secret: Option<SecretKeySelector>,
    pub backoff_limit: i32,
    /// The `models.titanml.co/refresh` value the model is downloaded for ("" if none).
    pub refresh: String,
}

/// A promotion's `expect` as a matcher: from the start of the answer, case-insensitively.
pub fn expectation(expect: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{expect})")).case_insensitive(true).build()
}

/// The extended resource of NVIDIA GPUs, and the taint GPU nodes carry.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The toleration of GPU nodes' `nvidia.com/gpu:NoSchedule` taint.
pub fn gpu_toleration() -> Toleration {
    Toleration {
        key: Some(GPU_RESOURCE.to_string()),
        operator: Some("Exists".to_string()),
        effect: Some("NoSchedule".to_string()),
        ..Default::default()
    }
}

impl ApplicationModel {
    /// The pod's resources and tolerations with the GPU rules of `device: cuda` applied:
    /// an `nvidia.com/gpu` limit of `tensorParallel` (1 when unset) unless the user set that
    /// resource, and a toleration of the GPU taint unless the user gave tolerations.
    pub fn gpu_scheduling(&self) -> (ResourceRequirements, Vec<Toleration>) {
        let mut resources = self.pod.resources.clone();
        let mut tolerations = self.pod.tolerations.clone();
        if self.device != Device::Cuda {
            return (resources, tolerations);
        }
        let user_set = [&resources.limits, &resources.requests]
            .iter()
            .any(|m| m.as_ref().is_some_and(|m| m.contains_key(GPU_RESOURCE)));
        if !user_set {
            let count = self.reader.tensor_parallel.unwrap_or(1);
            resources
                .limits
                .get_or_insert_with(Default::default)
                .insert(GPU_RESOURCE.to_string(), Quantity(count.to_string()));
        }
        if tolerations.is_empty() {
            tolerations = vec![gpu_toleration()];
        }
        (resources, tolerations)
    }
}

/// Where the fields of one component were written: its own values and, for an
/// application, the template's. Lists are replaced whole, so one of them wrote every
/// element of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// `spec.gateway` or `spec.applications.<key>`.
    pub own: String,
    /// The camelCase fields the component sets itself.
    pub own_set: Vec<&'static str>,
    /// The camelCase fields `spec.applicationTemplate` sets (applications only).
    pub template_set: Vec<&'static str>,
}

impl Origin {
    /// The CR path of `field` (a camelCase field of the component): the component's own
    /// when it sets it, else the template's when that does, else the component's.
    pub fn path(&self, field: &str) -> String {
        if !self.own_set.contains(&field) && self.template_set.contains(&field) {
            format!("spec.applicationTemplate.{field}")
        } else {
            format!("{}.{field}", self.own)
        }
    }
}
