//! The template context: Helm's `Release`, `Chart` and `Values`, plus what Helm charts
//! compute in `_helpers.tpl` — names, labels, the merged application values, env
//! precedence, GPU defaults, each pod's `config.yaml` and its checksum. Computing these in
//! Rust keeps the templates about structure only, and every value they print is data that
//! the `json` helper serialises.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Serialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::names::{self, check_generated, is_dns_label, is_dns_subdomain, is_label_value, is_qualified_name};
use super::values::{deep_merge, snake_case};
use super::{Chart, Component};
use crate::api::{Application, Device, Gateway, ModelOrchestraSpec};
use crate::error::{InputError, RenderError};

/// The label naming who manages an object; the operator prunes only objects carrying it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`] (Helm's `.Release.Service`).
pub const MANAGED_BY: &str = "model-orchestra-operator";
/// Pod-template annotation holding the checksum of the pod's configuration.
pub const CONFIG_CHECKSUM_ANNOTATION: &str = "checksum/config";
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
const REQUIRED_APP_ENV: [(&str, &str); 2] = [("TAKEOFF_ADD_READER_ID_SUFFIX", "true"), ("TAKEOFF_HEADLESS", "true")];

/// One pod-running component: the gateway or an application.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ComponentValues {
    /// Name of every object of this component (and of its container).
    name: String,
    /// What the `metadata` partial prints (a small object, because Handlebars clones a
    /// partial's context).
    meta: Value,
    /// The application's key in `spec.applications`; absent for the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    app: Option<String>,
    selector_labels: BTreeMap<String, String>,
    pod_labels: BTreeMap<String, String>,
    pod_annotations: BTreeMap<String, String>,
    image: String,
    env: Vec<EnvVar>,
    config_yaml: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    replicas: Option<i32>,
    /// Ingress rules with defaults filled in, when the ingress is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    ingress: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scaler: Option<Value>,
    /// The component's merged values, with GPU defaults applied.
    values: Value,
}

/// The template context for one ModelOrchestra, and the name of each component's objects.
pub(super) struct Built {
    pub context: Value,
    pub components: Vec<(String, Component)>,
}

