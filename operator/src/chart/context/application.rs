//! The applications' components: each application's pods (Takeoff, Ollama or a
//! distributed-llama group), the candidate of a revision being verified, and the model
//! cache an application downloads its model into.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Volume};
use serde_json::{Map, Value};

use super::component::{
    env_var, hex_sha256, image, ingress, pod_context, pod_metadata, ComponentContext, ModelCacheContext, Scaler,
};
use super::config::{config_yaml, fits, snake_keys};
use super::{COMPONENT_LABEL, CONFIG_CHECKSUM_ANNOTATION, MODEL_REVISION_LABEL, REVISION_ANNOTATION};
use crate::chart::names::{check_generated, Meta};
use crate::chart::MODELS_DIR;
use crate::error::InputError;
use crate::model::{ApplicationModel, ContractRules, EngineModel, ModelCacheSettings};

pub(super) struct AppContext<'a> {
    pub(super) rules: &'static ContractRules,
    pub(super) field: &'a str,
    pub(super) fullname: &'a str,
    pub(super) gateway_name: &'a str,
    pub(super) namespace: &'a str,
    pub(super) internal_port: i32,
    /// The operator's image (the chart's default model gateway image), where the contract
    /// has a model gateway.
    pub(super) operator_image: Option<&'a str>,
}

/// Application env precedence: its own, then the template's not already named, then the
/// contract's required ones not already named.
fn application_env(own: &[EnvVar], template: &[EnvVar], required: Vec<EnvVar>) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = Vec::with_capacity(own.len() + template.len() + required.len());
    for e in own.iter().chain(template).cloned().chain(required) {
        if !env.iter().any(|x| x.name == e.name) {
            env.push(e);
        }
    }
    env
}

/// How an application's pods are rendered: as the application itself, or as the candidate
/// of a revision being verified.
#[derive(Clone, Copy)]
enum Role<'r> {
    Production,
    /// Registered with the gateway under this consumer group (no production traffic).
    Candidate {
        group: &'r str,
    },
}

/// The revision of a rendered application: the hash of what its pods run.
fn revision(c: &ComponentContext) -> String {
    let identity = match &c.ollama {
        // What an Ollama replica runs: its pod, and the models pulled into it.
        Some(o) => serde_json::json!([o, c.pod_labels, c.pod_annotations, c.values]),
        None => serde_json::json!([
            c.image,
            c.env,
            c.config_yaml,
            c.pod_labels,
            c.pod_annotations,
            c.models_volume,
            c.values
        ]),
    };
    hex_sha256(&identity.to_string())[..10].to_string()
}

/// The application's context, and, when it has verified promotion, its candidate's: the
/// same pods registered with the gateway under the consumer group `verify-<revision>`,
/// one replica, its own name and component (`candidate-<application>`) so no selector of
/// the application reaches it. Both carry the revision's annotation.
pub(super) fn application_components<'a>(
    ctx: &AppContext,
    app: &'a ApplicationModel,
    template_env: &[EnvVar],
    common: &BTreeMap<String, String>,
    app_version: &str,
) -> Result<Vec<ComponentContext<'a>>, InputError> {
    let mut production = application_component(ctx, app, template_env, common, app_version, Role::Production)?;
    if let EngineModel::DistributedLlama(d) = &app.engine {
        // No Takeoff configuration: its checksum would roll the root for nothing.
        let mut root_annotations = production.pod_annotations.clone();
        root_annotations.remove(CONFIG_CHECKSUM_ANNOTATION);
        let base = crate::chart::group::GroupBase {
            name: &production.name,
            namespace: ctx.namespace,
            field: ctx.field,
            labels: &production.meta.labels,
            pod_labels: &production.pod_labels,
            selector: &production.selector_labels,
            root_annotations,
            env: application_env(&app.own_env, template_env, Vec::new()),
            models_volume: production.models_volume.as_deref().cloned(),
        };
        production.dllama = Some(crate::chart::group::group(app, d, base)?);
        // A group serves whole or not at all: a budget would only slow a drain.
        production.disruption_budget = false;
        return Ok(vec![production]);
    }
    if let EngineModel::Ollama(o) = &app.engine {
        as_ollama(ctx, &mut production, app, o, template_env)?;
    }
    if app.promotion.is_none() {
        return Ok(vec![production]);
    }
    let rev = revision(&production);
    let group = format!("verify-{rev}");
    let mut candidate =
        application_component(ctx, app, template_env, common, app_version, Role::Candidate { group: &group })?;
    if let EngineModel::Ollama(o) = &app.engine {
        as_ollama(ctx, &mut candidate, app, o, template_env)?;
    }
    production.pod_annotations.insert(REVISION_ANNOTATION.into(), rev.clone());
    candidate.pod_annotations.insert(REVISION_ANNOTATION.into(), rev);
    if let EngineModel::Ollama(o) = &app.engine {
        for c in [&mut production, &mut candidate] {
            c.pod_annotations.insert(crate::chart::MODELS_ANNOTATION.into(), o.models.join(","));
        }
    }
    Ok(vec![production, candidate])
}

