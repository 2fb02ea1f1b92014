//! The gateway's component: its pod, its `config.yaml` and the env the contract requires.

use std::collections::BTreeMap;

use serde_json::Map;

use super::component::{env_var, image, ingress, pod_context, pod_metadata, ComponentContext};
use super::config::{config_yaml, fits, snake_keys};
use crate::chart::names::Meta;
use crate::error::InputError;
use crate::model::{ContractRules, GatewayModel};

/// Env the gateway needs (the contract's rule, not a default a user could change).
const REQUIRED_GATEWAY_ENV: (&str, &str) = ("TAKEOFF_ADD_READER_ID_SUFFIX", "true");

pub(super) fn gateway_component<'a>(
    rules: &ContractRules,
    gw: &'a GatewayModel,
    name: &str,
    common: &BTreeMap<String, String>,
    app_version: &str,
) -> Result<ComponentContext<'a>, InputError> {
    let field = "spec.gateway";
    let pod = &gw.pod;
    let mut env = pod.env.clone();
    if !pod.env.iter().any(|e| e.name == REQUIRED_GATEWAY_ENV.0) {
        env.push(env_var(REQUIRED_GATEWAY_ENV));
    }
    let config = fits(config_yaml(rules, snake_keys(&gw.config), Map::new()), "spec.gateway.config")?;
    let m = pod_metadata(common, "gateway", pod, &config);
    Ok(ComponentContext {
        meta: Meta { name: name.to_string(), labels: m.labels },
        name: name.to_string(),
        app: None,
        candidate: false,
        dllama: None,
        ollama: None,
        selector_labels: m.selector,
        pod_labels: m.pod_labels,
        pod_annotations: m.pod_annotations,
        image: image(&pod.image, app_version, "cpu"),
        env,
        config_yaml: config,
        models_volume: None,
        model_cache: None,
        replicas: Some(pod.replica_count),
        idle_seconds: None,
        ingress: ingress(pod, name, field)?,
        scaler: None,
        strategy: None,
        progress_deadline_seconds: None,
        disruption_budget: false,
        values: pod_context(pod, pod.resources.clone(), pod.tolerations.clone()),
    })
}
