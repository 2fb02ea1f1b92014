//! The pod and its one container: env, ports, probes, resources, volumes and mounts,
//! security contexts, scheduling (node selector, tolerations, affinity), image, labels and
//! annotations — the rules of the API server's pod validation for what the chart renders.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, EnvVar, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, PodSecurityContext,
    Probe, ResourceRequirements, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{check_annotations, check_labels, quantity};
use crate::error::InputError;
use crate::model::{Origin, PodSettings};
use model_orchestra_api::names::{
    self, is_config_key, is_dns_label, is_dns_subdomain, is_env_var_name, is_port_name, is_qualified_name,
};

/// Volumes and mounts the chart adds to every pod (names and paths a user's must not take).
const CHART_VOLUMES: [&str; 2] = ["config", "dshm"];
const CHART_MOUNT_PATHS: [&str; 2] = ["/code/config.yaml", "/dev/shm"];
const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

fn err(field: impl Into<String>, message: impl Into<String>) -> Result<(), InputError> {
    Err(InputError::new(field, message))
}

/// Every check of the pod; each field's first mistake.
pub(super) fn pod(pod: &PodSettings, at: &Origin, out: &mut Vec<InputError>) {
    let checks = [
        image(pod, at),
        env_list(&pod.env, &at.path("env")),
        ports(&pod.ports, &at.path("ports")),
        probe(&pod.liveness_probe, &at.path("livenessProbe"), true),
        probe(&pod.readiness_probe, &at.path("readinessProbe"), false),
        resources(&pod.resources, &at.path("resources")),
        volumes(&pod.volumes, &pod.volume_mounts, at),
        security_context(&pod.security_context, &at.path("securityContext")),
        pod_security_context(&pod.pod_security_context, &at.path("podSecurityContext")),
        check_labels(&pod.node_selector, &at.path("nodeSelector")),
        tolerations(&pod.tolerations, &at.path("tolerations")),
        affinity(&pod.affinity, &at.path("affinity")),
        check_labels(&pod.pod_labels, &at.path("podLabels")),
        check_annotations(&pod.pod_annotations, &at.path("podAnnotations")),
    ];
    out.extend(checks.into_iter().filter_map(Result::err));
}

fn image(pod: &PodSettings, at: &Origin) -> Result<(), InputError> {
    let field = at.path("image");
    let repository = &pod.image.repository;
    if repository.trim().is_empty() {
        return err(format!("{field}.repository"), "must not be empty");
    }
    if repository.trim() != repository || repository.contains(char::is_whitespace) {
        return err(format!("{field}.repository"), format!("`{repository}` must not contain whitespace"));
    }
    if pod.image.tag.contains(char::is_whitespace) {
        return err(format!("{field}.tag"), format!("`{}` must not contain whitespace", pod.image.tag));
    }
    Ok(())
}

/// An env list: each var valid, each name once (server-side apply merges the list by name
/// and refuses duplicate keys).
pub(super) fn env_list(env: &[EnvVar], field: &str) -> Result<(), InputError> {
    let mut names = HashSet::new();
    for (i, e) in env.iter().enumerate() {
        env_var(e, &format!("{field}[{i}]"))?;
        if !names.insert(e.name.as_str()) {
            return err(format!("{field}[{i}].name"), format!("`{}` is set twice", e.name));
        }
    }
    Ok(())
}

