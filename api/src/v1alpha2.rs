//! `models.titanml.co/v1alpha2`: the values contract of the upstream chart's users since
//! inference-stack 1.0 (readers reached only through the gateway, so no per-application
//! Service or Ingress; a `modelsVolume` for the engine's model directory), with the rules
//! `v1alpha1` could only check in the operator written into the schema as CEL, so the API
//! server refuses a bad CR at `kubectl apply` time.
//!
//! Beyond upstream, an application may keep its models in a cache: a PersistentVolumeClaim
//! filled by a download Job before the application serves (see [`ModelCache`]), with the
//! download's state in the status.
//!
//! Proven on a real API server by `tests/e2e/crd_versions.rs`: the schema is accepted with its
//! CEL cost, and bad CRs are refused naming their field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecurityContext, Toleration, Volume, VolumeMount,
};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::v1alpha1::Gateway;
pub use crate::values::{
    BufferFloatType, DistributedLlama, Downloader, Engine, Image, ModelCache, ModelGateway, OllamaEngine, OllamaModel,
    OllamaRegistry, Promotion, ReaderConfig, Scaling, ServiceAccountValues, Sleep, TakeoffEngine,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const VERSION: &str = "v1alpha2";

/// The most applications one ModelOrchestra holds. It bounds the cost the API server
/// estimates for the CEL rules over application names (a map without a bound is costed at
/// the largest request, and its rules refused).
pub const MAX_APPLICATIONS: u32 = 256;

/// Generated names (`<fullname>-<application>`, `<fullname>-gateway`) are DNS labels.
/// `fullname` is Helm's: `spec.fullnameOverride`, else the name when it contains the chart
/// name (`spec.nameOverride` or `model-orchestra`), else `<name>-<chart name>`. Helm also
/// trims a trailing `-`, which this length does not (a regular expression to do it is over
/// the API server's CEL cost budget): with a `fullnameOverride` ending in `-` the rules are
/// one character stricter than the operator.
const FULLNAME: &str = "(has(self.spec.fullnameOverride) && self.spec.fullnameOverride != '' ? self.spec.fullnameOverride : \
     (self.metadata.name.contains(has(self.spec.nameOverride) && self.spec.nameOverride != '' ? self.spec.nameOverride : 'model-orchestra') ? self.metadata.name : \
     self.metadata.name + '-' + (has(self.spec.nameOverride) && self.spec.nameOverride != '' ? self.spec.nameOverride : 'model-orchestra')))";

/// Desired state of a ModelOrchestra (`v1alpha2`): the values of the chart's 1.0 contract.
// Each `printcolumn(...)` repeats `type_`: clippy reads the repeats as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "models.titanml.co",
    version = "v1alpha2",
    kind = "ModelOrchestra",
    namespaced,
    status = "ModelOrchestraStatus",
    shortname = "mo",
    category = "titanml",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Applications", type_ = "string", json_path = ".status.applicationsReady"),
    printcolumn(name = "Models", type_ = "string", json_path = ".status.modelsReady", description = "Ollama models present in every replica that serves, of those listed"),
    printcolumn(name = "Asleep", type_ = "string", json_path = ".status.asleep", description = "Applications scaled to zero by the model gateway (and those waking)"),
    printcolumn(name = "Line", type_ = "string", json_path = ".status.line", description = "The operator line serving the CR"),
    printcolumn(name = "Served-As", type_ = "string", json_path = ".status.servedAs", description = "The API version (contract) the CR is served as"),
    printcolumn(name = "Generation", type_ = "integer", json_path = ".metadata.generation", description = "The spec's generation"),
    printcolumn(name = "Observed", type_ = "integer", json_path = ".status.observedGeneration", description = "The generation the serving line last reconciled: below Generation, the latest change is not reconciled yet"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = kube::core::Rule::new(format!("size({FULLNAME}) <= 55"))
        .message("the generated gateway name `<fullname>-gateway` would exceed 63 characters: use a shorter metadata.name or set spec.fullnameOverride"),
    validation = kube::core::Rule::new(format!("!has(self.spec.applications) || self.spec.applications.all(app, size({FULLNAME}) + 1 + size(app) <= 63)"))
        .message("a generated name `<fullname>-<application>` would exceed 63 characters: use shorter application names, a shorter metadata.name, or set spec.fullnameOverride")
        .field_path(".spec.applications")
)]
#[serde(rename_all = "camelCase")]
pub struct ModelOrchestraSpec {
    /// Pull secrets copied into every pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// Replaces the chart name in generated names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub name_override: Option<String>,
    /// Replaces the whole generated name prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub fullname_override: Option<String>,
    /// The ServiceAccount shared by the gateway and every application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountValues>,
    /// The single gateway (router) in front of all readers; the only way to reach them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Gateway>,
    /// The model gateway, in the gateway's place when every application is an open engine
    /// (Ollama): routes requests by model and wakes sleeping applications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_gateway: Option<ModelGateway>,
    /// Base values that every application inherits (the application's own values win).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_template: Option<Application>,
    /// One inference application per key: a DNS label of at most 51 characters, not `gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = MAX_APPLICATIONS))]
    #[x_kube(
        validation = kube::core::Rule::new("self.all(app, app.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))")
            .message("application names must be DNS labels: lower-case letters, digits and `-`, starting and ending with a letter or digit"),
        validation = kube::core::Rule::new("self.all(app, size(app) <= 51)")
            .message("application names have at most 51 characters (the component label `application-<name>` must fit 63)"),
        validation = kube::core::Rule::new("!('gateway' in self)")
            .message("`gateway` is reserved: the gateway's objects are named `<fullname>-gateway`; choose another application name")
    )]
    pub applications: Option<BTreeMap<String, Application>>,
}

