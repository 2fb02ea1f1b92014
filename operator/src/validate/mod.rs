//! What the API server would refuse, checked before any request, and what it would accept
//! but is almost certainly wrong: the model of a ModelOrchestra against the Kubernetes rules
//! for the objects the chart renders from it (pod, containers, Service, Ingress, labels and
//! annotations, quantities). A render that passes never meets a refusal from the API server
//! for a reason the values could show — the property test against the real API server
//! holds it to that.
//!
//! Every mistake is reported at once, each naming the field where the user wrote the value:
//! an application's own field when it sets it, else `spec.applicationTemplate`'s.

mod bounds;
mod engine;
mod field_path;
mod network;
mod pod;
mod quantity;
mod warnings;

use std::collections::BTreeMap;

use model_orchestra_api::names;

use crate::error::InputError;
use crate::model::{Model, ModelCacheSettings, Origin, PodSettings, ScalingSettings};
use field_path::FieldPath;

/// What the checks found: errors (nothing may be applied) and warnings (legal, but almost
/// certainly not what the user meant).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Findings {
    pub errors: Vec<InputError>,
    pub warnings: Vec<InputError>,
}

/// Checks every value of the model.
pub(crate) fn model(m: &Model) -> Findings {
    let mut errors = Vec::new();
    bounds::spec(&m.written, &mut errors);
    names_of(m, &mut errors);
    component(&m.gateway.pod, &m.gateway.origin, &mut errors);
    errors.extend(pod::env_list(&m.template_env, &FieldPath::new("spec.applicationTemplate.env")).err());
    for app in &m.applications {
        let origin = &app.origin;
        errors.extend(pod::env_list(&app.own_env, &FieldPath::new(&origin.own).field("env")).err());
        component(&app.pod, origin, &mut errors);
        if let Some(volume) = &app.models_volume {
            errors.extend(models_volume(volume, &app.pod, &origin.path("modelsVolume")).err());
        }
        if let Some(cache) = &app.model_cache {
            model_cache(cache, &origin.path("modelCache"), &mut errors);
        }
        if app.scaling.enabled {
            errors.extend(scaled_object(&app.scaling, &origin.path("scaling")).err());
        }
        if let Some(strategy) = &app.strategy {
            errors.extend(deployment_strategy(strategy, &origin.path("strategy")).err());
        }
        if let Some(promotion) = &app.promotion {
            promotion_settings(promotion, &origin.path("promotion"), &mut errors);
        }
        engine::errors(app, &m.written, &mut errors);
        engine::sleep_errors(app, m.has_model_gateway(), &mut errors);
    }
    engine::unnamed_beside_open_engines(m, &mut errors);
    // One error per field: a field both checks reach is reported once.
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.field.clone()));
    Findings { errors, warnings: warnings::of(m) }
}

/// The models volume: a volume the API server accepts, whose name no other pod volume
/// takes (the chart's `config` and `dshm`, the user's `volumes`).
fn models_volume(
    volume: &k8s_openapi::api::core::v1::Volume,
    pod: &PodSettings,
    field: &str,
) -> Result<(), InputError> {
    if !names::is_dns_label(&volume.name) {
        return Err(InputError::new(
            format!("{field}.name"),
            format!("`{}` is not {}", volume.name, names::DNS_LABEL_RULE),
        ));
    }
    if ["config", "dshm"].contains(&volume.name.as_str()) || pod.volumes.iter().any(|v| v.name == volume.name) {
        return Err(InputError::new(
            format!("{field}.name"),
            format!("`{}` is the name of another volume of the pod; choose another", volume.name),
        ));
    }
    Ok(())
}

/// The model cache's claim: a size the API server parses as a quantity (it answers a
/// malformed one with a 500, not a validation error), and access modes it knows.
fn model_cache(cache: &ModelCacheSettings, field: &str, out: &mut Vec<InputError>) {
    match quantity::parse(&cache.size) {
        Ok(q) if q.value <= 0.0 => out.push(InputError::new(
            format!("{field}.size"),
            format!("`{}` must be greater than zero (e.g. 100Gi)", cache.size),
        )),
        Ok(_) => {}
        Err(e) => out.push(InputError::new(format!("{field}.size"), format!("{e}; for storage, use e.g. 40Gi or 40G"))),
    }
    const MODES: [&str; 4] = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"];
    for (i, mode) in cache.access_modes.iter().enumerate() {
        if !MODES.contains(&mode.as_str()) {
            out.push(InputError::new(
                format!("{field}.accessModes[{i}]"),
                format!("`{mode}` is not an access mode: one of {}", MODES.join(", ")),
            ));
        }
    }
    if cache.access_modes.is_empty() {
        out.push(InputError::new(format!("{field}.accessModes"), "a claim needs at least one access mode"));
    }
    if cache.backoff_limit < 0 {
        out.push(InputError::new(format!("{field}.downloader.backoffLimit"), "must be 0 or more"));
    }
}

