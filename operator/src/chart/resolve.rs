//! Values resolved once: `values.yaml` (parsed once, when the chart loads) merged with the
//! CR's `spec`, and `applicationTemplate` merged with each application — typed all the way
//! — into a form with no optional field left to default later. Every default lives in
//! `values.yaml`: a value it does not provide is a chart error found when the chart loads,
//! not a literal in Rust.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecurityContext, ServicePort, Toleration, Volume, VolumeMount,
};

use super::merge::Merge;
use crate::api::v1alpha2::{Downloader, ModelCache};
use crate::api::{
    Application, Device, Gateway, GatewayConfig, IngressHost, IngressTls, ModelOrchestraSpec, PullPolicy, ReaderConfig,
    ScalingSpec, ServiceType,
};
use crate::error::RenderError;

/// Everything the chart renders for one ModelOrchestra.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub name_override: String,
    pub fullname_override: String,
    pub image_pull_secrets: Vec<LocalObjectReference>,
    pub service_account: ServiceAccountSettings,
    pub gateway: GatewayValues,
    /// `applicationTemplate.env`: applications take the names they do not set themselves.
    pub template_env: Vec<EnvVar>,
    /// In key order.
    pub applications: Vec<ApplicationValues>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServiceAccountSettings {
    pub create: bool,
    pub automount: bool,
    pub annotations: BTreeMap<String, String>,
    /// Empty: the generated full name (or `default` when not created).
    pub name: String,
}

