//! Values as written: every field optional, the union of what the served versions have. A
//! version module turns its spec (and its chart's `values.yaml`) into these; nothing here
//! knows which version a value came from.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecurityContext, Toleration, Volume, VolumeMount,
};
use model_orchestra_api::values::{
    Engine, GatewayConfig, Image, IngressValues, ModelCache, ModelGateway, Promotion, ReaderConfig, Scaling,
    ServiceAccountValues, ServiceValues, Sleep,
};

use serde::{Deserialize, Serialize};

use super::merge::Merge;

/// Declares a values struct of optional fields, its Helm merge (field by field) and which
/// fields a value sets (by their camelCase names, for error paths).
macro_rules! values {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty => $key:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            $($(#[$fmeta])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $field: Option<$ty>,)*
        }

        impl Merge for $name {
            fn merge_from(&mut self, overlay: Self) {
                $(Merge::merge_from(&mut self.$field, overlay.$field);)*
            }
        }

        impl $name {
            /// The camelCase names of the fields this value sets.
            pub fn set_fields(&self) -> Vec<&'static str> {
                let mut set = Vec::new();
                $(if self.$field.is_some() {
                    set.push($key);
                })*
                set
            }
        }
    };
}

values! {
    /// The whole values of a ModelOrchestra.
    pub struct Values {
        image_pull_secrets: Vec<LocalObjectReference> => "imagePullSecrets",
        name_override: String => "nameOverride",
        fullname_override: String => "fullnameOverride",
        service_account: ServiceAccountValues => "serviceAccount",
        gateway: GatewayValues => "gateway",
        /// Only where the contract has a model gateway.
        model_gateway: ModelGateway => "modelGateway",
        /// Merged under each application.
        application_template: ApplicationValues => "applicationTemplate",
        applications: BTreeMap<String, ApplicationValues> => "applications",
    }
}

values! {
    /// The gateway (router) in front of every reader.
    pub struct GatewayValues {
        image: Image => "image",
        env: Vec<EnvVar> => "env",
        replica_count: i32 => "replicaCount",
        pod_annotations: BTreeMap<String, String> => "podAnnotations",
        pod_labels: BTreeMap<String, String> => "podLabels",
        pod_security_context: PodSecurityContext => "podSecurityContext",
        security_context: SecurityContext => "securityContext",
        ports: Vec<ContainerPort> => "ports",
        service: ServiceValues => "service",
        ingress: IngressValues => "ingress",
        resources: ResourceRequirements => "resources",
        liveness_probe: Probe => "livenessProbe",
        readiness_probe: Probe => "readinessProbe",
        volumes: Vec<Volume> => "volumes",
        volume_mounts: Vec<VolumeMount> => "volumeMounts",
        node_selector: BTreeMap<String, String> => "nodeSelector",
        tolerations: Vec<Toleration> => "tolerations",
        affinity: Affinity => "affinity",
        config: GatewayConfig => "config",
        export_prometheus_metrics: bool => "exportPrometheusMetrics",
    }
}

values! {
    /// One inference application, or the template every application inherits.
    pub struct ApplicationValues {
        image: Image => "image",
        env: Vec<EnvVar> => "env",
        replica_count: i32 => "replicaCount",
        pod_annotations: BTreeMap<String, String> => "podAnnotations",
        pod_labels: BTreeMap<String, String> => "podLabels",
        pod_security_context: PodSecurityContext => "podSecurityContext",
        security_context: SecurityContext => "securityContext",
        ports: Vec<ContainerPort> => "ports",
        /// Only where the contract gives applications a Service of their own.
        service: ServiceValues => "service",
        /// Only where the contract gives applications an Ingress of their own.
        ingress: IngressValues => "ingress",
        resources: ResourceRequirements => "resources",
        liveness_probe: Probe => "livenessProbe",
        readiness_probe: Probe => "readinessProbe",
        volumes: Vec<Volume> => "volumes",
        volume_mounts: Vec<VolumeMount> => "volumeMounts",
        node_selector: BTreeMap<String, String> => "nodeSelector",
        tolerations: Vec<Toleration> => "tolerations",
        affinity: Affinity => "affinity",
        reader_config: ReaderConfig => "readerConfig",
        scaling: Scaling => "scaling",
        /// Mounted at `/code/models`; replaced whole, never merged.
        models_volume: Volume => "modelsVolume",
        model_cache: ModelCache => "modelCache",
        strategy: DeploymentStrategy => "strategy",
        progress_deadline_seconds: i32 => "progressDeadlineSeconds",
        promotion: Promotion => "promotion",
        engine: Engine => "engine",
        /// Only where the contract has a model gateway.
        sleep: Sleep => "sleep",
    }
}
