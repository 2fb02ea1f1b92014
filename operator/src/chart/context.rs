//! The template context, built from the resolved values: Helm's `Release` and `Chart`, plus
//! what Helm charts compute in `_helpers.tpl` — names, labels, env precedence, GPU rules,
//! each pod's `config.yaml` and its checksum. Computing these in Rust keeps the templates
//! about structure only, and every value they print is data that the `json` helper
//! serialises. The context is typed until it is handed to Handlebars.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecurityContext, ServicePort, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, IngressBackend, IngressRule, IngressServiceBackend, ServiceBackendPort,
};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::names::{self, check_generated, Meta};
use super::MODELS_DIR;
use super::{Chart, Component};
use crate::error::{InputError, RenderError};
use crate::model::snake_case;
use crate::model::{
    ApplicationModel, ContractRules, EngineModel, GatewayModel, Model, ModelCacheSettings, PodSettings,
};
use model_orchestra_api::names::{is_dns_label, is_dns_subdomain, is_label_value};
use model_orchestra_api::values::{IngressTls, PullPolicy, ScalingSpec, ServiceType};

/// The label naming who manages an object; the operator prunes only objects carrying it.
pub use model_orchestra_api::keys::MANAGED_BY_LABEL;
/// Value of [`MANAGED_BY_LABEL`] (Helm's `.Release.Service`).
pub const MANAGED_BY: &str = "model-orchestra-operator";
/// The label naming an object's component (`gateway`, `application-<app>`, `model-<app>`).
pub use model_orchestra_api::keys::COMPONENT_LABEL;
/// The label naming an object's release (the CR).
pub use model_orchestra_api::keys::INSTANCE_LABEL;
/// Pod-template annotation holding the checksum of the pod's configuration.
pub(super) const CONFIG_CHECKSUM_ANNOTATION: &str = "checksum/config";
/// Env the gateway needs (the contract's rule, not a default a user could change).
const REQUIRED_GATEWAY_ENV: (&str, &str) = ("TAKEOFF_ADD_READER_ID_SUFFIX", "true");

/// The root of the template context.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Root<'a> {
    #[serde(rename = "Release")]
    release: ReleaseInfo<'a>,
    #[serde(rename = "Chart")]
    chart: ChartInfo<'a>,
    fullname: &'a str,
    labels: &'a BTreeMap<String, String>,
    image_pull_secrets: &'a [LocalObjectReference],
    service_account: ServiceAccountContext<'a>,
    /// Render the gateway's ServiceMonitor.
    service_monitor: bool,
    gateway: &'a ComponentContext<'a>,
    /// Whether the Takeoff gateway is rendered: not when every application is Ollama (it
    /// routes only to Takeoff readers).
    takeoff_gateway: bool,
    /// The model gateway, in the gateway's place (first shard only).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_gateway: Option<&'a super::model_gateway::ModelGatewayContext>,
    components: Components<'a, 'a>,
}

#[derive(Serialize)]
struct ReleaseInfo<'a> {
    #[serde(rename = "Name")]
    name: &'a str,
    #[serde(rename = "Namespace")]
    namespace: &'a str,
    #[serde(rename = "Service")]
    service: &'a str,
}

#[derive(Serialize)]
struct ChartInfo<'a> {
    #[serde(rename = "Name")]
    name: &'a str,
    #[serde(rename = "Version")]
    version: &'a str,
    #[serde(rename = "AppVersion")]
    app_version: &'a str,
}

#[derive(Serialize)]
struct ServiceAccountContext<'a> {
    create: bool,
    automount: bool,
    name: &'a str,
    annotations: &'a BTreeMap<String, String>,
}

