//! The kinds the chart may render: their API coordinates, Helm's install order, and a
//! strict schema check of a rendered object against the kind's typed definition
//! (k8s-openapi for built-in kinds, the structs below for KEDA and Prometheus Operator).
//!
//! This list is the single source for everything that depends on "what the chart can
//! render": the renderer's allow-list, the operator's watches and prune scope, and the
//! RBAC rules of the operator's ClusterRole.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A kind the chart can render.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    // Declared in Helm's install order (`releaseutil.InstallOrder`); kinds Helm does not
    // know (the two CRD kinds) come last, as Helm sorts them.
    PodDisruptionBudget,
    ServiceAccount,
    ConfigMap,
    PersistentVolumeClaim,
    Role,
    RoleBinding,
    Service,
    Deployment,
    StatefulSet,
    Job,
    Ingress,
    ScaledObject,
    ServiceMonitor,
}

impl Kind {
    pub const ALL: [Kind; 13] = [
        Kind::PodDisruptionBudget,
        Kind::ServiceAccount,
        Kind::ConfigMap,
        Kind::PersistentVolumeClaim,
        Kind::Role,
        Kind::RoleBinding,
        Kind::Service,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::Job,
        Kind::Ingress,
        Kind::ScaledObject,
        Kind::ServiceMonitor,
    ];

    pub fn from_kind(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.kind() == kind)
    }

    pub fn kind(self) -> &'static str {
        match self {
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::ServiceAccount => "ServiceAccount",
            Kind::ConfigMap => "ConfigMap",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::Role => "Role",
            Kind::RoleBinding => "RoleBinding",
            Kind::Service => "Service",
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
            Kind::Ingress => "Ingress",
            Kind::ScaledObject => "ScaledObject",
            Kind::ServiceMonitor => "ServiceMonitor",
        }
    }

    /// API group ("" for core).
    pub fn group(self) -> &'static str {
        match self {
            Kind::ServiceAccount | Kind::ConfigMap | Kind::PersistentVolumeClaim | Kind::Service => "",
            Kind::Role | Kind::RoleBinding => "rbac.authorization.k8s.io",
            Kind::Deployment | Kind::StatefulSet => "apps",
            Kind::Job => "batch",
            Kind::PodDisruptionBudget => "policy",
            Kind::Ingress => "networking.k8s.io",
            Kind::ScaledObject => "keda.sh",
            Kind::ServiceMonitor => "monitoring.coreos.com",
        }
    }

    pub fn version(self) -> &'static str {
        match self {
            Kind::ScaledObject => "v1alpha1",
            _ => "v1",
        }
    }

    pub fn api_version(self) -> String {
        match self.group() {
            "" => self.version().to_string(),
            g => format!("{g}/{}", self.version()),
        }
    }

    /// Lower-case plural resource name, as used in URLs and RBAC rules.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::PodDisruptionBudget => "poddisruptionbudgets",
            Kind::ServiceAccount => "serviceaccounts",
            Kind::ConfigMap => "configmaps",
            Kind::PersistentVolumeClaim => "persistentvolumeclaims",
            Kind::Role => "roles",
            Kind::RoleBinding => "rolebindings",
            Kind::Service => "services",
            Kind::Deployment => "deployments",
            Kind::StatefulSet => "statefulsets",
            Kind::Job => "jobs",
            Kind::Ingress => "ingresses",
            Kind::ScaledObject => "scaledobjects",
            Kind::ServiceMonitor => "servicemonitors",
        }
    }

    /// The kind's resource, for dynamic API clients.
    pub fn resource(self) -> kube::core::ApiResource {
        kube::core::ApiResource {
            group: self.group().into(),
            version: self.version().into(),
            api_version: self.api_version(),
            kind: self.kind().into(),
            plural: self.plural().into(),
        }
    }

    /// Whether the kind is defined by a CRD another project installs (KEDA, Prometheus
    /// Operator), so it may be absent from a cluster.
    pub fn is_optional(self) -> bool {
        matches!(self, Kind::ScaledObject | Kind::ServiceMonitor)
    }

    /// Checks `obj` against the kind's schema: every field known, every value of the right
    /// type. Returns a message naming the offending field.
    pub fn check(self, obj: &Value) -> Result<(), String> {
        use k8s_openapi::api::{
            apps::v1 as apps, batch::v1 as batch, core::v1 as core, networking::v1 as net, policy::v1 as policy,
            rbac::v1 as rbac,
        };
        match self {
            Kind::PodDisruptionBudget => strict::<policy::PodDisruptionBudget>(obj),
            Kind::ServiceAccount => strict::<core::ServiceAccount>(obj),
            Kind::ConfigMap => strict::<core::ConfigMap>(obj),
            Kind::PersistentVolumeClaim => strict::<core::PersistentVolumeClaim>(obj),
            Kind::Role => strict::<rbac::Role>(obj),
            Kind::RoleBinding => strict::<rbac::RoleBinding>(obj),
            Kind::Service => strict::<core::Service>(obj),
            Kind::Deployment => strict::<apps::Deployment>(obj),
            Kind::StatefulSet => strict::<apps::StatefulSet>(obj),
            Kind::Job => strict::<batch::Job>(obj),
            Kind::Ingress => strict::<net::Ingress>(obj),
            Kind::ScaledObject => strict::<keda::ScaledObject>(obj),
            Kind::ServiceMonitor => strict::<prometheus::ServiceMonitor>(obj),
        }
    }
}