/// Builds the template context for one ModelOrchestra.
pub(super) fn build(chart: &Chart, release: &str, namespace: &str, spec: &ModelOrchestraSpec) -> Result<Built, RenderError> {
    check_release(release, namespace)?;
    let mut values = chart.defaults.clone();
    let spec_json = serde_json::to_value(spec).map_err(|e| RenderError::chart("values", e))?;
    deep_merge(&mut values, &spec_json);
    // Everything but the applications, typed (each application is typed on its own below).
    let mut globals = Map::new();
    for (k, v) in values.as_object().into_iter().flatten().filter(|(k, _)| *k != "applications") {
        globals.insert(k.clone(), v.clone());
    }
    let merged: ModelOrchestraSpec = serde_json::from_value(Value::Object(globals)).map_err(|e| RenderError::chart("values.yaml", e))?;

    let meta = &chart.metadata;
    let name_override = merged.name_override.as_deref().unwrap_or_default();
    let fullname = names::fullname(release, &meta.name, name_override, merged.fullname_override.as_deref().unwrap_or_default());
    let chart_name = if name_override.is_empty() { meta.name.as_str() } else { name_override };
    if !is_label_value(chart_name) {
        return Err(InputError::new("spec.nameOverride", "must be a valid label value (≤63 of A-Z a-z 0-9 - _ .)").into());
    }
    let common = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), chart_name.to_string()),
        ("app.kubernetes.io/instance".to_string(), release.to_string()),
        ("app.kubernetes.io/version".to_string(), meta.app_version.clone()),
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        ("helm.sh/chart".to_string(), format!("{}-{}", meta.name, meta.version).replace('+', "_")),
    ]);

    let sa = merged.service_account.unwrap_or_default();
    let sa_name = match (sa.create.unwrap_or(true), sa.name.as_deref().unwrap_or_default()) {
        (_, name) if !name.is_empty() => name.to_string(),
        (true, _) => fullname.clone(),
        (false, _) => "default".to_string(),
    };
    if !is_dns_subdomain(&sa_name) {
        return Err(InputError::new("spec.serviceAccount.name", format!("`{sa_name}` is not a valid ServiceAccount name (DNS subdomain)")).into());
    }
    check_annotations(sa.annotations.as_ref(), "spec.serviceAccount.annotations")?;

    let gateway_values = values.get("gateway").cloned().unwrap_or(Value::Null);
    let gw = merged.gateway.unwrap_or_default();
    let gateway_name = format!("{fullname}-gateway");
    check_generated(&gateway_name, if merged.fullname_override.as_deref().unwrap_or_default().is_empty() { "metadata.name" } else { "spec.fullnameOverride" })?;
    let internal_port = gw.config.as_ref().and_then(|c| c.internal_port).unwrap_or(3005);
    let gateway = gateway_component(&gw, gateway_values, &gateway_name, &common, &meta.app_version)?;

    let template_json = values.get("applicationTemplate").cloned().unwrap_or(Value::Null);
    let template_env = merged.application_template.as_ref().and_then(|t| t.env.clone()).unwrap_or_default();
    let mut applications = Vec::new();
    let empty = Map::new();
    let apps_json = values.get("applications").and_then(Value::as_object).unwrap_or(&empty);
    for (key, app_json) in apps_json {
        let field = format!("spec.applications.{key}");
        if !is_dns_label(key) {
            return Err(InputError::new(
                &field,
                "application names must be DNS labels (lower-case letters, digits and `-`, starting and ending with a letter or digit, at most 63)",
            )
            .into());
        }
        if key == "gateway" {
            return Err(InputError::new(
                &field,
                "`gateway` is reserved: the gateway's objects are named `<fullname>-gateway`; choose another application name",
            )
            .into());
        }
        let mut app_values = template_json.clone();
        deep_merge(&mut app_values, app_json);
        let app: Application = serde_json::from_value(app_values.clone()).map_err(|e| InputError::new(&field, e.to_string()))?;
        let own_env = spec.applications.as_ref().and_then(|a| a.get(key)).and_then(|a| a.env.clone()).unwrap_or_default();
        let ctx = AppContext { key, field: &field, fullname: &fullname, gateway_name: &gateway_name, namespace, internal_port };
        applications.push(application_component(&ctx, &app, app_values, &own_env, &template_env, &common, &meta.app_version)?);
    }

    let mut names = Vec::with_capacity(applications.len() + 1);
    names.push((gateway.name.clone(), Component::Gateway));
    names.extend(applications.iter().filter_map(|a| Some((a.name.clone(), Component::Application(a.app.clone()?)))));
    let gateway = serde_json::to_value(&gateway).map_err(|e| RenderError::chart("values", e))?;
    let mut components = Vec::with_capacity(applications.len() + 1);
    components.push(gateway.clone());
    for app in &applications {
        components.push(serde_json::to_value(app).map_err(|e| RenderError::chart("values", e))?);
    }
    // Built by move: `json!` would serialise (deep-copy) every interpolated value.
    let mut ctx = Map::new();
    ctx.insert("Release".into(), json!({"Name": release, "Namespace": namespace, "Service": MANAGED_BY}));
    ctx.insert("Chart".into(), json!({"Name": meta.name, "Version": meta.version, "AppVersion": meta.app_version}));
    ctx.insert("Values".into(), values);
    ctx.insert("fullname".into(), Value::String(fullname));
    ctx.insert("labels".into(), Value::Object(common.into_iter().map(|(k, v)| (k, Value::String(v))).collect()));
    ctx.insert("serviceAccountName".into(), Value::String(sa_name));
    ctx.insert("gateway".into(), gateway);
    ctx.insert("components".into(), Value::Array(components));
    Ok(Built { context: Value::Object(ctx), components: names })
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

fn check_labels(labels: Option<&BTreeMap<String, String>>, field: &str) -> Result<(), InputError> {
    for (k, v) in labels.into_iter().flatten() {
        if !is_qualified_name(k) {
            return Err(InputError::new(format!("{field}.{k}"), "not a valid label key ([prefix/]name)"));
        }
        if !is_label_value(v) {
            return Err(InputError::new(
                format!("{field}.{k}"),
                format!("`{v}` is not a valid label value (≤63 of A-Z a-z 0-9 - _ ., starting and ending alphanumeric)"),
            ));
        }
    }
    Ok(())
}