/// One pod-running component (the gateway or an application), as the templates see it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ComponentContext<'a> {
    /// Name of every object of this component (and of its container).
    name: String,
    /// What the `metadata` partial prints (a small object, because Handlebars clones a
    /// partial's context).
    meta: Meta,
    /// The application's key in `spec.applications`; absent for the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    app: Option<&'a str>,
    /// The candidate of a revision being verified, not the application's own pods.
    #[serde(skip)]
    candidate: bool,
    /// A distributed-llama group (its root and workers) instead of Takeoff readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    dllama: Option<super::group::GroupContext>,
    /// Ollama, behind the application's own Service, instead of Takeoff readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    ollama: Option<super::ollama::OllamaContext>,
    selector_labels: BTreeMap<String, String>,
    pod_labels: BTreeMap<String, String>,
    pod_annotations: BTreeMap<String, String>,
    image: String,
    env: Vec<EnvVar>,
    config_yaml: String,
    /// The volume mounted at `/code/models` (`v1alpha2` applications).
    #[serde(skip_serializing_if = "Option::is_none")]
    models_volume: Option<std::borrow::Cow<'a, Volume>>,
    /// The claim and download Job of the application's model cache, when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    model_cache: Option<ModelCacheContext<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    replicas: Option<i32>,
    /// A sleeping application's `idleSeconds`: the model gateway owns its `replicas`.
    #[serde(skip_serializing_if = "Option::is_none")]
    idle_seconds: Option<String>,
    /// Ingress rules with the rules' defaults filled in, when the ingress is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    ingress: Option<IngressRules>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scaler: Option<Scaler<'a>>,
    /// The Deployment's strategy and progress deadline, when the values set them.
    #[serde(skip_serializing_if = "Option::is_none")]
    strategy: Option<&'a k8s_openapi::api::apps::v1::DeploymentStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress_deadline_seconds: Option<i32>,
    /// The pod's and Service's settings, with the GPU rules applied.
    values: PodContext<'a>,
}

/// A model cache as the templates see it: its PersistentVolumeClaim and download Job.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelCacheContext<'a> {
    claim: Meta,
    job: Meta,
    /// The download pod's labels: the release's, and the component `model-<application>`
    /// (its pods are not the application's).
    pod_labels: BTreeMap<String, String>,
    size: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    storage_class_name: &'a str,
    access_modes: &'a [String],
    image: &'a str,
    command: &'a [String],
    env: Vec<EnvVar>,
    backoff_limit: i32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodContext<'a> {
    image: ImagePolicy,
    pod_security_context: &'a PodSecurityContext,
    security_context: &'a SecurityContext,
    ports: &'a [ContainerPort],
    liveness_probe: &'a Probe,
    readiness_probe: &'a Probe,
    resources: ResourceRequirements,
    volumes: &'a [Volume],
    volume_mounts: &'a [VolumeMount],
    node_selector: &'a BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
    affinity: &'a Affinity,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<ServiceContext<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ingress: Option<IngressContext<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ImagePolicy {
    pull_policy: PullPolicy,
}

#[derive(Serialize)]
struct ServiceContext<'a> {
    #[serde(rename = "type")]
    type_: ServiceType,
    ports: &'a [ServicePort],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IngressContext<'a> {
    class_name: &'a str,
    annotations: &'a BTreeMap<String, String>,
    tls: &'a [IngressTls],
}

/// An Ingress's `spec.rules`, as the templates read them (`ingress.rules`).
#[derive(Serialize)]
struct IngressRules {
    rules: Vec<IngressRule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Scaler<'a> {
    annotations: &'a BTreeMap<String, String>,
    spec: &'a ScalingSpec,
    trigger_metadata: BTreeMap<String, String>,
}

/// What every shard of a render shares: the release's names and labels, the ServiceAccount
/// and the gateway. Built once per render, before any application.
pub(super) struct Release<'a> {
    release: &'a str,
    namespace: &'a str,
    chart: &'a Chart,
    fullname: String,
    common: BTreeMap<String, String>,
    sa_name: String,
    values: &'a Model,
    gateway: ComponentContext<'a>,
    /// Whether the Takeoff gateway is rendered: unless every application is Ollama.
    takeoff_gateway: bool,
    /// The model gateway, when every application is an open engine.
    model_gateway: Option<super::model_gateway::ModelGatewayContext>,
}

/// The applications of one shard, as the templates see them.
pub(super) struct Applications<'a> {
    contexts: Vec<ComponentContext<'a>>,
}

impl Applications<'_> {
    /// The name of each application's objects (its model cache's included), with its
    /// component.
    pub(super) fn components(&self) -> impl Iterator<Item = (&str, Component)> {
        self.contexts.iter().flat_map(|c| {
            let cache = c.model_cache.iter().flat_map(|m| [m.claim.name.as_str(), m.job.name.as_str()]);
            let workers = c.dllama.iter().flat_map(|g| g.workers_name());
            let cache = cache.chain(workers);
            let component = c.app.map(|app| match c.candidate {
                true => Component::Candidate(app.to_string()),
                false => Component::Application(app.to_string()),
            });
            std::iter::once(c.name.as_str()).chain(cache).filter_map(move |name| Some((name, component.clone()?)))
        })
    }
}

