//! The rules of a values contract that the operator computes rather than the templates:
//! one per ModelOrchestra version, chosen by the chart (`Chart.yaml`'s
//! `models.titanml.co/api-version` annotation; none means `v1alpha1`).

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

/// The annotation of `Chart.yaml` naming the ModelOrchestra version a chart serves.
pub const API_VERSION_ANNOTATION: &str = "models.titanml.co/api-version";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contract {
    /// The model-orchestra 0.3 chart's contract.
    V1alpha1,
    /// The inference-stack 1.0 contract (readers reached only through the gateway, a models
    /// volume), with the model-orchestra object names.
    V1alpha2,
}

impl Contract {
    pub fn from_api_version(version: Option<&str>) -> Result<Contract, String> {
        match version {
            None | Some("v1alpha1") => Ok(Contract::V1alpha1),
            Some("v1alpha2") => Ok(Contract::V1alpha2),
            Some(other) => Err(format!("{API_VERSION_ANNOTATION}: `{other}` is not a ModelOrchestra version this operator renders (v1alpha1, v1alpha2)")),
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            Contract::V1alpha1 => "v1alpha1",
            Contract::V1alpha2 => "v1alpha2",
        }
    }

    /// The root key of every `config.yaml` (the engine reads `takeoff:`; the 0.3 chart
    /// wrote `model-orchestra:`, kept for `v1alpha1`'s byte-identical output).
    pub fn config_root(self) -> &'static str {
        match self {
            Contract::V1alpha1 => "model-orchestra",
            Contract::V1alpha2 => "takeoff",
        }
    }

    /// Env every reader gets unless it names the variable itself, in this order.
    pub fn required_application_env(self) -> Vec<EnvVar> {
        let value =
            |name: &str, value: &str| EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() };
        let mut env = vec![value("TAKEOFF_ADD_READER_ID_SUFFIX", "true"), value("TAKEOFF_HEADLESS", "true")];
        if self == Contract::V1alpha2 {
            env.push(EnvVar {
                name: "POD_NAME".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector { field_path: "metadata.name".into(), ..Default::default() }),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        env
    }

    /// Whether the KEDA trigger also carries `target_<application>` (besides the consumer
    /// group's target).
    pub fn trigger_targets_application(self) -> bool {
        self == Contract::V1alpha1
    }

    /// Whether applications have a Service and Ingress of their own.
    pub fn applications_have_network(self) -> bool {
        self == Contract::V1alpha1
    }
}
