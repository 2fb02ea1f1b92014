//! `models.titanml.co/v1alpha1`, released with 0.1.0 and frozen: its schema in the CRD
//! stays byte-identical to the released CRD (`bundles/crds/0.1.0.yaml`, checked by
//! `tests/generated_files.rs`). Add fields and rules in a new version, never here.
//!
//! The `ModelOrchestra` custom resource: its `spec` is exactly the chart's values contract
//! (`charts/model-orchestra/values.yaml`), typed, so that the CRD schema, the chart's
//! `values.schema.json` and the renderer all come from this one definition.
//!
//! Every field is optional: what the user leaves out comes from `values.yaml`, merged in
//! by the renderer. Unknown fields are rejected (see [`crate::validate`]), except inside
//! `readerConfig` and `gateway.config`, which keep unknown keys because the reader gains
//! options over time.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecurityContext, ServicePort, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const VERSION: &str = "v1alpha1";

/// Desired state of a ModelOrchestra: the values of the vendored model-orchestra chart.
// Each `printcolumn(...)` repeats `type_`: clippy reads the repeats as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "models.titanml.co",
    version = "v1alpha1",
    kind = "ModelOrchestra",
    namespaced,
    status = "ModelOrchestraStatus",
    shortname = "mo",
    category = "titanml",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Applications", type_ = "string", json_path = ".status.applicationsReady"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ModelOrchestraSpec {
    /// Pull secrets copied into every pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// Replaces the chart name in generated names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_override: Option<String>,
    /// Replaces the whole generated name prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fullname_override: Option<String>,
    /// The ServiceAccount shared by the gateway and every application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountValues>,
    /// The single gateway (router) in front of all readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Gateway>,
    /// Base values that every application inherits (the application's own values win).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_template: Option<Application>,
    /// One inference application per key; the key must be a DNS label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications: Option<BTreeMap<String, Application>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountValues {
    /// Create the ServiceAccount (otherwise an existing one, `name` or `default`, is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<bool>,
    /// Mount the API token into pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Name of the ServiceAccount; defaults to the generated full name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<PullPolicy>,
    /// Empty means the chart's appVersion plus `-cpu` (gateway) or `-gpu` (applications).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceValues {
    /// `ClusterIP`, `NodePort`, `LoadBalancer` or `ExternalName`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ServiceType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ServicePort>>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    LoadBalancer,
    ExternalName,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressValues {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<IngressHost>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Vec<IngressTls>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressHost {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<IngressPath>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressPath {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `Exact`, `Prefix` or `ImplementationSpecific` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_type: Option<PathType>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PathType {
    Exact,
    Prefix,
    ImplementationSpecific,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressTls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
}

component! {
    with_service_and_ingress;
    /// The gateway (router) that fronts every reader.
    pub struct Gateway {
        /// Gateway server configuration, camelCase keys (written snake_case into `config.yaml`).
        pub config: GatewayConfig,
        /// Render a `monitoring.coreos.com/v1` ServiceMonitor for the management port's `/metrics`.
        pub export_prometheus_metrics: bool,
    }
}

component! {
    with_service_and_ingress;
    /// One inference application (a reader deployment), or the template all of them inherit.
    pub struct Application {
        /// Reader configuration, camelCase keys (written snake_case into `config.yaml`).
        pub reader_config: ReaderConfig,
        /// KEDA autoscaling driven by the gateway's queue length.
        pub scaling: Scaling,
    }
}

/// Gateway server configuration. `internalPort` is known; any other key is kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GatewayConfig {
    /// Port the readers use to reach the gateway (default 3005).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub internal_port: Option<i32>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// Where the model runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Cpu,
    Cuda,
}

/// Reader configuration: the known keys are typed, any other key is kept as given.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ReaderConfig {
    /// Model to serve, e.g. `unsloth/Llama-3.2-1B-Instruct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// `cpu` or `cuda`. `cuda` adds a GPU limit and toleration unless you set your own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<Device>,
    /// Consumer group the reader joins at the gateway (default `primary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_requests: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_batch_size: Option<i64>,
    /// GPUs one reader spans; also the default `nvidia.com/gpu` count for `cuda`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tensor_parallel: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quant_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_sequence_length: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_cuda_graph: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub cuda_graph_cache_capacity: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_size: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub prefill_chunk_size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub quantize_cache_bits: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssd_cache_size: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained_decoding_backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub lmfe_max_consecutive_whitespaces: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_log_as_json: Option<bool>,
    /// LoRA adapters to load (string as the reader accepts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loras: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_document_processing: Option<bool>,
    /// Options this operator does not know yet; passed to the reader snake_cased.
    #[serde(flatten)]
    #[schemars(skip)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scaling {
    /// Render a KEDA ScaledObject; the Deployment then leaves `replicas` to the autoscaler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_target: Option<MetricTarget>,
    /// Annotations of the ScaledObject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Copied into the ScaledObject's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ScalingSpec>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricTarget {
    /// Metric name; only `consumerGroupSize` exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<MetricName>,
    /// Target queue length per replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub value: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MetricName {
    ConsumerGroupSize,
}

/// The subset of KEDA's ScaledObject spec a user sets.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScalingSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub polling_interval: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub initial_cooldown_period: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub cooldown_period: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub idle_replica_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replica_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_replica_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<crate::kinds::keda::Fallback>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced: Option<crate::kinds::keda::Advanced>,
}

/// Observed state, written by the operator through the status subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelOrchestraStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Ready applications out of all, e.g. `1/2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications_ready: Option<String>,
    /// Per-application readiness, keyed by application name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub applications: BTreeMap<String, ApplicationStatus>,
    /// In-cluster address of the gateway service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_address: Option<String>,
    /// Version of the operator that last reconciled this resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// Hash of the objects last applied successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_hash: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    pub ready_replicas: i32,
    pub desired_replicas: i32,
    pub ready: bool,
}