/// Deserialises `obj` as `T`, failing on the first unknown field as well as on type errors.
fn strict<T: DeserializeOwned>(obj: &Value) -> Result<(), String> {
    crate::parse::strict::<T>(obj).map(drop).map_err(|e| e.to_string())
}

/// KEDA `keda.sh/v1alpha1` ScaledObject: the fields this chart renders or copies in.
pub mod keda {
    use std::collections::BTreeMap;

    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct ScaledObject {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: ScaledObjectSpec,
    }

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct ScaledObjectSpec {
        pub scale_target_ref: ScaleTargetRef,
        pub polling_interval: Option<i32>,
        pub initial_cooldown_period: Option<i32>,
        pub cooldown_period: Option<i32>,
        pub idle_replica_count: Option<i32>,
        pub min_replica_count: Option<i32>,
        pub max_replica_count: Option<i32>,
        pub fallback: Option<Fallback>,
        pub advanced: Option<Advanced>,
        pub triggers: Vec<Trigger>,
    }

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct ScaleTargetRef {
        pub name: String,
        pub api_version: Option<String>,
        pub kind: Option<String>,
    }

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Trigger {
        #[serde(rename = "type")]
        pub type_: String,
        pub name: Option<String>,
        pub metadata: BTreeMap<String, String>,
    }

    /// Replicas to fall back to when the scaler fails.
    #[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Fallback {
        #[schemars(range(min = 0))]
        pub failure_threshold: i32,
        #[schemars(range(min = 0))]
        pub replicas: i32,
        /// `static`, `currentReplicas`, `currentReplicasIfHigher` or `currentReplicasIfLower`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub behavior: Option<FallbackBehavior>,
    }

    #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub enum FallbackBehavior {
        Static,
        CurrentReplicas,
        CurrentReplicasIfHigher,
        CurrentReplicasIfLower,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Advanced {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub restore_to_original_replica_count: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub horizontal_pod_autoscaler_config: Option<HpaConfig>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub scaling_modifiers: Option<ScalingModifiers>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct HpaConfig {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub behavior: Option<HorizontalPodAutoscalerBehavior>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct ScalingModifiers {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub formula: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub activation_target: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub metric_type: Option<String>,
    }
}

/// Prometheus Operator `monitoring.coreos.com/v1` ServiceMonitor: the fields this chart renders.
pub mod prometheus {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct ServiceMonitor {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: ServiceMonitorSpec,
    }

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct ServiceMonitorSpec {
        pub selector: LabelSelector,
        pub endpoints: Vec<Endpoint>,
        pub namespace_selector: Option<NamespaceSelector>,
    }

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Endpoint {
        pub port: String,
        pub path: Option<String>,
        pub interval: Option<String>,
    }

    #[derive(Serialize, Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct NamespaceSelector {
        pub match_names: Option<Vec<String>>,
        pub any: Option<bool>,
    }
}
