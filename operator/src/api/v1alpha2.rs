//! `models.titanml.co/v1alpha2`: the values contract of the upstream chart's users since
//! inference-stack 1.0 (readers reached only through the gateway, so no per-application
//! Service or Ingress; a `modelsVolume` for the engine's model directory), with the rules
//! `v1alpha1` could only check in the operator written into the schema as CEL, so the API
//! server refuses a bad CR at `kubectl apply` time.
//!
//! Not served yet: the CRD the operator ships serves `v1alpha1` only until `v1alpha2`
//! renders (issue 13). What is here is proven on a real API server by
//! `tests/crd_versions.rs`: the schema is accepted with its CEL cost, and bad CRs are
//! refused naming their field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements, SecurityContext, Toleration, Volume, VolumeMount,
};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::v1alpha1::{Gateway, Image, ModelOrchestraStatus, ReaderConfig, Scaling, ServiceAccountValues};

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
    }
}

/// What `v1alpha2` adds to the values the renderer resolves: each application's models
/// volume, chosen the chart's way (its own, else the template's; never merged).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelsVolumes {
    /// `applicationTemplate.modelsVolume` as merged over the chart's default.
    pub template: Option<Volume>,
    /// Each application's own `modelsVolume`.
    pub own: BTreeMap<String, Volume>,
}

impl ModelsVolumes {
    /// The volume mounted at `/code/models` for `application`.
    pub fn of(&self, application: &str) -> Option<&Volume> {
        self.own.get(application).or(self.template.as_ref())
    }
}

impl ModelOrchestraSpec {
    /// The spec in the renderer's terms: the `v1alpha1` values (applications with no Service
    /// or Ingress of their own, see [`Application::into_values`]) and the models volumes.
    pub fn into_values(self) -> (super::v1alpha1::ModelOrchestraSpec, ModelsVolumes) {
        let mut models = ModelsVolumes::default();
        let template = self.application_template.map(|t| {
            let (values, volume) = t.into_values();
            models.template = volume;
            values
        });
        let applications = self.applications.map(|apps| {
            apps.into_iter()
                .map(|(name, app)| {
                    let (values, volume) = app.into_values();
                    if let Some(volume) = volume {
                        models.own.insert(name.clone(), volume);
                    }
                    (name, values)
                })
                .collect()
        });
        let spec = super::v1alpha1::ModelOrchestraSpec {
            image_pull_secrets: self.image_pull_secrets,
            name_override: self.name_override,
            fullname_override: self.fullname_override,
            service_account: self.service_account,
            gateway: self.gateway,
            application_template: template,
            applications,
        };
        (spec, models)
    }
}

impl Application {
    /// The application as `v1alpha1` values, and its models volume. It has no Service or
    /// Ingress: the chart renders none for applications, so none is carried.
    pub fn into_values(self) -> (super::v1alpha1::Application, Option<Volume>) {
        let values = super::v1alpha1::Application {
            image: self.image,
            env: self.env,
            replica_count: self.replica_count,
            pod_annotations: self.pod_annotations,
            pod_labels: self.pod_labels,
            pod_security_context: self.pod_security_context,
            security_context: self.security_context,
            ports: self.ports,
            service: None,
            ingress: None,
            resources: self.resources,
            liveness_probe: self.liveness_probe,
            readiness_probe: self.readiness_probe,
            volumes: self.volumes,
            volume_mounts: self.volume_mounts,
            node_selector: self.node_selector,
            tolerations: self.tolerations,
            affinity: self.affinity,
            reader_config: self.reader_config,
            scaling: self.scaling,
        };
        (values, self.models_volume)
    }
}