fn application_component<'a>(
    ctx: &AppContext,
    app: &'a ApplicationModel,
    template_env: &[EnvVar],
    common: &BTreeMap<String, String>,
    app_version: &str,
    role: Role,
) -> Result<ComponentContext<'a>, InputError> {
    let (name, component) = match role {
        // The component label's length is checked with the other names (`validate`).
        Role::Production => (format!("{}-{}", ctx.fullname, app.key), format!("application-{}", app.key)),
        Role::Candidate { .. } => (format!("{}-{}-candidate", ctx.fullname, app.key), format!("candidate-{}", app.key)),
    };
    check_generated(&name, ctx.field)?;

    let mut reader = snake_keys(&app.reader);
    if let Role::Candidate { group } = role {
        reader.insert("consumer_group".into(), Value::String(group.to_string()));
    }
    reader.insert("internal_gateway_ip".into(), Value::String(ctx.gateway_name.to_string()));
    let mut server = Map::new();
    server.insert("internal_port".into(), Value::from(ctx.internal_port));
    let config = fits(
        config_yaml(ctx.rules, server, Map::from_iter([(app.key.clone(), Value::Object(reader))])),
        &format!("{}.readerConfig", ctx.field),
    )?;

    let pod = &app.pod;
    let mut m = pod_metadata(common, &component, pod, &config);
    let (resources, tolerations) = app.gpu_scheduling();
    // The download Job and claim are the application's; a candidate mounts the same claim.
    let cache_component = format!("application-{}", app.key);
    let model_cache = match &app.model_cache {
        Some(cache) => Some(model_cache(ctx, app, cache, common, &cache_component)?),
        None => None,
    };
    let models_volume = match &model_cache {
        Some(cache) => {
            m.pod_annotations.insert(MODEL_REVISION_LABEL.into(), cache.job.labels[MODEL_REVISION_LABEL].clone());
            let claim = k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                claim_name: cache.claim.name.clone(),
                read_only: None,
            };
            Some(std::borrow::Cow::Owned(Volume {
                name: "models".into(),
                persistent_volume_claim: Some(claim),
                ..Default::default()
            }))
        }
        None => app.models_volume.as_ref().map(std::borrow::Cow::Borrowed),
    };

    let scaler = if app.scaling.enabled && matches!(role, Role::Production) {
        let target = app.scaling.metric_target.to_string();
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "scalerAddress".to_string(),
            format!("{}.{}.svc.cluster.local:{}", ctx.gateway_name, ctx.namespace, ctx.internal_port),
        );
        metadata.insert(format!("target_{}", app.consumer_group), target.clone());
        if ctx.rules.trigger_targets_application {
            metadata.insert(format!("target_{}", app.key), target);
        }
        Some(Scaler { annotations: &app.scaling.annotations, spec: &app.scaling.spec, trigger_metadata: metadata })
    } else {
        None
    };
    let production = matches!(role, Role::Production);
    let ingress = if production { ingress(pod, &name, ctx.field)? } else { None };
    // A drain or an eviction then takes one replica at a time: the others serve, and the
    // next goes once its replacement is ready. One replica is not held (a drain could never
    // finish); a candidate is one pod, and no production traffic.
    let disruption_budget = production && (scaler.is_some() || pod.replica_count > 1);
    let replicas = match role {
        Role::Production if scaler.is_some() => None,
        Role::Production => Some(pod.replica_count),
        Role::Candidate { .. } => Some(1),
    };

    Ok(ComponentContext {
        meta: Meta { name: name.clone(), labels: m.labels },
        replicas,
        idle_seconds: None,
        name,
        app: Some(&app.key),
        candidate: !production,
        dllama: None,
        ollama: None,
        selector_labels: m.selector,
        pod_labels: m.pod_labels,
        pod_annotations: m.pod_annotations,
        image: image(&pod.image, app_version, "gpu"),
        env: application_env(&app.own_env, template_env, (ctx.rules.required_application_env)()),
        models_volume,
        model_cache: if production { model_cache } else { None },
        config_yaml: config,
        ingress,
        scaler,
        // A candidate replaces its pod whole: a surge would need room for a second one.
        strategy: if production { app.strategy.as_ref() } else { Some(&RECREATE) },
        progress_deadline_seconds: app.progress_deadline_seconds,
        disruption_budget,
        values: pod_context(pod, resources, tolerations),
    })
}

