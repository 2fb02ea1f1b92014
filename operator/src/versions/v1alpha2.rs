//! `models.titanml.co/v1alpha2`: the inference-stack 1.0 contract — readers reached only
//! through the gateway (no per-application Service or Ingress), a models volume at
//! `/code/models`, `config.yaml` rooted at `takeoff:`, `POD_NAME` in every reader, KEDA
//! triggers by consumer group only — and the model cache.

use include_dir::include_dir;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};
use model_orchestra_api::v1alpha2::{Application, ModelOrchestraSpec};
use model_orchestra_api::{parse, ApiVersion, InputErrors};
use serde_json::Value;

use super::{EmbeddedChart, ServedVersion};
use crate::model::{ApplicationValues, ContractRules, Values};

pub(super) struct V1alpha2;

static CHART: EmbeddedChart = EmbeddedChart {
    dir: "charts/model-orchestra-1.0",
    templates: include_dir!("$CARGO_MANIFEST_DIR/../charts/model-orchestra-1.0/templates"),
    chart_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra-1.0/Chart.json")),
    values_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra-1.0/values.json")),
};

static RULES: ContractRules =
    ContractRules { config_root: "takeoff", required_application_env, trigger_targets_application: false };

/// `v1alpha1`'s, and the pod's name (the 1.0 reader names itself by it).
fn required_application_env() -> Vec<EnvVar> {
    let mut env = super::v1alpha1::required_application_env();
    env.push(EnvVar {
        name: "POD_NAME".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: "metadata.name".into(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    });
    env
}

impl ServedVersion for V1alpha2 {
    fn api_version(&self) -> ApiVersion {
        ApiVersion::V1alpha2
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
            gateway: spec.gateway.map(super::v1alpha1::gateway),
            model_gateway: spec.model_gateway,
            application_template: spec.application_template.map(application),
            applications: spec.applications.map(|apps| apps.into_iter().map(|(k, a)| (k, application(a))).collect()),
        })
    }

    fn rules(&self) -> &'static ContractRules {
        &RULES
    }

    fn check_defaults(&self, defaults: &Values) -> Result<(), String> {
        let template = defaults.application_template.as_ref();
        if template.and_then(|t| t.models_volume.as_ref()).is_none() {
            return Err("applicationTemplate.modelsVolume needs a default".into());
        }
        if template.and_then(|t| t.model_cache.as_ref()).is_none() {
            return Err("applicationTemplate.modelCache needs a default (with enabled: false)".into());
        }
        if template.and_then(|t| t.sleep.as_ref()).is_none() {
            return Err("applicationTemplate.sleep needs a default (with enabled: false)".into());
        }
        if defaults.model_gateway.as_ref().and_then(|g| g.image.as_ref()).is_none() {
            return Err("modelGateway.image needs a default".into());
        }
        if template.and_then(|t| t.promotion.as_ref()).is_none() {
            return Err("applicationTemplate.promotion needs a default (with enabled: false)".into());
        }
        if template.and_then(|t| t.engine.as_ref()).and_then(|e| e.distributed_llama.as_ref()).is_none() {
            return Err("applicationTemplate.engine.distributedLlama needs defaults (they apply to the applications that choose it)".into());
        }
        Ok(())
    }
}

/// An application's values: no Service or Ingress of its own.
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
        service: None,
        ingress: None,
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
        models_volume: a.models_volume,
        model_cache: a.model_cache,
        strategy: a.strategy,
        progress_deadline_seconds: a.progress_deadline_seconds,
        promotion: a.promotion,
        engine: a.engine,
        sleep: a.sleep,
    }
}