/// One env var (`field` is its path, e.g. `spec.gateway.env[0]`).
pub(super) fn env_var(e: &EnvVar, field: &str) -> Result<(), InputError> {
    if !is_env_var_name(&e.name) {
        return err(
            format!("{field}.name"),
            format!("`{}` is not an environment variable name (printable ASCII characters other than `=`)", e.name),
        );
    }
    let Some(from) = &e.value_from else { return Ok(()) };
    if e.value.as_deref().is_some_and(|v| !v.is_empty()) {
        return err(format!("{field}.valueFrom"), "may not be set when `value` is not empty");
    }
    let field = format!("{field}.valueFrom");
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
        let labelled = ["metadata.labels['", "metadata.annotations['"]
            .iter()
            .any(|p| r.field_path.starts_with(p) && r.field_path.ends_with("']"));
        if !PATHS.contains(&r.field_path.as_str()) && !labelled {
            return err(
                format!("{field}.fieldRef.fieldPath"),
                format!(
                    "`{}` is not supported: one of {}, or metadata.labels['KEY'] / metadata.annotations['KEY']",
                    r.field_path,
                    PATHS.join(", ")
                ),
            );
        }
        if r.api_version.as_deref().is_some_and(|v| v != "v1") {
            return err(format!("{field}.fieldRef.apiVersion"), "must be `v1`");
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
        if !RESOURCES.contains(&r.resource.as_str()) {
            return err(
                format!("{field}.resourceFieldRef.resource"),
                format!("`{}` is not supported: one of {}", r.resource, RESOURCES.join(", ")),
            );
        }
        if r.container_name.as_deref().is_some_and(|c| !c.is_empty()) {
            return err(
                format!("{field}.resourceFieldRef.containerName"),
                "leave it out: the pod has one container, which the chart names",
            );
        }
        if let Some(d) = &r.divisor {
            let parsed =
                quantity::parse(&d.0).map_err(|m| InputError::new(format!("{field}.resourceFieldRef.divisor"), m))?;
            if parsed.value <= 0.0 {
                return err(format!("{field}.resourceFieldRef.divisor"), "must be positive");
            }
        }
    }
    let key_ref = |name: Option<&str>, key: &str, kind: &str, path: String| -> Result<(), InputError> {
        let name = name.unwrap_or_default();
        if !is_dns_subdomain(name) {
            return err(
                format!("{path}.name"),
                format!("`{name}` is not a valid {kind} name ({})", names::DNS_SUBDOMAIN_RULE),
            );
        }
        if !is_config_key(key) {
            return err(format!("{path}.key"), format!("`{key}` is not a valid key (letters, digits, `-`, `_`, `.`)"));
        }
        Ok(())
    };
    if let Some(r) = &from.config_map_key_ref {
        key_ref(Some(&r.name), &r.key, "ConfigMap", format!("{field}.configMapKeyRef"))?;
    }
    if let Some(r) = &from.secret_key_ref {
        key_ref(Some(&r.name), &r.key, "Secret", format!("{field}.secretKeyRef"))?;
    }
    Ok(())
}

fn valid_port(p: i32) -> bool {
    (1..=65535).contains(&p)
}

fn ports(ports: &[ContainerPort], field: &str) -> Result<(), InputError> {
    let mut names = HashSet::new();
    // Server-side apply merges container ports by (containerPort, protocol).
    let mut keys = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if !valid_port(p.container_port) {
            return err(format!("{at}.containerPort"), format!("{} is not a port number (1–65535)", p.container_port));
        }
        if let Some(h) = p.host_port.filter(|h| *h != 0) {
            if !valid_port(h) {
                return err(format!("{at}.hostPort"), format!("{h} is not a port number (1–65535)"));
            }
        }
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            if !is_port_name(name) {
                return err(format!("{at}.name"), format!("`{name}` is not {}", names::PORT_NAME_RULE));
            }
            if !names.insert(name) {
                return err(format!("{at}.name"), format!("`{name}` is used by another port"));
            }
        }
        protocol(p.protocol.as_deref(), &format!("{at}.protocol"))?;
        if !keys.insert((p.container_port, p.protocol.as_deref().unwrap_or("TCP"))) {
            return err(
                format!("{at}.containerPort"),
                format!("{} ({}) is declared twice", p.container_port, p.protocol.as_deref().unwrap_or("TCP")),
            );
        }
        if let Some(ip) = p.host_ip.as_deref().filter(|ip| !ip.is_empty()) {
            if ip.parse::<std::net::IpAddr>().is_err() {
                return err(format!("{at}.hostIP"), format!("`{ip}` is not an IP address"));
            }
        }
    }
    Ok(())
}

pub(super) fn protocol(protocol: Option<&str>, field: &str) -> Result<(), InputError> {
    match protocol {
        None => Ok(()),
        Some(p) if PROTOCOLS.contains(&p) => Ok(()),
        Some(p) => err(field, format!("`{p}` is not supported: one of TCP, UDP, SCTP")),
    }
}