/// The components a context lists: the gateway (in the first shard only), then applications.
struct Components<'b, 'a> {
    gateway: Option<&'b ComponentContext<'a>>,
    applications: &'b [ComponentContext<'a>],
}

impl Serialize for Components<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.gateway.iter().count() + self.applications.len()))?;
        for c in self.gateway.into_iter().chain(self.applications) {
            seq.serialize_element(c)?;
        }
        seq.end()
    }
}

impl<'a> Release<'a> {
    /// Checks the release's names and builds the gateway's context.
    pub(super) fn new(
        chart: &'a Chart,
        release: &'a str,
        namespace: &'a str,
        values: &'a Model,
    ) -> Result<Release<'a>, RenderError> {
        check_release(release, namespace)?;
        let meta = &chart.metadata;
        let fullname = names::fullname(release, &meta.name, &values.name_override, &values.fullname_override);
        let chart_name =
            if values.name_override.is_empty() { meta.name.as_str() } else { values.name_override.as_str() };
        if !is_label_value(chart_name) {
            return Err(
                InputError::new("spec.nameOverride", "must be a valid label value (≤63 of A-Z a-z 0-9 - _ .)").into()
            );
        }
        let common = BTreeMap::from([
            (model_orchestra_api::keys::NAME_LABEL.to_string(), chart_name.to_string()),
            (INSTANCE_LABEL.to_string(), release.to_string()),
            (model_orchestra_api::keys::VERSION_LABEL.to_string(), meta.app_version.clone()),
            (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
            ("helm.sh/chart".to_string(), format!("{}-{}", meta.name, meta.version).replace('+', "_")),
        ]);

        let sa = &values.service_account;
        let sa_name = match (sa.create, sa.name.as_str()) {
            (_, name) if !name.is_empty() => name.to_string(),
            (true, _) => fullname.clone(),
            (false, _) => "default".to_string(),
        };
        if !is_dns_subdomain(&sa_name) {
            return Err(InputError::new(
                "spec.serviceAccount.name",
                format!("`{sa_name}` is not a valid ServiceAccount name (DNS subdomain)"),
            )
            .into());
        }

        let gateway_name = format!("{fullname}-gateway");
        check_generated(
            &gateway_name,
            if values.fullname_override.is_empty() { "metadata.name" } else { "spec.fullnameOverride" },
        )?;
        let gateway = gateway_component(values.rules, &values.gateway, &gateway_name, &common, &meta.app_version)?;
        let takeoff_gateway = values.applications.is_empty()
            || values.applications.iter().any(|a| !matches!(a.engine, EngineModel::Ollama(_)));
        let model_gateway = super::model_gateway::model_gateway(
            values,
            super::model_gateway::Base {
                meta: gateway.meta.clone(),
                selector_labels: &gateway.selector_labels,
                pod_labels: &gateway.pod_labels,
                release,
                namespace,
                fullname: &fullname,
            },
        );
        Ok(Release {
            release,
            namespace,
            chart,
            fullname,
            common,
            sa_name,
            values,
            gateway,
            takeoff_gateway,
            model_gateway,
        })
    }

    pub(super) fn namespace(&self) -> &str {
        self.namespace
    }

    /// The gateway's object name.
    pub(super) fn gateway_name(&self) -> &str {
        &self.gateway.name
    }

