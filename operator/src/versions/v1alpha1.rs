//! `models.titanml.co/v1alpha1`: the model-orchestra 0.3 chart's values (frozen, released
//! with 0.1.0): applications with a Service and Ingress of their own, `config.yaml` rooted
//! at `model-orchestra:`, KEDA triggers that also target the application.

use include_dir::include_dir;
use k8s_openapi::api::core::v1::EnvVar;
use model_orchestra_api::v1alpha1::{Application, Gateway, ModelOrchestraSpec};
use model_orchestra_api::{parse, ApiVersion, InputErrors};
use serde_json::Value;

use super::{EmbeddedChart, ServedVersion};
use crate::model::{ApplicationValues, ContractRules, GatewayValues, Values};

pub(super) struct V1alpha1;

static CHART: EmbeddedChart = EmbeddedChart {
    dir: "charts/model-orchestra",
    templates: include_dir!("$CARGO_MANIFEST_DIR/../charts/model-orchestra/templates"),
    chart_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra/Chart.json")),
    values_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra/values.json")),
};

static RULES: ContractRules =
    ContractRules { config_root: "model-orchestra", required_application_env, trigger_targets_application: true };

/// The reader runs headless and suffixes its reader ID, unless the user names the variable.
pub(super) fn required_application_env() -> Vec<EnvVar> {
    let value = |name: &str, value: &str| EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() };
    vec![value("TAKEOFF_ADD_READER_ID_SUFFIX", "true"), value("TAKEOFF_HEADLESS", "true")]
}

impl ServedVersion for V1alpha1 {
    fn api_version(&self) -> ApiVersion {
        ApiVersion::V1alpha1
    }

    fn embedded_chart(&self) -> &'static EmbeddedChart {
        &CHART
    }

    fn values(&self, spec: &Value) -> Result<Values, InputErrors> {
        let spec: ModelOrchestraSpec = parse::strict(spec)?;
        Ok(Values {
            image_pull_secrets: spec.image_pull_secrets,
            name_override: spec.name_override,
            fullname_override: spec.fullname_override,
            service_account: spec.service_account,
            gateway: spec.gateway.map(gateway),
            model_gateway: None,
            application_template: spec.application_template.map(application),
            applications: spec.applications.map(|apps| apps.into_iter().map(|(k, a)| (k, application(a))).collect()),
        })
    }

    fn rules(&self) -> &'static ContractRules {
        &RULES
    }
}

/// The gateway's values (the same in every version so far).
pub(super) fn gateway(g: Gateway) -> GatewayValues {
    GatewayValues {
        image: g.image,
        env: g.env,
        replica_count: g.replica_count,
        pod_annotations: g.pod_annotations,
        pod_labels: g.pod_labels,
        pod_security_context: g.pod_security_context,
        security_context: g.security_context,
        ports: g.ports,
        service: g.service,
        ingress: g.ingress,
        resources: g.resources,
        liveness_probe: g.liveness_probe,
        readiness_probe: g.readiness_probe,
        volumes: g.volumes,
        volume_mounts: g.volume_mounts,
        node_selector: g.node_selector,
        tolerations: g.tolerations,
        affinity: g.affinity,
        config: g.config,
        export_prometheus_metrics: g.export_prometheus_metrics,
    }
}

fn application(a: Application) -> ApplicationValues {
    ApplicationValues {
        image: a.image,
        env: a.env,
        replica_count: a.replica_count,
        pod_annotations: a.pod_annotations,
        pod_labels: a.pod_labels,
        pod_security_context: a.pod_security_context,
        security_context: a.security_context,
        ports: a.ports,
        service: a.service,
        ingress: a.ingress,
        resources: a.resources,
        liveness_probe: a.liveness_probe,
        readiness_probe: a.readiness_probe,
        volumes: a.volumes,
        volume_mounts: a.volume_mounts,
        node_selector: a.node_selector,
        tolerations: a.tolerations,
        affinity: a.affinity,
        reader_config: a.reader_config,
        scaling: a.scaling,
        models_volume: None,
        model_cache: None,
        strategy: None,
        progress_deadline_seconds: None,
        promotion: None,
        engine: None,
        sleep: None,
    }
}
