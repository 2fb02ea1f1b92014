//! The values vocabulary every version shares: the settings of images, Services, Ingresses,
//! the gateway's and readers' configuration, autoscaling and the model cache. A version's
//! spec is built from these; the operator's internal model reads them too. Changing one
//! changes every version that uses it: the CRD test (`bundles/crds`) holds `v1alpha1`'s
//! schema to what was released.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, SecretKeySelector, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// The model cache of an application: a PersistentVolumeClaim mounted at `/code/models`,
/// filled by a download Job of `readerConfig.modelName`. The application's Deployment is
/// held at zero replicas until the download of its current model succeeded. Merged key by
/// key over `applicationTemplate.modelCache`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelCache {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The claim's storage request, a quantity (`100Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "isQuantity(self)",
        "message": "must be a quantity, e.g. 40Gi (a number and a suffix: Ki, Mi, Gi, Ti or k, M, G, T)"
    }]))]
    pub size: Option<String>,
    /// Empty: the cluster's default StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// `ReadWriteOnce` by default; `ReadWriteMany` lets replicas on several nodes share it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_modes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downloader: Option<Downloader>,
}

/// The container that fills the cache. It gets `MODEL_NAME` (`readerConfig.modelName`),
/// `MODELS_DIR` (`/code/models`) and, with `tokenSecret`, `HF_TOKEN`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Downloader {
    /// A full image reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// More environment variables (the downloader's own win over the three above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// The Secret key holding a Hugging Face token, passed as `HF_TOKEN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret: Option<SecretKeySelector>,
    /// Retries of the download pod before the download is `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub backoff_limit: Option<i32>,
}

/// Scale to zero through the model gateway: after `idleSeconds` without a request for any
/// of the application's models, the gateway scales its Deployment to zero (the application
/// is `Sleeping`); the next request wakes it (back to `replicaCount`) and is held until a
/// replica serves. The gateway then owns the Deployment's `replicas`; the operator leaves
/// them out of what it applies. Open-engine (Ollama) applications only. Merged key by key
/// over `applicationTemplate.sleep`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sleep {
    /// Put the application to sleep when idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Seconds without a request (none in flight) before the application sleeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604800))]
    pub idle_seconds: Option<i32>,
    /// Seconds a request that woke the application (or arrived while it wakes) is held
    /// before it is answered 503 with the reason the application does not serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub hold_seconds: Option<i32>,
    /// Requests held at once while the application wakes; more are answered 503 at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub max_held_requests: Option<i32>,
}

/// The model gateway: one per ModelOrchestra whose applications are all open engines
/// (Ollama), in the gateway's place (`<fullname>-gateway`). It routes each request by its
/// `model` to the application serving it (OpenAI's API under `/v1`, Ollama's under `/api`)
/// and wakes sleeping applications.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelGateway {
    /// The image running the gateway (the operator's image: `model-orchestra-operator
    /// gateway`), a full reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// The gateway container's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
}

/// Verified promotion of an application: a new revision (a change of its pod: model, image,
/// reader configuration, …) first runs as a candidate that takes no production traffic, is
/// asked `prompt`, and replaces the serving revision only when its answer matches `expect`.
/// Merged key by key over `applicationTemplate.promotion`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Promotion {
    /// Verify new revisions before they serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The message the candidate is asked (as a user's chat message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub prompt: Option<String>,
    /// A regular expression the answer must match from its start, case-insensitively
    /// (`^\s*yes\b` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    #[schemars(extend("x-kubernetes-validations" = [{
        // Either side errs on a regular expression that does not compile: the apply is refused.
        "rule": "''.matches(self) || !''.matches(self)",
        "message": "must be a regular expression (RE2 syntax)"
    }]))]
    pub expect: Option<String>,
    /// The most tokens of an answer (sampling is deterministic: temperature 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<i32>,
    /// Seconds one request may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
    /// Seconds between two requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_seconds: Option<i32>,
    /// Matching answers in a row that promote the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_threshold: Option<i32>,
    /// Failed requests in a row (a wrong answer, an error, a timeout) that fail it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
    /// Seconds the whole verification may take, the candidate's start (and model download)
    /// included, before it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub deadline_seconds: Option<i32>,
}

/// An application's inference engine. Takeoff readers (registered with the gateway) unless
/// `distributedLlama` or `ollama` is set, on the application or its template; `takeoff: {}`
/// on an application keeps it a Takeoff application when the template chose another.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Engine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeoff: Option<TakeoffEngine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed_llama: Option<DistributedLlama>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ollama: Option<OllamaEngine>,
}