    /// The contexts of `applications` (a slice of the resolved values' applications).
    pub(super) fn applications(&self, applications: &'a [ApplicationModel]) -> Result<Applications<'a>, RenderError> {
        let mut contexts = Vec::with_capacity(applications.len());
        for app in applications {
            let field = format!("spec.applications.{}", app.key);
            let ctx = AppContext {
                rules: self.values.rules,
                field: &field,
                fullname: &self.fullname,
                gateway_name: &self.gateway.name,
                namespace: self.namespace,
                internal_port: self.values.gateway.internal_port,
            };
            contexts.extend(application_components(
                &ctx,
                app,
                &self.values.template_env,
                &self.common,
                &self.chart.metadata.app_version,
            )?);
        }
        Ok(Applications { contexts })
    }

    /// The template context of one shard: the release, the gateway at the root (and, when
    /// `with_gateway`, among the components) and the shard's applications.
    pub(super) fn context(&self, with_gateway: bool, applications: &Applications) -> Result<Value, RenderError> {
        let values = self.values;
        let sa = &values.service_account;
        let root = Root {
            release: ReleaseInfo { name: self.release, namespace: self.namespace, service: MANAGED_BY },
            chart: ChartInfo {
                name: &self.chart.metadata.name,
                version: &self.chart.metadata.version,
                app_version: &self.chart.metadata.app_version,
            },
            fullname: &self.fullname,
            labels: &self.common,
            image_pull_secrets: &values.image_pull_secrets,
            service_account: ServiceAccountContext {
                create: sa.create,
                automount: sa.automount,
                name: &self.sa_name,
                annotations: &sa.annotations,
            },
            service_monitor: values.gateway.export_prometheus_metrics,
            gateway: &self.gateway,
            takeoff_gateway: self.takeoff_gateway,
            model_gateway: self.model_gateway.as_ref().filter(|_| with_gateway),
            components: Components {
                gateway: (with_gateway && self.takeoff_gateway).then_some(&self.gateway),
                applications: &applications.contexts,
            },
        };
        serde_json::to_value(&root).map_err(|e| RenderError::chart("values", e))
    }
}

fn check_release(release: &str, namespace: &str) -> Result<(), InputError> {
    if !is_dns_label(release) {
        return Err(InputError::new(
            "metadata.name",
            format!("`{release}` must be a DNS label of at most 63 characters: it is the `app.kubernetes.io/instance` label of every object"),
        ));
    }
    if !is_dns_label(namespace) {
        return Err(InputError::new("metadata.namespace", format!("`{namespace}` is not a valid namespace name")));
    }
    Ok(())
}

/// Labels, selector, pod labels and pod annotations of a component.
struct PodMetadata {
    labels: BTreeMap<String, String>,
    selector: BTreeMap<String, String>,
    pod_labels: BTreeMap<String, String>,
    pod_annotations: BTreeMap<String, String>,
}

fn pod_metadata(
    common: &BTreeMap<String, String>,
    component: &str,
    pod: &PodSettings,
    config_yaml: &str,
) -> PodMetadata {
    let mut labels = common.clone();
    labels.insert(COMPONENT_LABEL.into(), component.to_string());
    let selector: BTreeMap<String, String> = [model_orchestra_api::keys::NAME_LABEL, INSTANCE_LABEL, COMPONENT_LABEL]
        .into_iter()
        .map(|k| (k.to_string(), labels[k].clone()))
        .collect();
    // The user's pod labels cannot override the selector, or the Deployment would not
    // select its own pods.
    let mut pod_labels = labels.clone();
    pod_labels.extend(pod.pod_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    pod_labels.extend(selector.clone());
    let mut pod_annotations = pod.pod_annotations.clone();
    pod_annotations.insert(CONFIG_CHECKSUM_ANNOTATION.into(), hex_sha256(config_yaml));
    PodMetadata { labels, selector, pod_labels, pod_annotations }
}

fn hex_sha256(text: &str) -> String {
    use std::fmt::Write;
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// `repository:tag`; an empty tag is the chart's appVersion plus `-<suffix>`, a `sha256:`
/// tag pins a digest.
fn image(image: &crate::model::ImageSettings, app_version: &str, suffix: &str) -> String {
    let repo = &image.repository;
    match image.tag.as_str() {
        "" => format!("{repo}:{app_version}-{suffix}"),
        digest if digest.starts_with("sha256:") => format!("{repo}@{digest}"),
        tag => format!("{repo}:{tag}"),
    }
}

/// The top-level keys of a serialised config, snake_cased; nested values kept as given.
fn snake_keys(config: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(config) {
        Ok(Value::Object(map)) => map.into_iter().map(|(k, v)| (snake_case(&k), v)).collect(),
        _ => Map::new(),
    }
}

/// The most a ConfigMap holds (the API server refuses more).
const MAX_CONFIG_MAP_BYTES: usize = 1024 * 1024;

/// A config.yaml that fits its ConfigMap, or an error on the values that made it.
fn fits(config: String, field: &str) -> Result<String, InputError> {
    if config.len() > MAX_CONFIG_MAP_BYTES {
        return Err(InputError::new(
            field,
            format!("config.yaml would be {} bytes; a ConfigMap holds at most {MAX_CONFIG_MAP_BYTES}", config.len()),
        ));
    }
    Ok(config)
}

fn config_yaml(rules: &ContractRules, server_config: Map<String, Value>, readers: Map<String, Value>) -> String {
    let mut server = Map::new();
    server.insert("server_config".into(), Value::Object(server_config));
    server.insert("readers_config".into(), Value::Object(readers));
    let mut doc = Map::new();
    doc.insert(rules.config_root.into(), Value::Object(server));
    super::config_yaml::to_yaml(&Value::Object(doc))
}

/// Ingress rules with what a valid `networking.k8s.io/v1` Ingress needs (the contract's
/// rules): a path (`/`) and a pathType (`ImplementationSpecific`) for every host, backed by
/// the component's first Service port.
fn ingress(pod: &PodSettings, name: &str, field: &str) -> Result<Option<IngressRules>, InputError> {
    let Some(settings) = pod.ingress.as_ref().filter(|i| i.enabled) else {
        return Ok(None);
    };
    let service_ports: &[ServicePort] = pod.service.as_ref().map_or(&[], |s| &s.ports);
    let Some(first) = service_ports.first() else {
        return Err(InputError::new(
            format!("{field}.service.ports"),
            "an enabled ingress needs at least one service port to route to",
        ));
    };
    if settings.hosts.is_empty() {
        return Err(InputError::new(format!("{field}.ingress.hosts"), "an enabled ingress needs at least one host"));
    }
    let backend = IngressBackend {
        service: Some(IngressServiceBackend {
            name: name.to_string(),
            port: Some(ServiceBackendPort { number: Some(first.port), ..Default::default() }),
        }),
        ..Default::default()
    };
    let rules = settings
        .hosts
        .iter()
        .map(|h| {
            let given = h.paths.as_deref().unwrap_or_default();
            let default_path = [model_orchestra_api::values::IngressPath::default()];
            let paths = if given.is_empty() { &default_path[..] } else { given };
            let paths = paths
                .iter()
                .map(|p| HTTPIngressPath {
                    path: Some(p.path.clone().unwrap_or_else(|| "/".into())),
                    path_type: p.path_type.map_or_else(|| "ImplementationSpecific".into(), path_type_name),
                    backend: backend.clone(),
                })
                .collect();
            IngressRule { host: h.host.clone().filter(|s| !s.is_empty()), http: Some(HTTPIngressRuleValue { paths }) }
        })
        .collect();
    Ok(Some(IngressRules { rules }))
}

fn path_type_name(t: model_orchestra_api::values::PathType) -> String {
    match t {
        model_orchestra_api::values::PathType::Exact => "Exact",
        model_orchestra_api::values::PathType::Prefix => "Prefix",
        model_orchestra_api::values::PathType::ImplementationSpecific => "ImplementationSpecific",
    }
    .into()
}

fn pod_context<'a>(
    pod: &'a PodSettings,
    resources: ResourceRequirements,
    tolerations: Vec<Toleration>,
) -> PodContext<'a> {
    PodContext {
        image: ImagePolicy { pull_policy: pod.image.pull_policy },
        pod_security_context: &pod.pod_security_context,
        security_context: &pod.security_context,
        ports: &pod.ports,
        liveness_probe: &pod.liveness_probe,
        readiness_probe: &pod.readiness_probe,
        resources,
        volumes: &pod.volumes,
        volume_mounts: &pod.volume_mounts,
        node_selector: &pod.node_selector,
        tolerations,
        affinity: &pod.affinity,
        service: pod.service.as_ref().map(|s| ServiceContext { type_: s.type_, ports: &s.ports }),
        ingress: pod.ingress.as_ref().map(|i| IngressContext {
            class_name: &i.class_name,
            annotations: &i.annotations,
            tls: &i.tls,
        }),
    }
}

fn gateway_component<'a>(
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
        values: pod_context(pod, pod.resources.clone(), pod.tolerations.clone()),
    })
}