fn check_annotations(annotations: Option<&BTreeMap<String, String>>, field: &str) -> Result<(), InputError> {
    for k in annotations.into_iter().flatten().map(|(k, _)| k) {
        if !is_qualified_name(k) {
            return Err(InputError::new(format!("{field}.{k}"), "not a valid annotation key ([prefix/]name)"));
        }
    }
    Ok(())
}

/// Labels, pod labels and annotations shared by both component kinds.
fn pod_metadata(
    common: &BTreeMap<String, String>,
    component: &str,
    pod_labels: Option<&BTreeMap<String, String>>,
    pod_annotations: Option<&BTreeMap<String, String>>,
    config_yaml: &str,
    field: &str,
) -> Result<[BTreeMap<String, String>; 4], InputError> {
    check_labels(pod_labels, &format!("{field}.podLabels"))?;
    check_annotations(pod_annotations, &format!("{field}.podAnnotations"))?;
    let mut labels = common.clone();
    labels.insert("app.kubernetes.io/component".into(), component.to_string());
    let selector: BTreeMap<String, String> = ["app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"]
        .into_iter()
        .map(|k| (k.to_string(), labels[k].clone()))
        .collect();
    // The user's pod labels cannot override the selector, or the Deployment would not
    // select its own pods.
    let mut pod_labels_out = labels.clone();
    pod_labels_out.extend(pod_labels.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
    pod_labels_out.extend(selector.clone());
    let mut annotations: BTreeMap<String, String> = pod_annotations.cloned().unwrap_or_default();
    annotations.insert(CONFIG_CHECKSUM_ANNOTATION.into(), hex_sha256(config_yaml));
    Ok([labels, selector, pod_labels_out, annotations])
}

fn hex_sha256(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn image(image: Option<&crate::api::Image>, app_version: &str, suffix: &str) -> String {
    let repo = image.and_then(|i| i.repository.as_deref()).unwrap_or("tytn/takeoff-pro");
    match image.and_then(|i| i.tag.as_deref()).unwrap_or_default() {
        "" => format!("{repo}:{app_version}-{suffix}"),
        digest if digest.starts_with("sha256:") => format!("{repo}@{digest}"),
        tag => format!("{repo}:{tag}"),
    }
}

/// Top-level keys snake_cased; nested values kept as given.
fn snake_keys(map: Option<&Value>) -> Map<String, Value> {
    map.and_then(Value::as_object).into_iter().flatten().map(|(k, v)| (snake_case(k), v.clone())).collect()
}

fn config_yaml(server_config: Map<String, Value>, readers: Map<String, Value>) -> String {
    let doc = json!({"model-orchestra": {"server_config": server_config, "readers_config": readers}});
    super::config_yaml::to_yaml(&doc)
}

/// Ingress rules with the defaults a valid `networking.k8s.io/v1` Ingress needs: a path
/// (`/`) and a pathType (`ImplementationSpecific`) for every host, backed by the
/// component's first Service port.
fn ingress(values: &Value, name: &str, service_ports: &[k8s_openapi::api::core::v1::ServicePort], field: &str) -> Result<Option<Value>, InputError> {
    let ing = &values["ingress"];
    if ing["enabled"] != Value::Bool(true) {
        return Ok(None);
    }
    let annotations: Option<BTreeMap<String, String>> = serde_json::from_value(ing["annotations"].clone()).unwrap_or_default();
    check_annotations(annotations.as_ref(), &format!("{field}.ingress.annotations"))?;
    let backend = json!({"service": {"name": name, "port": {"number": service_ports.first().map(|p| p.port)}}});
    if service_ports.is_empty() {
        return Err(InputError::new(format!("{field}.service.ports"), "an enabled ingress needs at least one service port to route to"));
    }
    let hosts = ing["hosts"].as_array().cloned().unwrap_or_default();
    if hosts.is_empty() {
        return Err(InputError::new(format!("{field}.ingress.hosts"), "an enabled ingress needs at least one host"));
    }
    let rules: Vec<Value> = hosts
        .iter()
        .map(|h| {
            let mut paths: Vec<Value> = h["paths"].as_array().cloned().unwrap_or_default();
            if paths.is_empty() {
                paths.push(json!({}));
            }
            let paths: Vec<Value> = paths
                .iter()
                .map(|p| {
                    json!({
                        "path": p.get("path").and_then(Value::as_str).unwrap_or("/"),
                        "pathType": p.get("pathType").and_then(Value::as_str).unwrap_or("ImplementationSpecific"),
                        "backend": backend,
                    })
                })
                .collect();
            let mut rule = json!({"http": {"paths": paths}});
            if let Some(host) = h.get("host").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                rule["host"] = json!(host);
            }
            rule
        })
        .collect();
    Ok(Some(json!({"rules": rules})))
}

fn gateway_component(gw: &Gateway, mut values: Value, name: &str, common: &BTreeMap<String, String>, app_version: &str) -> Result<ComponentValues, InputError> {
    let field = "spec.gateway";
    let env_user = gw.env.clone().unwrap_or_default();
    let mut env = env_user.clone();
    if !env_user.iter().any(|e| e.name == REQUIRED_APP_ENV[0].0) {
        env.push(env_var(REQUIRED_APP_ENV[0]));
    }
    let server = snake_keys(values.get("config"));
    let config = config_yaml(server, Map::new());
    let [labels, selector_labels, pod_labels, pod_annotations] =
        pod_metadata(common, "gateway", gw.pod_labels.as_ref(), gw.pod_annotations.as_ref(), &config, field)?;
    let service_ports = gw.service.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default();
    let ingress = ingress(&values, name, &service_ports, field)?;
    strip_computed(&mut values);
    Ok(ComponentValues {
        meta: json!({"name": name, "labels": labels}),
        name: name.to_string(),
        app: None,
        selector_labels,
        pod_labels,
        pod_annotations,
        image: image(gw.image.as_ref(), app_version, "cpu"),
        env,
        config_yaml: config,
        replicas: Some(gw.replica_count.unwrap_or(1)),
        ingress,
        scaler: None,
        values,
    })
}

struct AppContext<'a> {
    key: &'a str,
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
/// required ones not already named.
fn application_env(own: &[EnvVar], template: &[EnvVar]) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = Vec::with_capacity(own.len() + template.len() + 2);
    for e in own.iter().chain(template).cloned().chain(REQUIRED_APP_ENV.map(env_var)) {
        if !env.iter().any(|x| x.name == e.name) {
            env.push(e);
        }
    }
    env
}