/// A Deployment strategy the API server accepts: `RollingUpdate` (its surge and
/// unavailability as counts or percentages, not both zero) or `Recreate` (without a
/// rolling update).
fn deployment_strategy(s: &k8s_openapi::api::apps::v1::DeploymentStrategy, field: &str) -> Result<(), InputError> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let type_ = s.type_.as_deref().unwrap_or("RollingUpdate");
    match type_ {
        "Recreate" if s.rolling_update.is_some() => {
            return Err(InputError::new(format!("{field}.rollingUpdate"), "may not be set when type is Recreate"));
        }
        "Recreate" | "RollingUpdate" => {}
        other => {
            return Err(InputError::new(format!("{field}.type"), format!("`{other}` is not Recreate or RollingUpdate")))
        }
    }
    let Some(r) = &s.rolling_update else { return Ok(()) };
    // A count, or a percentage `N%`; unavailability at most 100%.
    let amount = |v: &Option<IntOrString>, name: &str, max_percent: Option<i64>| -> Result<Option<i64>, InputError> {
        let field = format!("{field}.rollingUpdate.{name}");
        match v {
            None => Ok(None),
            Some(IntOrString::Int(n)) if *n < 0 => Err(InputError::new(field, format!("{n} must be 0 or more"))),
            Some(IntOrString::Int(n)) => Ok(Some(i64::from(*n))),
            Some(IntOrString::String(p)) => {
                let n: i64 =
                    p.strip_suffix('%').and_then(|n| n.parse().ok()).filter(|n| *n >= 0).ok_or_else(|| {
                        InputError::new(&field, format!("`{p}` is not a count or a percentage like 25%"))
                    })?;
                match max_percent {
                    Some(max) if n > max => Err(InputError::new(field, format!("`{p}` is over {max}%"))),
                    _ => Ok(Some(n)),
                }
            }
        }
    };
    let surge = amount(&r.max_surge, "maxSurge", None)?;
    let unavailable = amount(&r.max_unavailable, "maxUnavailable", Some(100))?;
    if surge == Some(0) && unavailable == Some(0) {
        return Err(InputError::new(
            format!("{field}.rollingUpdate.maxUnavailable"),
            "may not be 0 when maxSurge is 0: the rollout could never replace a pod",
        ));
    }
    Ok(())
}

/// A prompt to send and an `expect` that is a regular expression.
fn promotion_settings(p: &crate::model::PromotionSettings, field: &str, out: &mut Vec<InputError>) {
    if p.prompt.trim().is_empty() {
        out.push(InputError::new(format!("{field}.prompt"), "must not be empty: it is what the candidate is asked"));
    }
    if let Err(e) = crate::model::expectation(&p.expect) {
        let first = e.to_string().lines().last().unwrap_or_default().to_string();
        out.push(InputError::new(
            format!("{field}.expect"),
            format!("`{}` is not a regular expression: {first}", p.expect),
        ));
    }
    for (name, value) in [
        ("maxTokens", p.max_tokens),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
        ("deadlineSeconds", p.deadline_seconds),
    ] {
        if value < 1 {
            out.push(InputError::new(format!("{field}.{name}"), format!("{value} is less than the minimum 1")));
        }
    }
}