struct AppContext<'a> {
    rules: &'static ContractRules,
    field: &'a str,
    fullname: &'a str,
    gateway_name: &'a str,
    namespace: &'a str,
    internal_port: i32,
}

fn env_var((name, value): (&str, &str)) -> EnvVar {
    EnvVar { name: name.to_string(), value: Some(value.to_string()), ..Default::default() }
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

/// The pod-template annotation naming an application's revision (verified promotion): a
/// hash of what its pods run — image, env, configuration, volumes, pod settings.
pub use model_orchestra_api::keys::REVISION_ANNOTATION;

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
fn application_components<'a>(
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
        let base = super::group::GroupBase {
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
        production.dllama = Some(super::group::group(app, d, base)?);
        return Ok(vec![production]);
    }
    if let EngineModel::Ollama(o) = &app.engine {
        as_ollama(&mut production, app, o, template_env);
    }
    if app.promotion.is_none() {
        return Ok(vec![production]);
    }
    let rev = revision(&production);
    let group = format!("verify-{rev}");
    let mut candidate =
        application_component(ctx, app, template_env, common, app_version, Role::Candidate { group: &group })?;
    if let EngineModel::Ollama(o) = &app.engine {
        as_ollama(&mut candidate, app, o, template_env);
    }
    production.pod_annotations.insert(REVISION_ANNOTATION.into(), rev.clone());
    candidate.pod_annotations.insert(REVISION_ANNOTATION.into(), rev);
    if let EngineModel::Ollama(o) = &app.engine {
        for c in [&mut production, &mut candidate] {
            c.pod_annotations.insert(super::MODELS_ANNOTATION.into(), o.models.join(","));
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
        values: pod_context(pod, resources, tolerations),
    })
}

