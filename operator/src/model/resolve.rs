//! Values resolved once: the chart's `values.yaml` merged with the CR's values, and
//! `applicationTemplate` merged with each application — typed all the way — into a
//! [`Model`] with no optional field left to default later. Every default lives in
//! `values.yaml`: a value it does not provide is a chart error found when the chart loads,
//! not a literal in Rust.

use k8s_openapi::api::core::v1::ResourceRequirements;
use model_orchestra_api::values::{Engine, ModelCache, Promotion, Sleep};

use super::merge::Merge;
use super::values::{ApplicationValues, GatewayValues, Values};
use super::{
    ApplicationModel, ContractRules, DllamaSettings, EngineModel, GatewayModel, ImageSettings, IngressSettings, Model,
    ModelCacheSettings, ModelGatewaySettings, OllamaSettings, Origin, PodSettings, PromotionSettings, ScalingSettings,
    ServiceAccountSettings, ServiceSettings, SleepSettings,
};
use crate::error::RenderError;

/// The model of `spec` (the CR's values) merged over `defaults` (the chart's `values.yaml`),
/// under the contract `rules`.
pub fn resolve(defaults: &Values, spec: &Values, rules: &'static ContractRules) -> Result<Model, RenderError> {
    let mut merged = defaults.clone();
    // Applications are merged over the template one by one, below; the merge of the rest
    // must not copy them.
    let applications = spec.applications.clone().unwrap_or_default();
    Merge::merge_from(&mut merged, Values { applications: None, ..spec.clone() });
    let sa = required(merged.service_account, "serviceAccount")?;
    let template = required(merged.application_template, "applicationTemplate")?;
    let template_env = template.env.clone().unwrap_or_default();
    let template_set = spec.application_template.as_ref().map(ApplicationValues::set_fields).unwrap_or_default();
    let template_engine = spec.application_template.as_ref().and_then(|t| t.engine.as_ref());
    let applications = applications
        .into_iter()
        .map(|(key, own)| {
            let engine = chosen_engine(template_engine, own.engine.as_ref());
            resolve_application(&template, &template_set, key, own, engine)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let gateway_set = spec.gateway.as_ref().map(GatewayValues::set_fields).unwrap_or_default();
    let gateway = resolve_gateway(required(merged.gateway, "gateway")?, gateway_set)?;
    let model_gateway = merged
        .model_gateway
        .map(|g| -> Result<ModelGatewaySettings, RenderError> {
            Ok(ModelGatewaySettings {
                image: required(g.image, "modelGateway.image")?,
                resources: g.resources.unwrap_or_default(),
            })
        })
        .transpose()?;
    Ok(Model {
        rules,
        name_override: required(merged.name_override, "nameOverride")?,
        fullname_override: required(merged.fullname_override, "fullnameOverride")?,
        image_pull_secrets: required(merged.image_pull_secrets, "imagePullSecrets")?,
        service_account: ServiceAccountSettings {
            create: required(sa.create, "serviceAccount.create")?,
            automount: required(sa.automount, "serviceAccount.automount")?,
            annotations: required(sa.annotations, "serviceAccount.annotations")?,
            name: required(sa.name, "serviceAccount.name")?,
        },
        gateway,
        model_gateway,
        template_env,
        applications,
        written: spec.clone(),
    })
}

/// The model cache, merged (`values.yaml` ← template ← own, key by key), when enabled.
/// Every value is required, so a missing default is found when the chart loads.
fn model_cache(merged: Option<ModelCache>) -> Result<Option<ModelCacheSettings>, RenderError> {
    let Some(merged) = merged else { return Ok(None) };
    let at = "applicationTemplate.modelCache";
    let d = merged.downloader.unwrap_or_default();
    let settings = ModelCacheSettings {
        size: required(merged.size, &format!("{at}.size"))?,
        storage_class_name: required(merged.storage_class_name, &format!("{at}.storageClassName"))?,
        access_modes: required(merged.access_modes, &format!("{at}.accessModes"))?,
        image: required(d.image, &format!("{at}.downloader.image"))?,
        command: required(d.command, &format!("{at}.downloader.command"))?,
        env: required(d.env, &format!("{at}.downloader.env"))?,
        token_secret: d.token_secret,
        backoff_limit: required(d.backoff_limit, &format!("{at}.downloader.backoffLimit"))?,
        refresh: String::new(),
    };
    Ok(required(merged.enabled, &format!("{at}.enabled"))?.then_some(settings))
}

/// The promotion settings, merged (`values.yaml` ← template ← own, key by key), when
/// enabled. Every value is required of `values.yaml`.
fn promotion(merged: Option<Promotion>) -> Result<Option<PromotionSettings>, RenderError> {
    let Some(p) = merged else { return Ok(None) };
    let at = "applicationTemplate.promotion";
    let settings = PromotionSettings {
        prompt: required(p.prompt, &format!("{at}.prompt"))?,
        expect: required(p.expect, &format!("{at}.expect"))?,
        max_tokens: required(p.max_tokens, &format!("{at}.maxTokens"))?,
        timeout_seconds: required(p.timeout_seconds, &format!("{at}.timeoutSeconds"))?,
        period_seconds: required(p.period_seconds, &format!("{at}.periodSeconds"))?,
        success_threshold: required(p.success_threshold, &format!("{at}.successThreshold"))?,
        failure_threshold: required(p.failure_threshold, &format!("{at}.failureThreshold"))?,
        deadline_seconds: required(p.deadline_seconds, &format!("{at}.deadlineSeconds"))?,
    };
    Ok(required(p.enabled, &format!("{at}.enabled"))?.then_some(settings))
}

/// Scale to zero, merged (`values.yaml` ← template ← own, key by key), when enabled. Its
/// values are required of `values.yaml` only when it is.
fn sleep(merged: Option<Sleep>) -> Result<Option<SleepSettings>, RenderError> {
    let Some(s) = merged.filter(|s| s.enabled == Some(true)) else { return Ok(None) };
    let at = "applicationTemplate.sleep";
    Ok(Some(SleepSettings {
        idle_seconds: required(s.idle_seconds, &format!("{at}.idleSeconds"))?,
        hold_seconds: required(s.hold_seconds, &format!("{at}.holdSeconds"))?,
        max_held_requests: required(s.max_held_requests, &format!("{at}.maxHeldRequests"))?,
    }))
}

/// An extended resource (`nvidia.com/gpu`) cannot be overcommitted: the API server refuses
/// a request without an equal limit. A request without a limit means that many, so the
/// request becomes the limit too.
fn extended_limits_from_requests(resources: &mut ResourceRequirements) {
    let Some(requests) = &resources.requests else { return };
    let extended = requests.iter().filter(|(name, _)| name.contains('/') && !name.starts_with("kubernetes.io/"));
    let missing: Vec<_> = extended
        .filter(|(name, _)| resources.limits.as_ref().is_none_or(|l| !l.contains_key(*name)))
        .map(|(n, q)| (n.clone(), q.clone()))
        .collect();
    if !missing.is_empty() {
        resources.limits.get_or_insert_with(Default::default).extend(missing);
    }
}

/// A value `values.yaml` must provide.
fn required<T>(value: Option<T>, path: &str) -> Result<T, RenderError> {
    value.ok_or_else(|| {
        RenderError::chart(
            "values.yaml",
            format!("`{path}` has no default: every value the chart renders needs one in values.yaml"),
        )
    })
}

/// The shared pod values of a merged gateway or application (`$c`), each required; a
/// Service and Ingress only where the values have them.
macro_rules! pod_settings {
    ($c:expr, $at:expr) => {{
        let c = $c;
        let at = $at;
        let image = required(c.image, &format!("{at}.image"))?;
        let service = match c.service {
            None => None,
            Some(service) => Some(ServiceSettings {
                type_: required(service.type_, &format!("{at}.service.type"))?,
                ports: required(service.ports, &format!("{at}.service.ports"))?,
            }),
        };
        let ingress = match c.ingress {
            None => None,
            Some(ingress) => Some(IngressSettings {
                enabled: required(ingress.enabled, &format!("{at}.ingress.enabled"))?,
                class_name: required(ingress.class_name, &format!("{at}.ingress.className"))?,
                annotations: required(ingress.annotations, &format!("{at}.ingress.annotations"))?,
                hosts: required(ingress.hosts, &format!("{at}.ingress.hosts"))?,
                tls: required(ingress.tls, &format!("{at}.ingress.tls"))?,
            }),
        };
        PodSettings {
            image: ImageSettings {
                repository: required(image.repository, &format!("{at}.image.repository"))?,
                pull_policy: required(image.pull_policy, &format!("{at}.image.pullPolicy"))?,
                tag: required(image.tag, &format!("{at}.image.tag"))?,
            },
            env: required(c.env, &format!("{at}.env"))?,
            replica_count: required(c.replica_count, &format!("{at}.replicaCount"))?,
            pod_annotations: required(c.pod_annotations, &format!("{at}.podAnnotations"))?,
            pod_labels: required(c.pod_labels, &format!("{at}.podLabels"))?,
            pod_security_context: required(c.pod_security_context, &format!("{at}.podSecurityContext"))?,
            security_context: required(c.security_context, &format!("{at}.securityContext"))?,
            ports: required(c.ports, &format!("{at}.ports"))?,
            service,
            ingress,
            resources: {
                let mut r = required(c.resources, &format!("{at}.resources"))?;
                extended_limits_from_requests(&mut r);
                r
            },
            liveness_probe: required(c.liveness_probe, &format!("{at}.livenessProbe"))?,
            readiness_probe: required(c.readiness_probe, &format!("{at}.readinessProbe"))?,
            volumes: required(c.volumes, &format!("{at}.volumes"))?,
            volume_mounts: required(c.volume_mounts, &format!("{at}.volumeMounts"))?,
            node_selector: required(c.node_selector, &format!("{at}.nodeSelector"))?,
            tolerations: required(c.tolerations, &format!("{at}.tolerations"))?,
            affinity: required(c.affinity, &format!("{at}.affinity"))?,
        }
    }};
}

fn resolve_gateway(g: GatewayValues, own_set: Vec<&'static str>) -> Result<GatewayModel, RenderError> {
    let config = required(g.config.clone(), "gateway.config")?;
    let export_prometheus_metrics = required(g.export_prometheus_metrics, "gateway.exportPrometheusMetrics")?;
    let pod = pod_settings!(g, "gateway");
    Ok(GatewayModel {
        internal_port: required(config.internal_port, "gateway.config.internalPort")?,
        export_prometheus_metrics,
        config,
        pod,
        origin: Origin { own: "spec.gateway".into(), own_set, template_set: vec![] },
    })
}

/// An application's engine, as chosen by the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chosen {
    Takeoff,
    DistributedLlama,
    Ollama,
}

/// The engine an application runs: its own `engine` decides, else the one the user's
/// template sets (the chart's defaults choose nothing); Takeoff when neither does.
fn chosen_engine(template: Option<&Engine>, own: Option<&Engine>) -> Chosen {
    let choice = |e: &Engine| match (&e.takeoff, &e.distributed_llama, &e.ollama) {
        (Some(_), _, _) => Some(Chosen::Takeoff),
        (None, Some(_), _) => Some(Chosen::DistributedLlama),
        (None, None, Some(_)) => Some(Chosen::Ollama),
        (None, None, None) => None,
    };
    own.and_then(choice).or_else(|| template.and_then(choice)).unwrap_or(Chosen::Takeoff)
}

/// The Ollama settings (`values.yaml` ← template ← own, key by key; the models list whole).
fn ollama(engine: Option<Engine>) -> Result<OllamaSettings, RenderError> {
    let o = engine.and_then(|e| e.ollama).unwrap_or_default();
    let at = "applicationTemplate.engine.ollama";
    let registry = o.registry.unwrap_or_default();
    Ok(OllamaSettings {
        models: required(o.models, &format!("{at}.models"))?.into_iter().map(|m| m.name).collect(),
        registry: registry.host.unwrap_or_default(),
        insecure: required(registry.insecure, &format!("{at}.registry.insecure"))?,
        image: required(o.image, &format!("{at}.image"))?,
        port: required(o.port, &format!("{at}.port"))?,
        stall_seconds: required(o.stall_seconds, &format!("{at}.stallSeconds"))?,
    })
}

/// The group settings (`values.yaml` ← template ← own, key by key).
fn dllama(engine: Option<Engine>) -> Result<DllamaSettings, RenderError> {
    let d = engine.and_then(|e| e.distributed_llama).unwrap_or_default();
    let at = "applicationTemplate.engine.distributedLlama";
    let downloader = d.downloader.unwrap_or_default();
    Ok(DllamaSettings {
        nodes: required(d.nodes, &format!("{at}.nodes"))?,
        image: required(d.image, &format!("{at}.image"))?,
        nthreads: required(d.nthreads, &format!("{at}.nthreads"))?,
        buffer_float_type: required(d.buffer_float_type, &format!("{at}.bufferFloatType"))?,
        max_seq_len: required(d.max_seq_len, &format!("{at}.maxSeqLen"))?,
        port: required(d.port, &format!("{at}.port"))?,
        downloader_image: required(downloader.image, &format!("{at}.downloader.image"))?,
        downloader_command: required(downloader.command, &format!("{at}.downloader.command"))?,
    })
}

fn resolve_application(
    template: &ApplicationValues,
    template_set: &[&'static str],
    key: String,
    own: ApplicationValues,
    chosen: Chosen,
) -> Result<ApplicationModel, RenderError> {
    let own_env = own.env.clone().unwrap_or_default();
    let origin = Origin {
        own: format!("spec.applications.{key}"),
        own_set: own.set_fields(),
        template_set: template_set.to_vec(),
    };
    let mut a = template.clone();
    Merge::merge_from(&mut a, own);
    let reader = required(a.reader_config.clone(), "applicationTemplate.readerConfig")?;
    let scaling = required(a.scaling.clone(), "applicationTemplate.scaling")?;
    let target = required(scaling.metric_target, "applicationTemplate.scaling.metricTarget")?;
    let models_volume = a.models_volume.clone();
    let (strategy, progress_deadline_seconds) = (a.strategy.clone(), a.progress_deadline_seconds);
    let promotion = promotion(a.promotion.clone())?;
    let sleep = sleep(a.sleep.clone())?;
    let engine = match chosen {
        Chosen::Takeoff => EngineModel::Takeoff,
        Chosen::DistributedLlama => EngineModel::DistributedLlama(dllama(a.engine.clone())?),
        Chosen::Ollama => EngineModel::Ollama(ollama(a.engine.clone())?),
    };
    // A group keeps its model in the cache (only its root reads it), downloaded in
    // distributed-llama's format.
    let model_cache = match &engine {
        EngineModel::DistributedLlama(d) => {
            let mut cache = model_cache(a.model_cache.clone().map(|mut c| {
                c.enabled = Some(true);
                c
            }))?;
            if let Some(cache) = &mut cache {
                cache.image = d.downloader_image.clone();
                cache.command = d.downloader_command.clone();
            }
            cache
        }
        // Ollama pulls its models itself (a validation error says so when a cache is enabled).
        EngineModel::Ollama(_) => None,
        EngineModel::Takeoff => model_cache(a.model_cache.clone())?,
    };
    let pod = pod_settings!(a, "applicationTemplate");
    Ok(ApplicationModel {
        key,
        pod,
        own_env,
        device: required(reader.device, "applicationTemplate.readerConfig.device")?,
        consumer_group: required(reader.consumer_group.clone(), "applicationTemplate.readerConfig.consumerGroup")?,
        reader,
        scaling: ScalingSettings {
            enabled: required(scaling.enabled, "applicationTemplate.scaling.enabled")?,
            metric_target: required(target.value, "applicationTemplate.scaling.metricTarget.value")?,
            annotations: required(scaling.annotations, "applicationTemplate.scaling.annotations")?,
            spec: required(scaling.spec, "applicationTemplate.scaling.spec")?,
        },
        models_volume,
        model_cache,
        strategy,
        progress_deadline_seconds,
        promotion,
        engine,
        sleep,
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;

    use model_orchestra_api::values::Device;

    fn defaults() -> Values {
        let text = include_str!("../../../charts/model-orchestra/values.yaml");
        serde_yaml::from_str(text).unwrap()
    }

    fn spec(yaml: &str) -> Values {
        serde_yaml::from_str(yaml).unwrap()
    }

    static RULES: ContractRules =
        ContractRules { config_root: "root", required_application_env: Vec::new, trigger_targets_application: false };

    fn resolve(defaults: &Values, spec: &Values) -> Result<Model, RenderError> {
        super::resolve(defaults, spec, &RULES)
    }

    #[test]
    fn an_application_inherits_the_template_and_its_own_values_win() {
        let r = resolve(
            &defaults(),
            &spec("applicationTemplate: {replicaCount: 3, podLabels: {a: t}}\napplications: {chat: {podLabels: {b: c}, readerConfig: {device: cuda}}}"),
        )
        .unwrap();
        let chat = &r.applications[0];
        assert_eq!(chat.pod.replica_count, 3);
        assert_eq!(chat.pod.pod_labels, BTreeMap::from([("a".into(), "t".into()), ("b".into(), "c".into())]));
        assert_eq!(chat.device, Device::Cuda);
        assert_eq!(chat.consumer_group, "primary", "from values.yaml");
    }

    #[test]
    fn values_yaml_provides_every_default() {
        let r = resolve(&defaults(), &spec("applications: {chat: {}}")).unwrap();
        assert_eq!(r.gateway.internal_port, 3005);
        assert_eq!(r.applications[0].scaling.metric_target, 10);
        assert_eq!(r.gateway.pod.image.repository, "tytn/takeoff-pro");
    }

    #[test]
    fn a_value_values_yaml_lacks_is_a_chart_error_naming_it() {
        let mut d = defaults();
        d.gateway.as_mut().unwrap().config.as_mut().unwrap().internal_port = None;
        let e = resolve(&d, &spec("{}")).unwrap_err().to_string();
        assert!(e.contains("values.yaml") && e.contains("gateway.config.internalPort"), "{e}");
    }
}