/// What KEDA's ScaledObject CRD refuses beyond the ModelOrchestra schema's own bounds.
fn scaled_object(s: &ScalingSettings, field: &str) -> Result<(), InputError> {
    check_annotations(&s.annotations, &format!("{field}.annotations"))?;
    let spec = &s.spec;
    if let Some(p) = spec.polling_interval.filter(|p| *p < 1) {
        return Err(InputError::new(
            format!("{field}.spec.pollingInterval"),
            format!("{p} is less than KEDA's minimum 1"),
        ));
    }
    if let Some(max) = spec.max_replica_count.filter(|m| *m < 1) {
        return Err(InputError::new(
            format!("{field}.spec.maxReplicaCount"),
            format!("{max} is less than KEDA's minimum 1"),
        ));
    }
    // KEDA's own default maximum is 100.
    let max = spec.max_replica_count.unwrap_or(100);
    if let Some(min) = spec.min_replica_count.filter(|m| *m > max) {
        return Err(InputError::new(
            format!("{field}.spec.minReplicaCount"),
            format!("{min} is greater than maxReplicaCount ({max})"),
        ));
    }
    Ok(())
}

/// The application names, the ServiceAccount and the release-wide names.
fn names_of(m: &Model, out: &mut Vec<InputError>) {
    for app in &m.applications {
        let field = format!("spec.applications.{}", app.key);
        if !names::is_dns_label(&app.key) || app.key.len() > names::MAX_APPLICATION_NAME {
            out.push(InputError::new(
                field,
                format!(
                    "application names are DNS labels of at most {} characters (lower-case letters, digits and `-`, \
                     starting and ending with a letter or digit): the component label `application-<name>` must fit 63",
                    names::MAX_APPLICATION_NAME
                ),
            ));
        } else if app.key == "gateway" {
            out.push(InputError::new(
                field,
                "`gateway` is reserved: the gateway's objects are named `<fullname>-gateway`; choose another application name",
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, s) in m.image_pull_secrets.iter().enumerate() {
        if !s.name.is_empty() {
            out.extend(dns_subdomain(&s.name, format!("spec.imagePullSecrets[{i}].name")).err());
        }
        // Server-side apply merges the list by name.
        if !seen.insert(&s.name) {
            out.push(InputError::new(
                format!("spec.imagePullSecrets[{i}].name"),
                format!("`{}` is listed twice", s.name),
            ));
        }
    }
    let sa = &m.service_account;
    if !sa.name.is_empty() && !names::is_dns_subdomain(&sa.name) {
        out.push(InputError::new(
            "spec.serviceAccount.name",
            format!("`{}` is not a valid ServiceAccount name ({})", sa.name, names::DNS_SUBDOMAIN_RULE),
        ));
    }
    out.extend(check_annotations(&sa.annotations, "spec.serviceAccount.annotations").err());
}

/// One component's pod, and its Service and Ingress where it has them.
fn component(pod: &PodSettings, at: &Origin, out: &mut Vec<InputError>) {
    pod::pod(pod, at, out);
    if let Some(service) = &pod.service {
        out.extend(network::service(service, &FieldPath::new(at.path("service"))).err());
    }
    if let Some(ingress) = &pod.ingress {
        out.extend(network::ingress(ingress, &FieldPath::new(at.path("ingress"))).err());
    }
}

/// A name that must be a DNS subdomain (a Secret's, a ConfigMap's, a claim's, an
/// IngressClass's).
pub(super) fn dns_subdomain(name: &str, field: impl Into<String>) -> Result<(), InputError> {
    if names::is_dns_subdomain(name) {
        return Ok(());
    }
    Err(InputError::new(field, format!("`{name}` is not {}", names::DNS_SUBDOMAIN_RULE)))
}

/// Label keys and values.
pub(crate) fn check_labels(labels: &BTreeMap<String, String>, field: &str) -> Result<(), InputError> {
    for (k, v) in labels {
        if !names::is_qualified_name(k) {
            return Err(InputError::new(
                format!("{field}.{k}"),
                format!("the key is not {}", names::QUALIFIED_NAME_RULE),
            ));
        }
        if !names::is_label_value(v) {
            return Err(InputError::new(format!("{field}.{k}"), format!("`{v}` is not {}", names::LABEL_VALUE_RULE)));
        }
    }
    Ok(())
}

/// Annotation keys, and the total size the API server allows (256 KiB).
pub(crate) fn check_annotations(annotations: &BTreeMap<String, String>, field: &str) -> Result<(), InputError> {
    for k in annotations.keys() {
        if !names::is_qualified_name(k) {
            return Err(InputError::new(
                format!("{field}.{k}"),
                format!("the key is not {}", names::QUALIFIED_NAME_RULE),
            ));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > 256 * 1024 {
        return Err(InputError::new(field, format!("annotations total {size} bytes; Kubernetes allows 262144")));
    }
    Ok(())
}
