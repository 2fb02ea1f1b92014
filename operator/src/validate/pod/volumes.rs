//! The pod's volumes and the container's mounts, beside the chart's own.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Volume, VolumeMount};
use model_orchestra_api::names::{self, is_dns_label};

use super::{err, not_supported, one_of};
use crate::error::InputError;
use crate::validate::dns_subdomain;
use crate::validate::field_path::FieldPath;
use crate::validate::quantity;

/// Volumes and mounts the chart adds to every pod (names and paths a user's must not take).
const CHART_VOLUMES: [&str; 2] = ["config", "dshm"];
const CHART_MOUNT_PATHS: [&str; 2] = ["/code/config.yaml", "/dev/shm"];

pub(super) fn volumes(
    volumes: &[Volume],
    mounts: &[VolumeMount],
    volumes_at: &FieldPath,
    mounts_at: &FieldPath,
) -> Result<(), InputError> {
    let mut names: HashSet<&str> = CHART_VOLUMES.into_iter().collect();
    for (i, v) in volumes.iter().enumerate() {
        let path = volumes_at.index(i);
        if !is_dns_label(&v.name) {
            return err(path.field("name"), format!("`{}` is not {}", v.name, names::DNS_LABEL_RULE));
        }
        if !names.insert(&v.name) {
            let why = if CHART_VOLUMES.contains(&v.name.as_str()) { " (the chart's own volume)" } else { "" };
            return err(path.field("name"), format!("`{}` is used by another volume{why}", v.name));
        }
        volume_source(v, &path)?;
    }
    let mut paths: HashSet<&str> = CHART_MOUNT_PATHS.into_iter().collect();
    for (i, m) in mounts.iter().enumerate() {
        let path = mounts_at.index(i);
        if !names.contains(m.name.as_str()) {
            return err(path.field("name"), format!("no volume is named `{}`", m.name));
        }
        if m.mount_path.is_empty() {
            return err(path.field("mountPath"), "must not be empty");
        }
        if !paths.insert(&m.mount_path) {
            return err(path.field("mountPath"), format!("`{}` is mounted already", m.mount_path));
        }
        let sub = m.sub_path.as_deref().unwrap_or_default();
        if !sub.is_empty() {
            if m.sub_path_expr.as_deref().is_some_and(|e| !e.is_empty()) {
                return err(path.field("subPathExpr"), "may not be set together with subPath");
            }
            if sub.starts_with('/') {
                return err(path.field("subPath"), "must be a relative path");
            }
            if sub.split('/').any(|p| p == "..") {
                return err(path.field("subPath"), "must not contain `..`");
            }
        }
        if let Some(p) = m.mount_propagation.as_deref() {
            one_of(p, &["None", "HostToContainer", "Bidirectional"], &path.field("mountPropagation"))?;
        }
        if let Some(r) = m.recursive_read_only.as_deref() {
            let at = path.field("recursiveReadOnly");
            one_of(r, &["Disabled", "IfPossible", "Enabled"], &at)?;
            if r != "Disabled" && m.read_only != Some(true) {
                return err(at, "needs readOnly: true");
            }
        }
    }
    Ok(())
}

/// Exactly one source, and the common sources' own rules.
fn volume_source(v: &Volume, path: &FieldPath) -> Result<(), InputError> {
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
        let at = path.field("emptyDir");
        if let Some(m) = e.medium.as_deref().filter(|m| !m.is_empty()) {
            if m != "Memory" && !m.starts_with("HugePages") {
                return not_supported(m, "empty, Memory or HugePages", &at.field("medium"));
            }
        }
        if let Some(size) = &e.size_limit {
            let at = at.field("sizeLimit");
            let q = quantity::parse(&size.0).map_err(|m| InputError::new(&at, m))?;
            if q.value < 0.0 {
                return err(at, "must not be negative");
            }
        }
    }
    if let Some(c) = &v.config_map {
        dns_subdomain(&c.name, path.field("configMap").field("name"))?;
    }
    if let Some(s) = &v.secret {
        dns_subdomain(s.secret_name.as_deref().unwrap_or_default(), path.field("secret").field("secretName"))?;
    }
    if let Some(c) = &v.persistent_volume_claim {
        dns_subdomain(&c.claim_name, path.field("persistentVolumeClaim").field("claimName"))?;
    }
    if let Some(h) = &v.host_path {
        let at = path.field("hostPath");
        if h.path.is_empty() {
            return err(at.field("path"), "must not be empty");
        }
        if h.path.split('/').any(|p| p == "..") {
            return err(at.field("path"), "must not contain `..`");
        }
        if let Some(t) = h.type_.as_deref().filter(|t| !t.is_empty()) {
            const TYPES: [&str; 7] =
                ["DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"];
            if !TYPES.contains(&t) {
                return not_supported(t, &TYPES.join(", "), &at.field("type"));
            }
        }
    }
    Ok(())
}