/// For `device: cuda`: an `nvidia.com/gpu` limit of `tensorParallel` (default 1) unless the
/// user set that resource, and a toleration of the GPU taint unless the user gave tolerations.
fn gpu_defaults(app: &Application) -> (Option<ResourceRequirements>, Option<Vec<Toleration>>) {
    let reader = app.reader_config.clone().unwrap_or_default();
    let mut resources = app.resources.clone();
    let mut tolerations = app.tolerations.clone();
    if reader.device != Some(Device::Cuda) {
        return (resources, tolerations);
    }
    let res = resources.get_or_insert_with(Default::default);
    let user_set = [&res.limits, &res.requests].iter().any(|m| m.as_ref().is_some_and(|m| m.contains_key(GPU_RESOURCE)));
    if !user_set {
        let count = reader.tensor_parallel.unwrap_or(1);
        res.limits.get_or_insert_with(Default::default).insert(GPU_RESOURCE.to_string(), Quantity(count.to_string()));
    }
    if tolerations.as_ref().is_none_or(Vec::is_empty) {
        tolerations = Some(vec![Toleration {
            key: Some(GPU_RESOURCE.to_string()),
            operator: Some("Exists".to_string()),
            effect: Some("NoSchedule".to_string()),
            ..Default::default()
        }]);
    }
    (resources, tolerations)
}