/// Makes an application's context (or its candidate's) an Ollama one: no Takeoff
/// configuration (its checksum would roll pods for nothing), no queue-based scaler (the
/// gateway's queue is Takeoff's), and Ollama's container, Service and readiness gate.
fn as_ollama(
    ctx: &AppContext,
    c: &mut ComponentContext,
    app: &ApplicationModel,
    o: &crate::model::OllamaSettings,
    template_env: &[EnvVar],
) -> Result<(), InputError> {
    // Every contract with Ollama has a model gateway, whose default image is the operator's.
    let helper_image = ctx.operator_image.ok_or_else(|| {
        InputError::new(
            ctx.field,
            "an Ollama application's drain helper needs the operator's image: the chart has none",
        )
    })?;
    c.pod_annotations.remove(CONFIG_CHECKSUM_ANNOTATION);
    // `kubectl logs` and `exec` go to Ollama, not to the drain helper beside it.
    c.pod_annotations.insert("kubectl.kubernetes.io/default-container".into(), "ollama".into());
    c.scaler = None;
    // The chart's default models volume is memory-backed, which would hold every model
    // twice in memory (the file and the loaded weights): a disk one unless the user chose.
    let chose_volume =
        app.origin.own_set.contains(&"modelsVolume") || app.origin.template_set.contains(&"modelsVolume");
    let base = crate::chart::ollama::OllamaBase {
        service: c.meta.clone(),
        env: application_env(&app.own_env, template_env, Vec::new()),
        models_volume: if chose_volume { c.models_volume.as_deref() } else { None },
        helper_image,
    };
    c.ollama = Some(crate::chart::ollama::ollama(app, o, base));
    // A candidate keeps its one replica: only the serving revision sleeps.
    if !c.candidate {
        c.idle_seconds = app.sleep.map(|s| s.idle_seconds.to_string());
    }
    Ok(())
}

static RECREATE: std::sync::LazyLock<k8s_openapi::api::apps::v1::DeploymentStrategy> = std::sync::LazyLock::new(|| {
    k8s_openapi::api::apps::v1::DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None }
});

/// The claim and download Job of an application's model cache.
fn model_cache<'a>(
    ctx: &AppContext,
    app: &'a ApplicationModel,
    cache: &'a ModelCacheSettings,
    common: &BTreeMap<String, String>,
    component: &str,
) -> Result<ModelCacheContext<'a>, InputError> {
    let field = format!("{}.modelCache", ctx.field);
    let model = app.reader.model_name.clone().unwrap_or_default();
    if model.is_empty() {
        return Err(InputError::new(
            format!("{}.readerConfig.modelName", ctx.field),
            "a model cache downloads readerConfig.modelName: set it",
        ));
    }
    // distributed-llama's files are named by the model with `-` written `_`.
    let model = match &app.engine {
        EngineModel::DistributedLlama(_) => crate::chart::group::model_dir_name(&model),
        EngineModel::Takeoff | EngineModel::Ollama(_) => model,
    };
    let mut env = vec![env_var(("MODEL_NAME", &model)), env_var(("MODELS_DIR", MODELS_DIR))];
    if let Some(secret) = &cache.token_secret {
        let from =
            k8s_openapi::api::core::v1::EnvVarSource { secret_key_ref: Some(secret.clone()), ..Default::default() };
        env.push(EnvVar { name: "HF_TOKEN".into(), value_from: Some(from), ..Default::default() });
    }
    // The downloader's own env wins over the three above.
    env.retain(|e| !cache.env.iter().any(|own| own.name == e.name));
    env.extend(cache.env.iter().cloned());
    let identity = serde_json::json!([model, cache.image, cache.command, env, cache.refresh]);
    let revision = hex_sha256(&identity.to_string())[..8].to_string();

    let claim = format!("{}-{}-models", ctx.fullname, app.key);
    let job = format!("{}-{}-dl-{revision}", ctx.fullname, app.key);
    check_generated(&claim, &field)?;
    check_generated(&job, &field)?;
    let mut labels = common.clone();
    labels.insert(COMPONENT_LABEL.into(), component.to_string());
    let mut job_labels = labels.clone();
    job_labels.insert(MODEL_REVISION_LABEL.into(), revision);
    let mut pod_labels = common.clone();
    pod_labels.insert(COMPONENT_LABEL.into(), format!("model-{}", app.key));
    Ok(ModelCacheContext {
        claim: Meta { name: claim, labels },
        job: Meta { name: job, labels: job_labels },
        pod_labels,
        size: &cache.size,
        storage_class_name: &cache.storage_class_name,
        access_modes: &cache.access_modes,
        image: &cache.image,
        command: &cache.command,
        env,
        backoff_limit: cache.backoff_limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, value: &str) -> EnvVar {
        env_var((name, value))
    }

    #[test]
    fn application_env_precedence_own_then_template_then_required() {
        let own = [env("A", "own"), env("TAKEOFF_HEADLESS", "false")];
        let template = [env("A", "template"), env("B", "template")];
        let got: Vec<(String, String)> =
            application_env(&own, &template, vec![env("TAKEOFF_ADD_READER_ID_SUFFIX", "true")])
                .into_iter()
                .map(|e| (e.name, e.value.unwrap()))
                .collect();
        let want =
            [("A", "own"), ("TAKEOFF_HEADLESS", "false"), ("B", "template"), ("TAKEOFF_ADD_READER_ID_SUFFIX", "true")];
        assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
    }
}