/// What the gateway and every application share: one Deployment's pod, its Service and
/// Ingress.
#[derive(Debug, Clone, PartialEq)]
pub struct PodValues {
    pub image: ImageSettings,
    pub env: Vec<EnvVar>,
    pub replica_count: i32,
    pub pod_annotations: BTreeMap<String, String>,
    pub pod_labels: BTreeMap<String, String>,
    pub pod_security_context: PodSecurityContext,
    pub security_context: SecurityContext,
    pub ports: Vec<ContainerPort>,
    pub service: ServiceSettings,
    pub ingress: IngressSettings,
    pub resources: ResourceRequirements,
    pub liveness_probe: Probe,
    pub readiness_probe: Probe,
    pub volumes: Vec<Volume>,
    pub volume_mounts: Vec<VolumeMount>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    pub affinity: Affinity,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImageSettings {
    pub repository: String,
    pub pull_policy: PullPolicy,
    /// Empty: the chart's appVersion and a `-cpu`/`-gpu` suffix; `sha256:…` pins a digest.
    pub tag: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServiceSettings {
    pub type_: ServiceType,
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IngressSettings {
    pub enabled: bool,
    pub class_name: String,
    pub annotations: BTreeMap<String, String>,
    pub hosts: Vec<IngressHost>,
    pub tls: Vec<IngressTls>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayValues {
    pub pod: PodValues,
    /// `gateway.config` as merged (its open-ended keys included).
    pub config: GatewayConfig,
    pub internal_port: i32,
    pub export_prometheus_metrics: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApplicationValues {
    /// The key in `spec.applications`.
    pub key: String,
    pub pod: PodValues,
    /// The application's own `env` (before the template's and the required ones).
    pub own_env: Vec<EnvVar>,
    /// `readerConfig` as merged (its open-ended keys included).
    pub reader: ReaderConfig,
    pub device: Device,
    pub consumer_group: String,
    pub scaling: ScalingSettings,
    /// The volume mounted at `/code/models` (`v1alpha2`; set by the renderer).
    pub models_volume: Option<k8s_openapi::api::core::v1::Volume>,
    /// The model cache, when enabled (`v1alpha2`; set by the renderer).
    pub model_cache: Option<ModelCacheSettings>,
}

/// An enabled model cache, resolved: `values.yaml` ← `applicationTemplate.modelCache` ←
/// the application's own, key by key.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCacheSettings {
    pub size: String,
    /// Empty: the cluster's default StorageClass.
    pub storage_class_name: String,
    pub access_modes: Vec<String>,
    pub image: String,
    pub command: Vec<String>,
    pub env: Vec<EnvVar>,
    pub token_secret: Option<k8s_openapi::api::core::v1::SecretKeySelector>,
    pub backoff_limit: i32,
    /// The `models.titanml.co/refresh` value the model is downloaded for ("" if none).
    pub refresh: String,
}

/// `over`'s fields where set, else `base`'s (the downloader likewise, key by key).
pub fn merge_model_cache(base: &ModelCache, over: &ModelCache) -> ModelCache {
    let (b, o) = (base.downloader.clone().unwrap_or_default(), over.downloader.clone().unwrap_or_default());
    let downloader = Downloader {
        image: o.image.or(b.image),
        command: o.command.or(b.command),
        env: o.env.or(b.env),
        token_secret: o.token_secret.or(b.token_secret),
        backoff_limit: o.backoff_limit.or(b.backoff_limit),
    };
    ModelCache {
        enabled: over.enabled.or(base.enabled),
        size: over.size.clone().or_else(|| base.size.clone()),
        storage_class_name: over.storage_class_name.clone().or_else(|| base.storage_class_name.clone()),
        access_modes: over.access_modes.clone().or_else(|| base.access_modes.clone()),
        downloader: Some(downloader),
    }
}

/// The model cache of `app` (`template` already merged over `values.yaml`'s), when enabled.
/// Every value is required, so a missing default is found when the chart loads.
pub fn model_cache(
    template: Option<&ModelCache>,
    own: Option<&ModelCache>,
) -> Result<Option<ModelCacheSettings>, RenderError> {
    let merged = merge_model_cache(template.unwrap_or(&ModelCache::default()), own.unwrap_or(&ModelCache::default()));
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

#[derive(Debug, Clone, PartialEq)]
pub struct ScalingSettings {
    pub enabled: bool,
    pub metric_target: i64,
    pub annotations: BTreeMap<String, String>,
    pub spec: ScalingSpec,
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

/// The shared pod values of a merged gateway or application (`$c`), each required.
macro_rules! pod_values {
    ($c:expr, $at:expr) => {{
        let c = $c;
        let at = $at;
        let image = required(c.image, &format!("{at}.image"))?;
        let service = required(c.service, &format!("{at}.service"))?;
        let ingress = required(c.ingress, &format!("{at}.ingress"))?;
        PodValues {
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
            service: ServiceSettings {
                type_: required(service.type_, &format!("{at}.service.type"))?,
                ports: required(service.ports, &format!("{at}.service.ports"))?,
            },
            ingress: IngressSettings {
                enabled: required(ingress.enabled, &format!("{at}.ingress.enabled"))?,
                class_name: required(ingress.class_name, &format!("{at}.ingress.className"))?,
                annotations: required(ingress.annotations, &format!("{at}.ingress.annotations"))?,
                hosts: required(ingress.hosts, &format!("{at}.ingress.hosts"))?,
                tls: required(ingress.tls, &format!("{at}.ingress.tls"))?,
            },
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

/// The spec merged over the defaults, resolved. `defaults` is the parsed `values.yaml`.
pub fn resolve(defaults: &ModelOrchestraSpec, spec: &ModelOrchestraSpec) -> Result<Resolved, RenderError> {
    let mut merged = defaults.clone();
    // Applications are merged over the template one by one, below; the merge of the rest
    // must not copy them.
    let applications = spec.applications.clone().unwrap_or_default();
    Merge::merge_from(&mut merged, ModelOrchestraSpec { applications: None, ..spec.clone() });
    let sa = required(merged.service_account, "serviceAccount")?;
    let template = required(merged.application_template, "applicationTemplate")?;
    let template_env = template.env.clone().unwrap_or_default();
    let applications = applications
        .into_iter()
        .map(|(key, own)| resolve_application(&template, key, own))
        .collect::<Result<Vec<_>, _>>()?;
    let gateway = resolve_gateway(required(merged.gateway, "gateway")?)?;
    Ok(Resolved {
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
        template_env,
        applications,
    })
}

fn resolve_gateway(g: Gateway) -> Result<GatewayValues, RenderError> {
    let config = required(g.config.clone(), "gateway.config")?;
    let export_prometheus_metrics = required(g.export_prometheus_metrics, "gateway.exportPrometheusMetrics")?;
    let pod = pod_values!(g, "gateway");
    Ok(GatewayValues {
        internal_port: required(config.internal_port, "gateway.config.internalPort")?,
        export_prometheus_metrics,
        config,
        pod,
    })
}

fn resolve_application(
    template: &Application,
    key: String,
    own: Application,
) -> Result<ApplicationValues, RenderError> {
    let own_env = own.env.clone().unwrap_or_default();
    let mut a = template.clone();
    Merge::merge_from(&mut a, own);
    let reader = required(a.reader_config.clone(), "applicationTemplate.readerConfig")?;
    let scaling = required(a.scaling.clone(), "applicationTemplate.scaling")?;
    let target = required(scaling.metric_target, "applicationTemplate.scaling.metricTarget")?;
    let pod = pod_values!(a, "applicationTemplate");
    Ok(ApplicationValues {
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
        models_volume: None,
        model_cache: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> ModelOrchestraSpec {
        let text = include_str!("../../../charts/model-orchestra/values.yaml");
        serde_yaml::from_str(text).unwrap()
    }

    fn spec(yaml: &str) -> ModelOrchestraSpec {
        serde_yaml::from_str(yaml).unwrap()
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
