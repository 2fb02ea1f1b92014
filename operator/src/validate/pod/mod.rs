//! The pod and its one container: env, ports, probes, resources, volumes and mounts,
//! security contexts, scheduling (node selector, tolerations, affinity), image, labels and
//! annotations — the rules of the API server's pod validation for what the chart renders.
//! One file per part of the pod; this one holds the entry, the image and what they share.

mod containers;
mod probes;
mod resources;
mod scheduling;
mod security;
mod volumes;

pub(super) use containers::{env_list, port_number, port_or_name, protocol};

use super::field_path::FieldPath;
use super::{check_annotations, check_labels};
use crate::error::InputError;
use crate::model::{Origin, PodSettings};

fn err(field: impl Into<String>, message: impl Into<String>) -> Result<(), InputError> {
    Err(InputError::new(field, message))
}

/// An enum field: `value` is one of `allowed`, else the error lists them ("A, B or C").
fn one_of(value: &str, allowed: &[&str], field: &FieldPath) -> Result<(), InputError> {
    if allowed.contains(&value) {
        return Ok(());
    }
    let listed = match allowed {
        [rest @ .., last] if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => allowed.join(", "),
    };
    not_supported(value, &listed, field)
}

/// The error of a value outside an enum, `supported` saying what is.
fn not_supported(value: &str, supported: &str, field: &FieldPath) -> Result<(), InputError> {
    err(field, format!("`{value}` is not supported: {supported}"))
}

/// Every check of the pod; each field's first mistake.
pub(super) fn pod(pod: &PodSettings, at: &Origin, out: &mut Vec<InputError>) {
    let path = |field: &str| FieldPath::new(at.path(field));
    let checks = [
        image(pod, &path("image")),
        env_list(&pod.env, &path("env")),
        containers::ports(&pod.ports, &path("ports")),
        probes::probe(&pod.liveness_probe, &path("livenessProbe"), true),
        probes::probe(&pod.readiness_probe, &path("readinessProbe"), false),
        resources::resources(&pod.resources, &path("resources")),
        volumes::volumes(&pod.volumes, &pod.volume_mounts, &path("volumes"), &path("volumeMounts")),
        security::security_context(&pod.security_context, &path("securityContext")),
        security::pod_security_context(&pod.pod_security_context, &path("podSecurityContext")),
        check_labels(&pod.node_selector, path("nodeSelector").as_str()),
        scheduling::tolerations(&pod.tolerations, &path("tolerations")),
        scheduling::affinity(&pod.affinity, &path("affinity")),
        check_labels(&pod.pod_labels, path("podLabels").as_str()),
        check_annotations(&pod.pod_annotations, path("podAnnotations").as_str()),
    ];
    out.extend(checks.into_iter().filter_map(Result::err));
}

fn image(pod: &PodSettings, field: &FieldPath) -> Result<(), InputError> {
    let repository = &pod.image.repository;
    if repository.trim().is_empty() {
        return err(field.field("repository"), "must not be empty");
    }
    if repository.trim() != repository || repository.contains(char::is_whitespace) {
        return err(field.field("repository"), format!("`{repository}` must not contain whitespace"));
    }
    if pod.image.tag.contains(char::is_whitespace) {
        return err(field.field("tag"), format!("`{}` must not contain whitespace", pod.image.tag));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<(), InputError>) -> String {
        r.unwrap_err().message
    }

    #[test]
    fn one_of_accepts_an_allowed_value() {
        assert!(one_of("Always", &["OnRootMismatch", "Always"], &FieldPath::new("a")).is_ok());
    }

    #[test]
    fn one_of_lists_the_allowed_values_with_or_before_the_last() {
        let r = one_of("X", &["None", "HostToContainer", "Bidirectional"], &FieldPath::new("a"));
        assert_eq!(message(r), "`X` is not supported: None, HostToContainer or Bidirectional");
    }

    #[test]
    fn one_of_names_a_single_allowed_value_alone() {
        let r = one_of("metadata.uid", &["metadata.name"], &FieldPath::new("a"));
        assert_eq!(message(r), "`metadata.uid` is not supported: metadata.name");
    }

    #[test]
    fn one_of_reports_the_field_it_was_given() {
        let r = one_of("X", &["In", "NotIn"], &FieldPath::new("a").index(0).field("operator"));
        assert_eq!(r.unwrap_err().field, "a[0].operator");
    }
}