component! {
    /// One inference application (a reader deployment), or the template all of them inherit.
    /// It has no Service or Ingress of its own: readers are reached through the gateway.
    pub struct Application {
        /// Reader configuration, camelCase keys (written snake_case into `config.yaml`).
        pub reader_config: ReaderConfig,
        /// KEDA autoscaling driven by the gateway's queue length for the consumer group.
        pub scaling: Scaling,
        /// The volume mounted at `/code/models`, where the engine keeps models. An
        /// application's own replaces the template's whole (no merge); the default is a
        /// memory-backed emptyDir named `models`.
        pub models_volume: Volume,
        /// A PersistentVolumeClaim for the models, filled by a download Job before the
        /// application serves; when enabled it is the models volume.
        pub model_cache: ModelCache,
        /// How the Deployment replaces its pods (Kubernetes' default when absent: a rolling
        /// update of 25% surge, which needs room — a spare GPU — for one more pod). `Recreate`,
        /// or `rollingUpdate: {maxSurge: 0, maxUnavailable: 1}`, needs none but stops serving.
        pub strategy: k8s_openapi::api::apps::v1::DeploymentStrategy,
        /// Seconds a rollout may make no progress before it is `RolloutStuck` (`Degraded`);
        /// Kubernetes' default is 600.
        #[schemars(range(min = 1))]
        pub progress_deadline_seconds: i32,
        /// Verified promotion: a new revision takes traffic only after it answers a success
        /// prompt; until then the previous one keeps serving, untouched.
        pub promotion: Promotion,
        /// The inference engine: Takeoff readers behind the gateway (the default), or a
        /// distributed-llama group spread over several nodes.
        pub engine: Engine,
        /// Scale to zero when idle, woken by the next request through the model gateway.
        pub sleep: Sleep,
    }
}

/// Observed state of a ModelOrchestra (`v1alpha2`): `v1alpha1`'s, and each cached
/// application's model.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelOrchestraStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing` and `Degraded`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `<ready>/<total>` applications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications_ready: Option<String>,
    /// `<ready>/<listed>` models of the Ollama applications (absent without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_ready: Option<String>,
    /// Readiness per application (the gateway is not one).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub applications: BTreeMap<String, ApplicationStatus>,
    /// The applications asleep (scaled to zero), and those waking (`chat (waking)`),
    /// comma-separated; absent when none is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asleep: Option<String>,
    /// In-cluster address of the gateway service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_address: Option<String>,
    /// Hash of the objects last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_hash: Option<String>,
    /// Version of the operator that wrote this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The last `models.titanml.co/refresh` request carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_refresh: Option<ModelRefresh>,
    /// The API version the CR is served as (its contract): the version it was created with,
    /// unless its `operatorVersion` label or `models.titanml.co/api-version` annotation chose
    /// another. Writes at another version do not change it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_as: Option<String>,
    /// The routing value of the operator line serving the CR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// One application's readiness, and its model when cached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    pub ready_replicas: i32,
    pub desired_replicas: i32,
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelStatus>,
    /// Where the verification of the application's newest revision stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<PromotionStatus>,
    /// A distributed-llama group: its members and where they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupStatus>,
    /// Where clients reach the application directly (a distributed-llama group's API, an
    /// Ollama application's Service; Takeoff readers are reached through the gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// An Ollama application's models, in the order listed: where each stands in the
    /// replicas that serve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<PulledModelStatus>,
    /// A sleep-enabled application: `Awake`, `Sleeping` (scaled to zero; it counts as ready:
    /// the next request wakes it) or `Waking`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<SleepPhase>,
    /// When `sleep` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep_since: Option<Time>,
    /// Why the application does not serve, while it does not (the pods' problem, the
    /// rollout's or the models' progress): what the model gateway answers a held request.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Where a sleep-enabled application stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SleepPhase {
    /// Replicas run (the gateway scales it to zero after `sleep.idleSeconds` idle).
    #[default]
    Awake,
    /// Scaled to zero by the model gateway; the next request wakes it.
    Sleeping,
    /// Scaled up by a request; no replica serves yet.
    Waking,
}

