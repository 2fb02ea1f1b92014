//! The liveness and readiness probes: one handler, its own rules, and the timings.

use k8s_openapi::api::core::v1::Probe;
use model_orchestra_api::names;

use super::containers::{port_number, port_or_name};
use super::{err, one_of};
use crate::error::InputError;
use crate::validate::field_path::FieldPath;

pub(super) fn probe(p: &Probe, field: &FieldPath, liveness: bool) -> Result<(), InputError> {
    let handlers = [p.exec.is_some(), p.http_get.is_some(), p.tcp_socket.is_some(), p.grpc.is_some()];
    match handlers.iter().filter(|h| **h).count() {
        0 => return err(field, "must set one handler: exec, httpGet, tcpSocket or grpc"),
        1 => {}
        _ => return err(field, "may set only one handler of exec, httpGet, tcpSocket and grpc (a probe merged over the template's keeps the template's handler: set the same handler type)"),
    }
    if let Some(exec) = &p.exec {
        if exec.command.as_ref().is_none_or(Vec::is_empty) {
            return err(field.field("exec").field("command"), "must not be empty");
        }
    }
    if let Some(h) = &p.http_get {
        let at = field.field("httpGet");
        port_or_name(&h.port, &at.field("port"))?;
        if let Some(scheme) = h.scheme.as_deref() {
            one_of(scheme, &["HTTP", "HTTPS"], &at.field("scheme"))?;
        }
        for (i, header) in h.http_headers.iter().flatten().enumerate() {
            if !names::is_http_header_name(&header.name) {
                return err(
                    at.field("httpHeaders").index(i).field("name"),
                    format!("`{}` is not an HTTP header name", header.name),
                );
            }
        }
    }
    if let Some(t) = &p.tcp_socket {
        port_or_name(&t.port, &field.field("tcpSocket").field("port"))?;
    }
    if let Some(g) = &p.grpc {
        port_number(g.port, &field.field("grpc").field("port"))?;
    }
    for (name, value) in [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ] {
        if let Some(n) = value.filter(|n| *n < 0) {
            return err(field.field(name), format!("{n} must not be negative"));
        }
    }
    if liveness && p.success_threshold.is_some_and(|s| s != 1) {
        return err(field.field("successThreshold"), "must be 1 for a liveness probe");
    }
    let grace = field.field("terminationGracePeriodSeconds");
    match p.termination_grace_period_seconds {
        Some(_) if !liveness => err(grace, "must not be set for a readiness probe"),
        Some(s) if s <= 0 => err(grace, format!("{s} must be greater than 0")),
        _ => Ok(()),
    }
}
