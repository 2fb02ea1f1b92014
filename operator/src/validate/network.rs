//! A component's Service and Ingress.

use std::collections::HashSet;

use super::{check_annotations, dns_subdomain};
use model_orchestra_api::names::{self, is_dns_label, is_wildcard_dns_subdomain};
use model_orchestra_api::values::{PathType, ServiceType};

use super::field_path::FieldPath;
use super::pod::{port_number, port_or_name, protocol};
use crate::error::InputError;
use crate::model::{IngressSettings, ServiceSettings};

/// The API server's default NodePort range (`--service-node-port-range`).
const NODE_PORTS: std::ops::RangeInclusive<i32> = 30000..=32767;

fn err(field: impl Into<String>, message: impl Into<String>) -> Result<(), InputError> {
    Err(InputError::new(field, message))
}

pub(super) fn service(s: &ServiceSettings, field: &FieldPath) -> Result<(), InputError> {
    if s.type_ == ServiceType::ExternalName {
        return err(
            field.field("type"),
            "ExternalName is not supported: the chart's Services select the component's pods (ClusterIP, NodePort or LoadBalancer)",
        );
    }
    if s.ports.is_empty() {
        return err(field.field("ports"), "a Service needs at least one port");
    }
    let exposes_node_ports = matches!(s.type_, ServiceType::NodePort | ServiceType::LoadBalancer);
    let (mut names, mut node_ports, mut ports) = (HashSet::new(), HashSet::new(), HashSet::new());
    for (i, p) in s.ports.iter().enumerate() {
        let at = field.field("ports").index(i);
        match p.name.as_deref().filter(|n| !n.is_empty()) {
            None if s.ports.len() > 1 => {
                return err(at.field("name"), "required when a Service has more than one port")
            }
            None => {}
            Some(name) if !is_dns_label(name) => {
                return err(at.field("name"), format!("`{name}` is not {}", names::DNS_LABEL_RULE))
            }
            Some(name) if !names.insert(name) => {
                return err(at.field("name"), format!("`{name}` is used by another port"))
            }
            Some(_) => {}
        }
        port_number(p.port, &at.field("port"))?;
        protocol(p.protocol.as_deref(), &at.field("protocol"))?;
        if !ports.insert((p.port, p.protocol.clone().unwrap_or_else(|| "TCP".into()))) {
            return err(at.field("port"), format!("{} is used by another port with the same protocol", p.port));
        }
        if let Some(target) = &p.target_port {
            port_or_name(target, &at.field("targetPort"))?;
        }
        if let Some(app) = p.app_protocol.as_deref() {
            if !names::is_qualified_name(app) {
                return err(at.field("appProtocol"), format!("`{app}` is not {}", names::QUALIFIED_NAME_RULE));
            }
        }
        match p.node_port.filter(|n| *n != 0) {
            Some(_) if !exposes_node_ports => {
                return err(
                    at.field("nodePort"),
                    "only a NodePort or LoadBalancer Service has node ports: remove it or set service.type",
                )
            }
            Some(n) if !NODE_PORTS.contains(&n) => {
                return err(at.field("nodePort"), format!("{n} is outside the node port range 30000–32767"))
            }
            Some(n) if !node_ports.insert(n) => {
                return err(at.field("nodePort"), format!("{n} is used by another port"))
            }
            _ => {}
        }
    }
    Ok(())
}

pub(super) fn ingress(i: &IngressSettings, field: &FieldPath) -> Result<(), InputError> {
    if !i.enabled {
        return Ok(());
    }
    check_annotations(&i.annotations, field.field("annotations").as_str())?;
    if !i.class_name.is_empty() {
        dns_subdomain(&i.class_name, field.field("className"))?;
    }
    for (h, host) in i.hosts.iter().enumerate() {
        let at = field.field("hosts").index(h);
        if let Some(name) = host.host.as_deref().filter(|n| !n.is_empty()) {
            host_name(name, &at.field("host"))?;
        }
        for (p, path) in host.paths.iter().flatten().enumerate() {
            let at = at.field("paths").index(p).field("path");
            let value = path.path.as_deref().unwrap_or("/");
            if !value.starts_with('/') {
                return err(&at, format!("`{value}` must be an absolute path (starting with `/`)"));
            }
            if matches!(path.path_type, Some(PathType::Exact | PathType::Prefix)) {
                let bad = ["//", "/./", "/../", "%2f", "%2F"]
                    .iter()
                    .find(|s| value.contains(*s))
                    .copied()
                    .or_else(|| ["/..", "/."].into_iter().find(|s| value.ends_with(s)));
                if let Some(bad) = bad {
                    return err(&at, format!("`{value}` must not contain `{bad}` for pathType Exact or Prefix"));
                }
            }
        }
    }
    for (t, tls) in i.tls.iter().enumerate() {
        let at = field.field("tls").index(t);
        for (h, host) in tls.hosts.iter().flatten().enumerate() {
            host_name(host, &at.field("hosts").index(h))?;
        }
        if let Some(secret) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) {
            dns_subdomain(secret, at.field("secretName"))?;
        }
    }
    Ok(())
}

/// An Ingress host: a DNS name (a leading `*.` allowed), not an IP address.
fn host_name(host: &str, field: &FieldPath) -> Result<(), InputError> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return err(field, format!("`{host}` must be a DNS name, not an IP address"));
    }
    if !is_wildcard_dns_subdomain(host) {
        return err(field, format!("`{host}` is not {} (a leading `*.` is allowed)", names::DNS_SUBDOMAIN_RULE));
    }
    Ok(())
}
