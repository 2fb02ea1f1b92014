//! `models.titanml.co/v1alpha1`, released with 0.1.0 and frozen: its schema in the CRD
//! stays byte-identical to the released CRD (`bundles/crds/0.1.0.yaml`, checked by
//! `tests/offline/generated_files.rs`). Add fields and rules in a new version, never here.
//!
//! The `ModelOrchestra` custom resource: its `spec` is exactly the chart's values contract
//! (`charts/model-orchestra/values.yaml`), typed, so that the CRD schema, the chart's
//! `values.schema.json` and the renderer all come from this one definition.
//!
//! Every field is optional: what the user leaves out comes from `values.yaml`, merged in
//! by the renderer. Unknown fields are rejected (see [`crate::parse`]), except inside
//! `readerConfig` and `gateway.config`, which keep unknown keys because the reader gains
//! options over time.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::values::{
    Device, GatewayConfig, Image, IngressHost, IngressPath, IngressTls, IngressValues, MetricName, MetricTarget,
    PathType, PullPolicy, ReaderConfig, Scaling, ScalingSpec, ServiceAccountValues, ServiceType, ServiceValues,
};

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
