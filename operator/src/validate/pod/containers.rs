//! The container's env and ports, and the port numbers, names and protocols that probes and
//! Services name too.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{ContainerPort, EnvVar};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use model_orchestra_api::names::{self, is_config_key, is_dns_subdomain, is_env_var_name, is_port_name};

use super::{err, not_supported};
use crate::error::InputError;
use crate::validate::field_path::FieldPath;
use crate::validate::quantity;

const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

/// An env list: each var valid, each name once (server-side apply merges the list by name
/// and refuses duplicate keys).
pub(in crate::validate) fn env_list(env: &[EnvVar], field: &FieldPath) -> Result<(), InputError> {
    let mut names = HashSet::new();
    for (i, e) in env.iter().enumerate() {
        let at = field.index(i);
        env_var(e, &at)?;
        if !names.insert(e.name.as_str()) {
            return err(at.field("name"), format!("`{}` is set twice", e.name));
        }
    }
    Ok(())
}

/// One env var (`field` is its path, e.g. `spec.gateway.env[0]`).
fn env_var(e: &EnvVar, field: &FieldPath) -> Result<(), InputError> {
    if !is_env_var_name(&e.name) {
        return err(
            field.field("name"),
            format!("`{}` is not an environment variable name (printable ASCII characters other than `=`)", e.name),
        );
    }
    let Some(from) = &e.value_from else { return Ok(()) };
    let field = field.field("valueFrom");
    if e.value.as_deref().is_some_and(|v| !v.is_empty()) {
        return err(&field, "may not be set when `value` is not empty");
    }
    let sources = [
        from.field_ref.is_some(),
        from.resource_field_ref.is_some(),
        from.config_map_key_ref.is_some(),
        from.secret_key_ref.is_some(),
    ];
    match sources.iter().filter(|s| **s).count() {
        0 => return err(&field, "must set one of fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef"),
        1 => {}
        _ => return err(&field, "may set only one of fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef"),
    }
    if let Some(r) = &from.field_ref {
        const PATHS: [&str; 9] = [
            "metadata.name",
            "metadata.namespace",
            "metadata.uid",
            "spec.nodeName",
            "spec.serviceAccountName",
            "status.hostIP",
            "status.hostIPs",
            "status.podIP",
            "status.podIPs",
        ];
        let at = field.field("fieldRef");
        let labelled = ["metadata.labels['", "metadata.annotations['"]
            .iter()
            .any(|p| r.field_path.starts_with(p) && r.field_path.ends_with("']"));
        if !PATHS.contains(&r.field_path.as_str()) && !labelled {
            return not_supported(
                &r.field_path,
                &format!("one of {}, or metadata.labels['KEY'] / metadata.annotations['KEY']", PATHS.join(", ")),
                &at.field("fieldPath"),
            );
        }
        if r.api_version.as_deref().is_some_and(|v| v != "v1") {
            return err(at.field("apiVersion"), "must be `v1`");
        }
    }
    if let Some(r) = &from.resource_field_ref {
        const RESOURCES: [&str; 6] = [
            "limits.cpu",
            "limits.memory",
            "limits.ephemeral-storage",
            "requests.cpu",
            "requests.memory",
            "requests.ephemeral-storage",
        ];
        let at = field.field("resourceFieldRef");
        if !RESOURCES.contains(&r.resource.as_str()) {
            return not_supported(&r.resource, &format!("one of {}", RESOURCES.join(", ")), &at.field("resource"));
        }
        if r.container_name.as_deref().is_some_and(|c| !c.is_empty()) {
            return err(at.field("containerName"), "leave it out: the pod has one container, which the chart names");
        }
        if let Some(d) = &r.divisor {
            let at = at.field("divisor");
            let parsed = quantity::parse(&d.0).map_err(|m| InputError::new(&at, m))?;
            if parsed.value <= 0.0 {
                return err(at, "must be positive");
            }
        }
    }
    let key_ref = |name: Option<&str>, key: &str, kind: &str, path: FieldPath| -> Result<(), InputError> {
        let name = name.unwrap_or_default();
        if !is_dns_subdomain(name) {
            return err(
                path.field("name"),
                format!("`{name}` is not a valid {kind} name ({})", names::DNS_SUBDOMAIN_RULE),
            );
        }
        if !is_config_key(key) {
            return err(path.field("key"), format!("`{key}` is not a valid key (letters, digits, `-`, `_`, `.`)"));
        }
        Ok(())
    };
    if let Some(r) = &from.config_map_key_ref {
        key_ref(Some(&r.name), &r.key, "ConfigMap", field.field("configMapKeyRef"))?;
    }
    if let Some(r) = &from.secret_key_ref {
        key_ref(Some(&r.name), &r.key, "Secret", field.field("secretKeyRef"))?;
    }
    Ok(())
}

pub(super) fn ports(ports: &[ContainerPort], field: &FieldPath) -> Result<(), InputError> {
    let mut names = HashSet::new();
    // Server-side apply merges container ports by (containerPort, protocol).
    let mut keys = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = field.index(i);
        port_number(p.container_port, &at.field("containerPort"))?;
        if let Some(h) = p.host_port.filter(|h| *h != 0) {
            port_number(h, &at.field("hostPort"))?;
        }
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            if !is_port_name(name) {
                return err(at.field("name"), format!("`{name}` is not {}", names::PORT_NAME_RULE));
            }
            if !names.insert(name) {
                return err(at.field("name"), format!("`{name}` is used by another port"));
            }
        }
        protocol(p.protocol.as_deref(), &at.field("protocol"))?;
        let proto = p.protocol.as_deref().unwrap_or("TCP");
        if !keys.insert((p.container_port, proto)) {
            return err(at.field("containerPort"), format!("{} ({proto}) is declared twice", p.container_port));
        }
        if let Some(ip) = p.host_ip.as_deref().filter(|ip| !ip.is_empty()) {
            if ip.parse::<std::net::IpAddr>().is_err() {
                return err(at.field("hostIP"), format!("`{ip}` is not an IP address"));
            }
        }
    }
    Ok(())
}

/// A port's protocol, when set.
pub(in crate::validate) fn protocol(protocol: Option<&str>, field: &FieldPath) -> Result<(), InputError> {
    match protocol {
        Some(p) if !PROTOCOLS.contains(&p) => not_supported(p, &format!("one of {}", PROTOCOLS.join(", ")), field),
        _ => Ok(()),
    }
}

/// A port number: 1–65535.
pub(in crate::validate) fn port_number(port: i32, field: &FieldPath) -> Result<(), InputError> {
    if (1..=65535).contains(&port) {
        Ok(())
    } else {
        err(field, format!("{port} is not a port number (1–65535)"))
    }
}

/// A port number (1–65535) or an IANA service name.
pub(in crate::validate) fn port_or_name(port: &IntOrString, field: &FieldPath) -> Result<(), InputError> {
    match port {
        IntOrString::Int(p) => port_number(*p, field),
        IntOrString::String(s) if is_port_name(s) => Ok(()),
        IntOrString::String(s) => err(field, format!("`{s}` is not a port number or {}", names::PORT_NAME_RULE)),
    }
}