/// The most models one Ollama application lists.
pub const MAX_OLLAMA_MODELS: u32 = 32;

/// An Ollama model name as Ollama users write it, without a registry host: `model`,
/// `model:tag` or `namespace/model:tag` (the namespace defaults to `library`, the tag to
/// `latest`). Parts are letters, digits, `.`, `_` and `-`, at most 80 characters each.
pub const OLLAMA_MODEL_PATTERN: &str =
    "^([a-zA-Z0-9][a-zA-Z0-9._-]{0,79}/)?[a-zA-Z0-9][a-zA-Z0-9._-]{0,79}(:[a-zA-Z0-9_][a-zA-Z0-9._-]{0,79})?$";

/// Ollama (`ollama serve`, the official image by default): each replica serves the listed
/// models behind the application's own Service (Ollama's API, and its OpenAI-compatible
/// API under `/v1`). The operator pulls every listed model into every replica before the
/// replica takes traffic (a readiness gate), pulls a model added to the list and deletes
/// one removed from it without restarting pods, and reports each model in the status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OllamaEngine {
    /// The models the application serves (a list: an application's own replaces the
    /// template's whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_OLLAMA_MODELS))]
    // A list keyed by name: the API server refuses a model listed twice (a CEL rule
    // comparing every pair costs more than the budget of a map of applications allows).
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub models: Option<Vec<OllamaModel>>,
    /// Where the models are pulled from; Ollama's own registry (`registry.ollama.ai`)
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<OllamaRegistry>,
    /// The image running `ollama serve` (a full reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The port of Ollama's API: the container's and the Service's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    /// Seconds a pull may receive nothing before it is failed (with the bytes it got) and
    /// retried with backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub stall_seconds: Option<i32>,
}

/// One model of an Ollama application.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OllamaModel {
    /// As Ollama users write it: `smollm2:135m`, `qwen2:0.5b`, `library/gemma3:270m`.
    #[schemars(length(min = 1, max = 250), regex(pattern = OLLAMA_MODEL_PATTERN))]
    pub name: String,
}

/// A registry Ollama pulls models from (an OCI registry holding Ollama models, as
/// `ollama push` writes them).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OllamaRegistry {
    /// `host[:port]`, e.g. `registry.example.com` or `registry.kube-system.svc:5000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = "^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?$"))]
    pub host: Option<String>,
    /// Plain HTTP, and no check of a TLS certificate: for a private or loopback registry
    /// only. A warning says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
}

/// The Takeoff engine: readers behind the gateway, configured by `readerConfig`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeoffEngine {}

/// distributed-llama: one model served by a root (its OpenAI-compatible API server) and
/// `nodes - 1` workers, one per node, each holding a slice of the model. The model
/// (`readerConfig.modelName`, a distributed-llama model name such as `qwen3_0.6b_q40`) is
/// downloaded into the application's model cache; only the root reads it and sends each
/// worker its slice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DistributedLlama {
    /// Members of the group, the root included: a power of two from 1 to 64 (and at most
    /// the model's number of key-value heads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self in [1, 2, 4, 8, 16, 32, 64]",
        "message": "nodes is the root and its workers: a power of two from 1 to 64"
    }]))]
    pub nodes: Option<i32>,
    /// The image with `dllama` and `dllama-api` (a full reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Threads of each member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub nthreads: Option<i32>,
    /// The synchronisation type between members (`q80` for q40 models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_float_type: Option<BufferFloatType>,
    /// The longest sequence (sizes the key-value cache; 0: the model's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_seq_len: Option<i32>,
    /// The port of the workers and of the root's API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    /// The container that downloads the model in distributed-llama's format into the cache
    /// (its `MODEL_NAME` and `MODELS_DIR`, as for Takeoff applications).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downloader: Option<DllamaDownloader>,
}

/// How a distributed-llama model reaches the model cache.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DllamaDownloader {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

/// The float type members exchange activations in.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BufferFloatType {
    F32,
    F16,
    Q40,
    Q80,
}

impl BufferFloatType {
    pub fn as_str(self) -> &'static str {
        match self {
            BufferFloatType::F32 => "f32",
            BufferFloatType::F16 => "f16",
            BufferFloatType::Q40 => "q40",
            BufferFloatType::Q80 => "q80",
        }
    }
}