/// A port number (1–65535) or an IANA service name.
pub(super) fn port_or_name(port: &IntOrString, field: &str) -> Result<(), InputError> {
    match port {
        IntOrString::Int(p) if valid_port(*p) => Ok(()),
        IntOrString::Int(p) => err(field, format!("{p} is not a port number (1–65535)")),
        IntOrString::String(s) if is_port_name(s) => Ok(()),
        IntOrString::String(s) => err(field, format!("`{s}` is not a port number or {}", names::PORT_NAME_RULE)),
    }
}

fn non_negative(v: Option<i32>, field: &str) -> Result<(), InputError> {
    match v {
        Some(n) if n < 0 => err(field, format!("{n} must not be negative")),
        _ => Ok(()),
    }
}

fn probe(p: &Probe, field: &str, liveness: bool) -> Result<(), InputError> {
    let handlers = [p.exec.is_some(), p.http_get.is_some(), p.tcp_socket.is_some(), p.grpc.is_some()];
    match handlers.iter().filter(|h| **h).count() {
        0 => return err(field, "must set one handler: exec, httpGet, tcpSocket or grpc"),
        1 => {}
        _ => return err(field, "may set only one handler of exec, httpGet, tcpSocket and grpc (a probe merged over the template's keeps the template's handler: set the same handler type)"),
    }
    if let Some(exec) = &p.exec {
        if exec.command.as_ref().is_none_or(Vec::is_empty) {
            return err(format!("{field}.exec.command"), "must not be empty");
        }
    }
    if let Some(h) = &p.http_get {
        port_or_name(&h.port, &format!("{field}.httpGet.port"))?;
        if let Some(scheme) = h.scheme.as_deref() {
            if !["HTTP", "HTTPS"].contains(&scheme) {
                return err(format!("{field}.httpGet.scheme"), format!("`{scheme}` is not supported: HTTP or HTTPS"));
            }
        }
        for (i, header) in h.http_headers.iter().flatten().enumerate() {
            if !names::is_http_header_name(&header.name) {
                return err(
                    format!("{field}.httpGet.httpHeaders[{i}].name"),
                    format!("`{}` is not an HTTP header name", header.name),
                );
            }
        }
    }
    if let Some(t) = &p.tcp_socket {
        port_or_name(&t.port, &format!("{field}.tcpSocket.port"))?;
    }
    if let Some(g) = &p.grpc {
        if !valid_port(g.port) {
            return err(format!("{field}.grpc.port"), format!("{} is not a port number (1–65535)", g.port));
        }
    }
    non_negative(p.initial_delay_seconds, &format!("{field}.initialDelaySeconds"))?;
    non_negative(p.timeout_seconds, &format!("{field}.timeoutSeconds"))?;
    non_negative(p.period_seconds, &format!("{field}.periodSeconds"))?;
    non_negative(p.success_threshold, &format!("{field}.successThreshold"))?;
    non_negative(p.failure_threshold, &format!("{field}.failureThreshold"))?;
    if liveness && p.success_threshold.is_some_and(|s| s != 1) {
        return err(format!("{field}.successThreshold"), "must be 1 for a liveness probe");
    }
    match p.termination_grace_period_seconds {
        Some(_) if !liveness => {
            err(format!("{field}.terminationGracePeriodSeconds"), "must not be set for a readiness probe")
        }
        Some(s) if s <= 0 => {
            err(format!("{field}.terminationGracePeriodSeconds"), format!("{s} must be greater than 0"))
        }
        _ => Ok(()),
    }
}

/// Whether a resource name is one of Kubernetes' own (not an extended resource).
fn is_standard_resource(name: &str) -> bool {
    ["cpu", "memory", "ephemeral-storage", "storage"].contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.")
        || name.starts_with("limits.")
}