/// Makes an application's context (or its candidate's) an Ollama one: no Takeoff
/// configuration (its checksum would roll pods for nothing), no queue-based scaler (the
/// gateway's queue is Takeoff's), and Ollama's container, Service and readiness gate.
fn as_ollama(
    c: &mut ComponentContext,
    app: &ApplicationModel,
    o: &crate::model::OllamaSettings,
    template_env: &[EnvVar],
) {
    c.pod_annotations.remove(CONFIG_CHECKSUM_ANNOTATION);
    c.scaler = None;
    // The chart's default models volume is memory-backed, which would hold every model
    // twice in memory (the file and the loaded weights): a disk one unless the user chose.
    let chose_volume =
        app.origin.own_set.contains(&"modelsVolume") || app.origin.template_set.contains(&"modelsVolume");
    let base = super::ollama::OllamaBase {
        service: c.meta.clone(),
        env: application_env(&app.own_env, template_env, Vec::new()),
        models_volume: if chose_volume { c.models_volume.as_deref() } else { None },
    };
    c.ollama = Some(super::ollama::ollama(app, o, base));
    // A candidate keeps its one replica: only the serving revision sleeps.
    if !c.candidate {
        c.idle_seconds = app.sleep.map(|s| s.idle_seconds.to_string());
    }
}

static RECREATE: std::sync::LazyLock<k8s_openapi::api::apps::v1::DeploymentStrategy> = std::sync::LazyLock::new(|| {
    k8s_openapi::api::apps::v1::DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None }
});

/// The label (on the download Job) and pod-template annotation (on the Deployment) naming
/// the revision of an application's model: its name, the downloader and the refresh value,
/// hashed. A new revision is a new Job, and rolls the application's pods.
pub use model_orchestra_api::keys::MODEL_REVISION_LABEL;

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
        EngineModel::DistributedLlama(_) => super::group::model_dir_name(&model),
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
    use crate::model::ImageSettings;

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

    #[test]
    fn checksum_is_hex_sha256() {
        assert_eq!(hex_sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn empty_tag_defaults_to_app_version_and_suffix() {
        let settings = |tag: &str| ImageSettings {
            repository: "tytn/takeoff-pro".into(),
            pull_policy: PullPolicy::IfNotPresent,
            tag: tag.into(),
        };
        assert_eq!(image(&settings(""), "1.2.3", "gpu"), "tytn/takeoff-pro:1.2.3-gpu");
        assert_eq!(image(&settings("sha256:abc"), "1", "cpu"), "tytn/takeoff-pro@sha256:abc");
    }
}