impl SleepPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            SleepPhase::Awake => "Awake",
            SleepPhase::Sleeping => "Sleeping",
            SleepPhase::Waking => "Waking",
        }
    }
}

/// One model of an Ollama application, over the replicas that serve it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PulledModelStatus {
    /// As listed (`smollm2:135m`).
    pub name: String,
    /// `Ready` once every replica holds it; `Failed` when a replica's pull failed (it is
    /// retried with backoff, unless the model does not exist).
    pub phase: PullPhase,
    /// Bytes received so far, over the replicas pulling it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_bytes: Option<i64>,
    /// Bytes to receive, over the replicas pulling it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<i64>,
    /// The model's manifest digest in the replicas that hold it (`sha256:…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// When a replica last finished pulling it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pull_time: Option<Time>,
    /// `<holding>/<replicas>`: the replicas that hold it, of those that serve.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replicas: String,
    /// Why it is not Ready (a pull's error, the bytes a stalled pull got, a registry that
    /// does not answer).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PullPhase {
    /// No replica pulls it yet (none runs, or it waits its turn).
    #[default]
    Pending,
    Pulling,
    Ready,
    Failed,
}

impl PullPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPhase::Pending => "Pending",
            PullPhase::Pulling => "Pulling",
            PullPhase::Ready => "Ready",
            PullPhase::Failed => "Failed",
        }
    }
}

/// A distributed-llama group: a root and its workers, one per node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    /// Members: the root and the workers.
    pub nodes: i32,
    /// Members ready.
    pub ready: i32,
    pub root: MemberStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<MemberStatus>,
    /// What the group waits for, when it does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// One member of a group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// 0 for the root, 1… for the workers (LeaderWorkerSet's `LWS_WORKER_INDEX`).
    pub index: i32,
    pub ready: bool,
    /// The node it runs on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
}

/// A verified promotion: the revision it is about and how it went.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionStatus {
    pub phase: PromotionPhase,
    /// The revision (a hash of its pod template) verified, or being verified.
    pub revision: String,
    /// The candidate's last answer to the prompt (truncated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// The `models.titanml.co/retry-promotion` value this verification ran for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PromotionPhase {
    /// A candidate of the revision is being started or asked the prompt; the previous
    /// revision serves.
    #[default]
    Verifying,
    /// The revision answered as expected and serves.
    Promoted,
    /// The revision failed its verification; the previous one keeps serving.
    Failed,
}

impl PromotionPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            PromotionPhase::Verifying => "Verifying",
            PromotionPhase::Promoted => "Promoted",
            PromotionPhase::Failed => "Failed",
        }
    }
}

/// Where an application's model download stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    pub phase: ModelPhase,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// The download Job of the model in the cache (or being put there).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job: String,
    /// The `models.titanml.co/refresh` value this model was last downloaded for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<String>,
    /// The download the application's pods run on: the current one once it is Ready; while
    /// a refresh (same model) downloads, the one before. Absent while the application waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ModelServing>,
}

/// A download the application's pods run on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelServing {
    /// The `models.titanml.co/model-revision` of the download.
    pub revision: String,
    /// `readerConfig.modelName` it downloaded.
    pub model_name: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ModelPhase {
    /// The download has not started (its Job or pod is being created, scheduled or pulled).
    #[default]
    Pending,
    Downloading,
    Ready,
    Failed,
}

impl ModelPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelPhase::Pending => "Pending",
            ModelPhase::Downloading => "Downloading",
            ModelPhase::Ready => "Ready",
            ModelPhase::Failed => "Failed",
        }
    }
}

/// A refresh the operator carried out: the annotation's value and when every model it
/// named was downloaded again.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelRefresh {
    pub value: String,
    pub completed_at: Time,
}
