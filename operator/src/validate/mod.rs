//! What the API server would refuse, checked before any request: the resolved values of a
//! ModelOrchestra against the Kubernetes rules for the objects the chart renders from them
//! (pod, containers, Service, Ingress, labels and annotations). A render that passes never
//! meets a refusal from the API server for a reason the values could show — the property
//! test against the real API server holds it to that — and a failure names the field of the
//! CR to change.
//!
//! Each check names the field where the user wrote the value: an application's own field
//! when it sets it, else `spec.applicationTemplate`'s (lists are replaced whole, so one of
//! them wrote every element).

mod bounds;
pub mod names;
mod network;
mod pod;
mod quantity;

use std::collections::BTreeMap;

use crate::api::{Application, ModelOrchestraSpec};
use crate::chart::resolve::{PodValues, Resolved};
use crate::error::InputError;

/// Checks every value of `values` (resolved from `spec`).
pub(crate) fn resolved(
    values: &Resolved,
    spec: &ModelOrchestraSpec,
    contract: crate::chart::Contract,
) -> Result<(), InputError> {
    bounds::spec(spec)?;
    names_of(values)?;
    let gateway = Origin {
        own: "spec.gateway".into(),
        own_set: spec.gateway.as_ref().map(|g| set_fields_gateway(g)),
        template: None,
    };
    component(&values.gateway.pod, &gateway)?;
    let template_set = spec.application_template.as_ref().map(set_fields);
    pod::env_list(&values.template_env, "spec.applicationTemplate.env")?;
    for app in &values.applications {
        let own = spec.applications.as_ref().and_then(|a| a.get(&app.key));
        let origin = Origin {
            own: format!("spec.applications.{}", app.key),
            own_set: own.map(set_fields),
            template: template_set.clone().map(|set| ("spec.applicationTemplate", set)),
        };
        pod::env_list(&app.own_env, &format!("{}.env", origin.own))?;
        if contract.applications_have_network() {
            component(&app.pod, &origin)?;
        } else {
            pod::pod(&app.pod, &origin)?;
        }
        if let Some(volume) = &app.models_volume {
            models_volume(volume, &app.pod, &origin.path("modelsVolume"))?;
        }
        if app.scaling.enabled {
            scaled_object(&app.scaling, &origin.path("scaling"))?;
        }
    }
    Ok(())
}

/// The models volume: a volume the API server accepts, whose name no other pod volume
/// takes (the chart's `config` and `dshm`, the user's `volumes`).
fn models_volume(volume: &k8s_openapi::api::core::v1::Volume, pod: &PodValues, field: &str) -> Result<(), InputError> {
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

/// What KEDA's ScaledObject CRD refuses beyond the ModelOrchestra schema's own bounds.
fn scaled_object(s: &crate::chart::resolve::ScalingSettings, field: &str) -> Result<(), InputError> {
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

/// The ServiceAccount and the release-wide names.
fn names_of(values: &Resolved) -> Result<(), InputError> {
    let mut seen = std::collections::HashSet::new();
    for (i, s) in values.image_pull_secrets.iter().enumerate() {
        if !s.name.is_empty() && !names::is_dns_subdomain(&s.name) {
            return Err(InputError::new(
                format!("spec.imagePullSecrets[{i}].name"),
                format!("`{}` is not {}", s.name, names::DNS_SUBDOMAIN_RULE),
            ));
        }
        // Server-side apply merges the list by name.
        if !seen.insert(&s.name) {
            return Err(InputError::new(
                format!("spec.imagePullSecrets[{i}].name"),
                format!("`{}` is listed twice", s.name),
            ));
        }
    }
    let sa = &values.service_account;
    if !sa.name.is_empty() && !names::is_dns_subdomain(&sa.name) {
        return Err(InputError::new(
            "spec.serviceAccount.name",
            format!("`{}` is not a valid ServiceAccount name ({})", sa.name, names::DNS_SUBDOMAIN_RULE),
        ));
    }
    check_annotations(&sa.annotations, "spec.serviceAccount.annotations")
}

/// One component's pod, Service and Ingress.
fn component(pod: &PodValues, at: &Origin) -> Result<(), InputError> {
    pod::pod(pod, at)?;
    network::service(&pod.service, &at.path("service"))?;
    network::ingress(&pod.ingress, &at.path("ingress"))
}

/// Where the fields of one component were written: its own values and, for an
/// application, the template's.
pub(crate) struct Origin {
    own: String,
    own_set: Option<Vec<&'static str>>,
    template: Option<(&'static str, Vec<&'static str>)>,
}

impl Origin {
    /// The CR path of `field` (a camelCase field of the component).
    pub(crate) fn path(&self, field: &str) -> String {
        let own_set = self.own_set.as_ref().is_some_and(|s| s.contains(&field));
        match &self.template {
            Some((template, set)) if !own_set && set.contains(&field) => format!("{template}.{field}"),
            _ => format!("{}.{field}", self.own),
        }
    }
}

/// The fields both the gateway and applications have, when set.
macro_rules! set_common {
    ($c:expr) => {{
        let c = $c;
        let mut set = Vec::new();
        let mut add = |on: bool, name: &'static str| {
            if on {
                set.push(name)
            }
        };
        add(c.image.is_some(), "image");
        add(c.env.is_some(), "env");
        add(c.pod_annotations.is_some(), "podAnnotations");
        add(c.pod_labels.is_some(), "podLabels");
        add(c.pod_security_context.is_some(), "podSecurityContext");
        add(c.security_context.is_some(), "securityContext");
        add(c.ports.is_some(), "ports");
        add(c.service.is_some(), "service");
        add(c.ingress.is_some(), "ingress");
        add(c.resources.is_some(), "resources");
        add(c.liveness_probe.is_some(), "livenessProbe");
        add(c.readiness_probe.is_some(), "readinessProbe");
        add(c.volumes.is_some(), "volumes");
        add(c.volume_mounts.is_some(), "volumeMounts");
        add(c.node_selector.is_some(), "nodeSelector");
        add(c.tolerations.is_some(), "tolerations");
        add(c.affinity.is_some(), "affinity");
        set
    }};
}

fn set_fields(a: &Application) -> Vec<&'static str> {
    let mut set = set_common!(a);
    if a.scaling.is_some() {
        set.push("scaling");
    }
    set
}

fn set_fields_gateway(g: &crate::api::Gateway) -> Vec<&'static str> {
    set_common!(g)
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