fn resources(r: &ResourceRequirements, field: &str) -> Result<(), InputError> {
    if r.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return err(format!("{field}.claims"), "the pod declares no resourceClaims for a container to use");
    }
    let mut parsed = BTreeMap::new();
    for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
        for (name, q) in map.iter().flatten() {
            let at = format!("{field}.{which}.{name}");
            let standard = is_standard_resource(name);
            let qualified = is_qualified_name(name) && (standard || name.contains('/'));
            if !qualified
                || name.starts_with("kubernetes.io/")
                || (name.contains('/')
                    && name.split('/').next().is_some_and(|d| d == "kubernetes.io" || d.ends_with(".kubernetes.io")))
            {
                return err(&at, "not a resource name: cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource such as nvidia.com/gpu");
            }
            let value = quantity::parse(&q.0).map_err(|m| InputError::new(&at, m))?;
            if value.value < 0.0 {
                return err(&at, format!("`{}` must not be negative", q.0));
            }
            if !standard && !value.integer {
                return err(&at, format!("`{}`: an extended resource must be a whole number", q.0));
            }
            parsed.insert((which, name.as_str()), value.value);
        }
    }
    for ((which, name), request) in &parsed {
        if *which != "requests" {
            continue;
        }
        let limit = parsed.get(&("limits", name));
        if let Some(limit) = limit {
            if request > limit {
                return err(
                    format!("{field}.requests.{name}"),
                    format!(
                        "must be less than or equal to the limit ({})",
                        r.limits.as_ref().and_then(|l| l.get(*name)).map(|q| q.0.as_str()).unwrap_or_default()
                    ),
                );
            }
        }
        // Extended resources cannot be overcommitted: a request needs an equal limit.
        if !is_standard_resource(name) && limit != Some(request) {
            return err(
                format!("{field}.limits.{name}"),
                format!(
                    "an extended resource's limit must be set and equal its request ({})",
                    r.requests.as_ref().and_then(|l| l.get(*name)).map(|q| q.0.as_str()).unwrap_or_default()
                ),
            );
        }
    }
    Ok(())
}

fn volumes(volumes: &[Volume], mounts: &[VolumeMount], at: &Origin) -> Result<(), InputError> {
    let field = at.path("volumes");
    let mut names: HashSet<&str> = CHART_VOLUMES.into_iter().collect();
    for (i, v) in volumes.iter().enumerate() {
        let path = format!("{field}[{i}]");
        if !is_dns_label(&v.name) {
            return err(format!("{path}.name"), format!("`{}` is not {}", v.name, names::DNS_LABEL_RULE));
        }
        if !names.insert(&v.name) {
            let why = if CHART_VOLUMES.contains(&v.name.as_str()) { " (the chart's own volume)" } else { "" };
            return err(format!("{path}.name"), format!("`{}` is used by another volume{why}", v.name));
        }
        volume_source(v, &path)?;
    }
    let field = at.path("volumeMounts");
    let mut paths: HashSet<&str> = CHART_MOUNT_PATHS.into_iter().collect();
    for (i, m) in mounts.iter().enumerate() {
        let path = format!("{field}[{i}]");
        if !names.contains(m.name.as_str()) {
            return err(format!("{path}.name"), format!("no volume is named `{}`", m.name));
        }
        if m.mount_path.is_empty() {
            return err(format!("{path}.mountPath"), "must not be empty");
        }
        if !paths.insert(&m.mount_path) {
            return err(format!("{path}.mountPath"), format!("`{}` is mounted already", m.mount_path));
        }
        let sub = m.sub_path.as_deref().unwrap_or_default();
        if !sub.is_empty() {
            if m.sub_path_expr.as_deref().is_some_and(|e| !e.is_empty()) {
                return err(format!("{path}.subPathExpr"), "may not be set together with subPath");
            }
            if sub.starts_with('/') {
                return err(format!("{path}.subPath"), "must be a relative path");
            }
            if sub.split('/').any(|p| p == "..") {
                return err(format!("{path}.subPath"), "must not contain `..`");
            }
        }
        if let Some(p) = m.mount_propagation.as_deref() {
            if !["None", "HostToContainer", "Bidirectional"].contains(&p) {
                return err(
                    format!("{path}.mountPropagation"),
                    format!("`{p}` is not supported: None, HostToContainer or Bidirectional"),
                );
            }
        }
        if let Some(r) = m.recursive_read_only.as_deref() {
            if !["Disabled", "IfPossible", "Enabled"].contains(&r) {
                return err(
                    format!("{path}.recursiveReadOnly"),
                    format!("`{r}` is not supported: Disabled, IfPossible or Enabled"),
                );
            }
            if r != "Disabled" && m.read_only != Some(true) {
                return err(format!("{path}.recursiveReadOnly"), "needs readOnly: true");
            }
        }
    }
    Ok(())
}