fn application_component(
    ctx: &AppContext,
    app: &Application,
    mut values: Value,
    own_env: &[EnvVar],
    template_env: &[EnvVar],
    common: &BTreeMap<String, String>,
    app_version: &str,
) -> Result<ComponentValues, InputError> {
    let name = format!("{}-{}", ctx.fullname, ctx.key);
    check_generated(&name, ctx.field)?;
    let component = format!("application-{}", ctx.key);
    if component.len() > names::MAX_LABEL {
        return Err(InputError::new(ctx.field, format!("the component label `{component}` would exceed 63 characters: use an application name of at most 51")));
    }

    let mut reader = snake_keys(values.get("readerConfig"));
    reader.insert("internal_gateway_ip".into(), json!(ctx.gateway_name));
    let mut server = Map::new();
    server.insert("internal_port".into(), json!(ctx.internal_port));
    let config = config_yaml(server, Map::from_iter([(ctx.key.to_string(), Value::Object(reader))]));

    let [labels, selector_labels, pod_labels, pod_annotations] =
        pod_metadata(common, &component, app.pod_labels.as_ref(), app.pod_annotations.as_ref(), &config, ctx.field)?;
    let (resources, tolerations) = gpu_defaults(app);
    values["resources"] = serde_json::to_value(resources).expect("serialisable");
    values["tolerations"] = serde_json::to_value(tolerations).expect("serialisable");

    let scaling = app.scaling.clone().unwrap_or_default();
    let scaler = if scaling.enabled == Some(true) {
        check_annotations(scaling.annotations.as_ref(), &format!("{}.scaling.annotations", ctx.field))?;
        let target = scaling.metric_target.as_ref().and_then(|m| m.value).unwrap_or(10).to_string();
        let group = app.reader_config.as_ref().and_then(|r| r.consumer_group.clone()).unwrap_or_else(|| "primary".into());
        let mut metadata = BTreeMap::new();
        metadata.insert("scalerAddress".to_string(), format!("{}.{}.svc.cluster.local:{}", ctx.gateway_name, ctx.namespace, ctx.internal_port));
        metadata.insert(format!("target_{group}"), target.clone());
        metadata.insert(format!("target_{}", ctx.key), target);
        Some(json!({
            "annotations": scaling.annotations.unwrap_or_default(),
            "spec": scaling.spec.unwrap_or_default(),
            "triggerMetadata": metadata,
        }))
    } else {
        None
    };
    let service_ports = app.service.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default();
    let ingress = ingress(&values, &name, &service_ports, ctx.field)?;
    strip_computed(&mut values);

    Ok(ComponentValues {
        meta: json!({"name": name, "labels": labels}),
        replicas: if scaler.is_some() { None } else { Some(app.replica_count.unwrap_or(1)) },
        name,
        app: Some(ctx.key.to_string()),
        selector_labels,
        pod_labels,
        pod_annotations,
        image: image(app.image.as_ref(), app_version, "gpu"),
        env: application_env(own_env, template_env),
        config_yaml: config,
        ingress,
        scaler,
        values,
    })
}

/// Removes the values the context replaces with computed fields, so a template cannot use
/// the raw value by mistake.
fn strip_computed(values: &mut Value) {
    if let Some(obj) = values.as_object_mut() {
        for key in ["env", "replicaCount", "podLabels", "podAnnotations", "readerConfig", "config", "scaling"] {
            obj.remove(key);
        }
    }
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
        let got: Vec<(String, String)> = application_env(&own, &template).into_iter().map(|e| (e.name, e.value.unwrap())).collect();
        let want = [("A", "own"), ("TAKEOFF_HEADLESS", "false"), ("B", "template"), ("TAKEOFF_ADD_READER_ID_SUFFIX", "true")];
        assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
    }

    #[test]
    fn checksum_is_hex_sha256() {
        assert_eq!(hex_sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn empty_tag_defaults_to_app_version_and_suffix() {
        assert_eq!(image(None, "1.2.3", "gpu"), "tytn/takeoff-pro:1.2.3-gpu");
        let digest = crate::api::Image { tag: Some("sha256:abc".into()), ..Default::default() };
        assert_eq!(image(Some(&digest), "1", "cpu"), "tytn/takeoff-pro@sha256:abc");
    }
}
