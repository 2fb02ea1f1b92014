//! The fields every version's components (gateway, application) share, declared once.

/// Declares a component struct (gateway or application) with the fields every version's
/// components share, plus its own; `with_service_and_ingress;` adds the per-component
/// Service and Ingress `v1alpha1` has. A macro rather than `#[serde(flatten)]`, because
/// flatten would hide unknown fields from the strict parser and blur the CRD schema.
macro_rules! component {
    (with_service_and_ingress; $($rest:tt)*) => {
        component! { @fields [
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub service: Option<$crate::v1alpha1::ServiceValues>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub ingress: Option<$crate::v1alpha1::IngressValues>,
        ] $($rest)* }
    };
    (@fields [$($network:tt)*] $(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub image: Option<Image>,
            /// Environment variables of the container (`value` or `valueFrom`, kept as given).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub env: Option<Vec<EnvVar>>,
            /// Replicas of the Deployment; ignored when an autoscaler owns it.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(range(min = 0))]
            pub replica_count: Option<i32>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub pod_annotations: Option<BTreeMap<String, String>>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub pod_labels: Option<BTreeMap<String, String>>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub pod_security_context: Option<PodSecurityContext>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub security_context: Option<SecurityContext>,
            /// Container ports (defaults: inference 3000, management 3001, openai 3003, internal 3005).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub ports: Option<Vec<ContainerPort>>,
            $($network)*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub resources: Option<ResourceRequirements>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub liveness_probe: Option<Probe>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub readiness_probe: Option<Probe>,
            /// Extra volumes, after the chart's `config` and `dshm`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub volumes: Option<Vec<Volume>>,
            /// Extra volume mounts, after the chart's `config` and `dshm`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub volume_mounts: Option<Vec<VolumeMount>>,
            /// Passed to the pod spec unchanged (e.g. `nvidia.com/gpu.product`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub node_selector: Option<BTreeMap<String, String>>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub tolerations: Option<Vec<Toleration>>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub affinity: Option<Affinity>,
            $($(#[$fmeta])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $field: Option<$ty>,)*
        }
    };
    ($($rest:tt)*) => {
        component! { @fields [] $($rest)* }
    };
}