/// Exactly one source, and the common sources' own rules.
fn volume_source(v: &Volume, path: &str) -> Result<(), InputError> {
    let sources = serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_object().map(|o| o.keys().filter(|k| *k != "name").count()))
        .unwrap_or(0);
    match sources {
        0 => return err(path, "must set a volume source (emptyDir, configMap, secret, persistentVolumeClaim, …)"),
        1 => {}
        _ => return err(path, "may set only one volume source"),
    }
    if let Some(e) = &v.empty_dir {
        if let Some(m) = e.medium.as_deref().filter(|m| !m.is_empty()) {
            if m != "Memory" && !m.starts_with("HugePages") {
                return err(
                    format!("{path}.emptyDir.medium"),
                    format!("`{m}` is not supported: empty, Memory or HugePages"),
                );
            }
        }
        if let Some(size) = &e.size_limit {
            let q = quantity::parse(&size.0).map_err(|m| InputError::new(format!("{path}.emptyDir.sizeLimit"), m))?;
            if q.value < 0.0 {
                return err(format!("{path}.emptyDir.sizeLimit"), "must not be negative");
            }
        }
    }
    if let Some(c) = &v.config_map {
        if !is_dns_subdomain(&c.name) {
            return err(format!("{path}.configMap.name"), format!("`{}` is not {}", c.name, names::DNS_SUBDOMAIN_RULE));
        }
    }
    if let Some(s) = &v.secret {
        let name = s.secret_name.as_deref().unwrap_or_default();
        if !is_dns_subdomain(name) {
            return err(format!("{path}.secret.secretName"), format!("`{name}` is not {}", names::DNS_SUBDOMAIN_RULE));
        }
    }
    if let Some(c) = &v.persistent_volume_claim {
        if !is_dns_subdomain(&c.claim_name) {
            return err(
                format!("{path}.persistentVolumeClaim.claimName"),
                format!("`{}` is not {}", c.claim_name, names::DNS_SUBDOMAIN_RULE),
            );
        }
    }
    if let Some(h) = &v.host_path {
        if h.path.is_empty() {
            return err(format!("{path}.hostPath.path"), "must not be empty");
        }
        if h.path.split('/').any(|p| p == "..") {
            return err(format!("{path}.hostPath.path"), "must not contain `..`");
        }
        if let Some(t) = h.type_.as_deref().filter(|t| !t.is_empty()) {
            const TYPES: [&str; 7] =
                ["DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"];
            if !TYPES.contains(&t) {
                return err(format!("{path}.hostPath.type"), format!("`{t}` is not supported: {}", TYPES.join(", ")));
            }
        }
    }
    Ok(())
}

fn security_context(c: &SecurityContext, field: &str) -> Result<(), InputError> {
    ids(c.run_as_user, c.run_as_group, field)?;
    if c.privileged == Some(true) && c.allow_privilege_escalation == Some(false) {
        return err(format!("{field}.allowPrivilegeEscalation"), "cannot be false when privileged is true");
    }
    let sys_admin = c
        .capabilities
        .as_ref()
        .and_then(|caps| caps.add.as_ref())
        .is_some_and(|add| add.iter().any(|c| c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN"));
    if sys_admin && c.allow_privilege_escalation == Some(false) {
        return err(
            format!("{field}.allowPrivilegeEscalation"),
            "cannot be false when the SYS_ADMIN capability is added",
        );
    }
    if let Some(p) = c.proc_mount.as_deref() {
        if !["Default", "Unmasked"].contains(&p) {
            return err(format!("{field}.procMount"), format!("`{p}` is not supported: Default or Unmasked"));
        }
    }
    profile(
        c.seccomp_profile.as_ref().map(|p| (p.type_.as_str(), p.localhost_profile.as_deref())),
        &format!("{field}.seccompProfile"),
    )?;
    profile(
        c.app_armor_profile.as_ref().map(|p| (p.type_.as_str(), p.localhost_profile.as_deref())),
        &format!("{field}.appArmorProfile"),
    )
}

fn pod_security_context(c: &PodSecurityContext, field: &str) -> Result<(), InputError> {
    ids(c.run_as_user, c.run_as_group, field)?;
    for (name, id) in [("fsGroup", c.fs_group)] {
        if id.is_some_and(|id| id < 0) {
            return err(format!("{field}.{name}"), "must not be negative");
        }
    }
    for (i, g) in c.supplemental_groups.iter().flatten().enumerate() {
        if *g < 0 {
            return err(format!("{field}.supplementalGroups[{i}]"), "must not be negative");
        }
    }
    if let Some(p) = c.fs_group_change_policy.as_deref() {
        if !["OnRootMismatch", "Always"].contains(&p) {
            return err(
                format!("{field}.fsGroupChangePolicy"),
                format!("`{p}` is not supported: OnRootMismatch or Always"),
            );
        }
    }
    for (i, s) in c.sysctls.iter().flatten().enumerate() {
        let valid = !s.name.is_empty()
            && s.name.split(['.', '/']).all(|p| {
                !p.is_empty()
                    && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            });
        if !valid {
            return err(format!("{field}.sysctls[{i}].name"), format!("`{}` is not a sysctl name", s.name));
        }
    }
    profile(
        c.seccomp_profile.as_ref().map(|p| (p.type_.as_str(), p.localhost_profile.as_deref())),
        &format!("{field}.seccompProfile"),
    )?;
    profile(
        c.app_armor_profile.as_ref().map(|p| (p.type_.as_str(), p.localhost_profile.as_deref())),
        &format!("{field}.appArmorProfile"),
    )
}

fn ids(user: Option<i64>, group: Option<i64>, field: &str) -> Result<(), InputError> {
    for (name, id) in [("runAsUser", user), ("runAsGroup", group)] {
        if id.is_some_and(|id| !(0..=2147483647).contains(&id)) {
            return err(format!("{field}.{name}"), "must be between 0 and 2147483647");
        }
    }
    Ok(())
}

/// A seccomp or AppArmor profile: its type, and a localhost profile exactly for `Localhost`.
fn profile(p: Option<(&str, Option<&str>)>, field: &str) -> Result<(), InputError> {
    let Some((type_, local)) = p else { return Ok(()) };
    if !["RuntimeDefault", "Unconfined", "Localhost"].contains(&type_) {
        return err(
            format!("{field}.type"),
            format!("`{type_}` is not supported: RuntimeDefault, Unconfined or Localhost"),
        );
    }
    match (type_ == "Localhost", local.is_some_and(|l| !l.is_empty())) {
        (true, false) => err(format!("{field}.localhostProfile"), "must be set when type is Localhost"),
        (false, true) => err(format!("{field}.localhostProfile"), "can only be set when type is Localhost"),
        _ => Ok(()),
    }
}

fn tolerations(tolerations: &[Toleration], field: &str) -> Result<(), InputError> {
    for (i, t) in tolerations.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let key = t.key.as_deref().unwrap_or_default();
        let operator = t.operator.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        if !key.is_empty() && !is_qualified_name(key) {
            return err(format!("{at}.key"), format!("`{key}` is not {}", names::QUALIFIED_NAME_RULE));
        }
        if key.is_empty() && operator != "Exists" {
            return err(format!("{at}.operator"), "must be Exists when key is empty (which matches every taint)");
        }
        match operator {
            "" | "Equal" if !names::is_label_value(value) => {
                return err(format!("{at}.value"), format!("`{value}` is not {}", names::LABEL_VALUE_RULE))
            }
            "" | "Equal" => {}
            "Exists" if !value.is_empty() => {
                return err(format!("{at}.value"), "must be empty when operator is Exists")
            }
            "Exists" => {}
            other => return err(format!("{at}.operator"), format!("`{other}` is not supported: Equal or Exists")),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            return err(
                format!("{at}.effect"),
                format!("`{effect}` is not supported: NoSchedule, PreferNoSchedule or NoExecute"),
            );
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            return err(format!("{at}.effect"), "must be NoExecute when tolerationSeconds is set");
        }
    }
    Ok(())
}

fn affinity(a: &Affinity, field: &str) -> Result<(), InputError> {
    if let Some(node) = &a.node_affinity {
        let at = format!("{field}.nodeAffinity");
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            let path = format!("{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
            if required.node_selector_terms.is_empty() {
                return err(&path, "must have at least one term");
            }
            for (i, term) in required.node_selector_terms.iter().enumerate() {
                node_selector_term(term, &format!("{path}[{i}]"))?;
            }
        }
        for (i, p) in node.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
            let path = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            weight(p.weight, &path)?;
            node_selector_term(&p.preference, &format!("{path}.preference"))?;
        }
    }
    for (name, terms) in [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ] {
        let Some((required, preferred)) = terms else { continue };
        let at = format!("{field}.{name}");
        for (i, t) in required.iter().flatten().enumerate() {
            pod_affinity_term(t, &format!("{at}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"))?;
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let path = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            weight(w.weight, &path)?;
            pod_affinity_term(&w.pod_affinity_term, &format!("{path}.podAffinityTerm"))?;
        }
    }
    Ok(())
}

fn weight(w: i32, path: &str) -> Result<(), InputError> {
    if (1..=100).contains(&w) {
        Ok(())
    } else {
        err(format!("{path}.weight"), format!("{w} must be between 1 and 100"))
    }
}

fn node_selector_term(term: &NodeSelectorTerm, path: &str) -> Result<(), InputError> {
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        requirement(r, &format!("{path}.matchExpressions[{i}]"), true)?;
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        let at = format!("{path}.matchFields[{i}]");
        if r.key != "metadata.name" {
            return err(format!("{at}.key"), format!("`{}` is not supported: metadata.name", r.key));
        }
        if r.operator != "In" && r.operator != "NotIn" {
            return err(format!("{at}.operator"), format!("`{}` is not supported: In or NotIn", r.operator));
        }
        if r.values.as_ref().is_none_or(|v| v.len() != 1) {
            return err(format!("{at}.values"), "must have exactly one value");
        }
    }
    Ok(())
}

fn requirement(r: &NodeSelectorRequirement, at: &str, node: bool) -> Result<(), InputError> {
    if !is_qualified_name(&r.key) {
        return err(format!("{at}.key"), format!("`{}` is not {}", r.key, names::QUALIFIED_NAME_RULE));
    }
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            err(format!("{at}.values"), "must have at least one value for In and NotIn")
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            err(format!("{at}.values"), "must be empty for Exists and DoesNotExist")
        }
        "Gt" | "Lt" if node && (values.len() != 1 || values[0].parse::<i64>().is_err()) => {
            err(format!("{at}.values"), "must be one integer for Gt and Lt")
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" => values.iter().enumerate().try_for_each(|(i, v)| {
            if names::is_label_value(v) {
                Ok(())
            } else {
                err(format!("{at}.values[{i}]"), format!("`{v}` is not {}", names::LABEL_VALUE_RULE))
            }
        }),
        "Gt" | "Lt" if node => Ok(()),
        other => err(
            format!("{at}.operator"),
            format!(
                "`{other}` is not supported: In, NotIn, Exists, DoesNotExist{}",
                if node { ", Gt or Lt" } else { "" }
            ),
        ),
    }
}

fn pod_affinity_term(t: &PodAffinityTerm, path: &str) -> Result<(), InputError> {
    if t.topology_key.is_empty() || !is_qualified_name(&t.topology_key) {
        return err(
            format!("{path}.topologyKey"),
            format!("`{}` is not {}", t.topology_key, names::QUALIFIED_NAME_RULE),
        );
    }
    if let Some(s) = &t.label_selector {
        label_selector(s, &format!("{path}.labelSelector"))?;
    }
    if let Some(s) = &t.namespace_selector {
        label_selector(s, &format!("{path}.namespaceSelector"))?;
    }
    for (i, ns) in t.namespaces.iter().flatten().enumerate() {
        if !is_dns_label(ns) {
            return err(format!("{path}.namespaces[{i}]"), format!("`{ns}` is not a namespace name"));
        }
    }
    Ok(())
}

fn label_selector(s: &LabelSelector, path: &str) -> Result<(), InputError> {
    check_labels(s.match_labels.as_ref().unwrap_or(&BTreeMap::new()), &format!("{path}.matchLabels"))?;
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let r = NodeSelectorRequirement { key: e.key.clone(), operator: e.operator.clone(), values: e.values.clone() };
        requirement(&r, &format!("{path}.matchExpressions[{i}]"), false)?;
    }
    Ok(())
}
