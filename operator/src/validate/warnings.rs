//! What the API server accepts but is almost certainly not what the user meant: pods that
//! can never reach the GPU nodes they ask for, probes on ports no container declares, and
//! reader options the engine does not know (typos). Each names its field and the fix.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Probe, Toleration};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use model_orchestra_api::values::ReaderConfig;

use crate::error::InputError;
use crate::model::{Model, Origin, PodSettings, GPU_RESOURCE};

/// Every warning of the model.
pub(super) fn of(m: &Model) -> Vec<InputError> {
    let mut out = Vec::new();
    probes_on_named_ports(&m.gateway.pod, &m.gateway.origin, &mut out);
    for app in &m.applications {
        let (resources, tolerations) = app.gpu_scheduling();
        let origin = &app.origin;
        let tolerated = tolerates_gpu_taint(&tolerations);
        let wants_gpu_nodes = app.pod.node_selector.keys().any(|k| k.starts_with("nvidia.com/"));
        let requests_gpus = [&resources.limits, &resources.requests]
            .iter()
            .any(|m| m.as_ref().is_some_and(|m| m.contains_key(GPU_RESOURCE)));
        if !tolerated && (wants_gpu_nodes || requests_gpus) {
            let why = if wants_gpu_nodes { "its nodeSelector picks GPU nodes" } else { "it requests nvidia.com/gpu" };
            let dropped = !app.pod.tolerations.is_empty() && app.device == model_orchestra_api::values::Device::Cuda;
            let message = if dropped {
                format!(
                    "{why}, but these tolerations replace the chart's GPU toleration (lists are replaced, not merged), \
                     so its pods cannot go to nodes tainted {GPU_RESOURCE}:NoSchedule; add \
                     {{key: {GPU_RESOURCE}, operator: Exists, effect: NoSchedule}} to them"
                )
            } else {
                format!(
                    "{why}, but no toleration of the GPU nodes' taint {GPU_RESOURCE}:NoSchedule: its pods will stay \
                     Pending; add {{key: {GPU_RESOURCE}, operator: Exists, effect: NoSchedule}} (or set \
                     readerConfig.device: cuda, which adds it)"
                )
            };
            out.push(InputError::new(origin.path("tolerations"), message));
        }
        // A distributed-llama group has its own probe.
        if app.engine == crate::model::EngineModel::Takeoff {
            probes_on_named_ports(&app.pod, origin, &mut out);
        }
        unknown_reader_keys(&app.reader, origin, &mut out);
        super::engine::warnings(app, &mut out);
    }
    out
}

/// Whether `tolerations` let a pod onto a node tainted `nvidia.com/gpu:NoSchedule` (with
/// or without a value).
fn tolerates_gpu_taint(tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| {
        let effect = t.effect.as_deref().unwrap_or_default();
        let effect_ok = effect.is_empty() || effect == "NoSchedule";
        let exists = t.operator.as_deref() == Some("Exists");
        let key = t.key.as_deref().unwrap_or_default();
        effect_ok && exists && (key.is_empty() || key == GPU_RESOURCE)
    })
}

/// A probe's port given by name must be a port the container declares; the API server
/// accepts any name, and the kubelet then fails the probe forever.
fn probes_on_named_ports(pod: &PodSettings, origin: &Origin, out: &mut Vec<InputError>) {
    let declared: BTreeSet<&str> = pod.ports.iter().filter_map(|p| p.name.as_deref()).collect();
    for (field, probe) in [("livenessProbe", &pod.liveness_probe), ("readinessProbe", &pod.readiness_probe)] {
        let Some((handler, name)) = named_port(probe) else { continue };
        if declared.contains(name) {
            continue;
        }
        let known = if declared.is_empty() {
            "the container declares no ports".to_string()
        } else {
            format!("the container declares {}", declared.iter().copied().collect::<Vec<_>>().join(", "))
        };
        out.push(InputError::new(
            format!("{}.{handler}.port", origin.path(field)),
            format!("port `{name}` is not a port of the container ({known}): the probe can never succeed; use a port number or declare the port in `ports`"),
        ));
    }
}

fn named_port(p: &Probe) -> Option<(&'static str, &str)> {
    fn name(port: &IntOrString) -> Option<&str> {
        match port {
            IntOrString::String(s) if s.parse::<i32>().is_err() => Some(s.as_str()),
            _ => None,
        }
    }
    if let Some(h) = &p.http_get {
        return name(&h.port).map(|n| ("httpGet", n));
    }
    if let Some(t) = &p.tcp_socket {
        return name(&t.port).map(|n| ("tcpSocket", n));
    }
    None
}

/// The `readerConfig` keys the engine knows: the typed fields of [`ReaderConfig`], read from
/// its schema (one place for them).
fn known_reader_keys() -> &'static BTreeSet<String> {
    static KEYS: OnceLock<BTreeSet<String>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let schema = serde_json::to_value(schemars::schema_for!(ReaderConfig)).expect("a schema serialises");
        schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default()
    })
}

/// A `readerConfig` key the engine does not know is passed on as it is (the engine gains
/// options over time), but is more often a typo: say which known key it is closest to.
fn unknown_reader_keys(reader: &ReaderConfig, origin: &Origin, out: &mut Vec<InputError>) {
    let known = known_reader_keys();
    for key in reader.other.keys() {
        let closest = known.iter().map(|k| (edit_distance(key, k), k)).min().filter(|(d, _)| *d <= 3);
        let hint = match closest {
            Some((_, k)) => format!("did you mean `{k}`?"),
            None => format!("the known keys are {}", known.iter().cloned().collect::<Vec<_>>().join(", ")),
        };
        out.push(InputError::new(
            format!("{}.{key}", origin.path("readerConfig")),
            format!(
                "not a reader option this operator knows; it is passed to the engine as `{}` anyway: {hint}",
                crate::model::snake_case(key)
            ),
        ));
    }
}

/// Levenshtein distance (insertions, deletions and substitutions), by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("tensorParalel", "tensorParallel"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn the_known_reader_keys_come_from_the_reader_configs_fields() {
        let keys = known_reader_keys();
        assert!(keys.contains("tensorParallel") && keys.contains("modelName"), "{keys:?}");
    }

    #[test]
    fn an_exists_toleration_of_the_gpu_key_or_of_every_key_tolerates_the_gpu_taint() {
        let t = |key: Option<&str>, op: &str, effect: Option<&str>| Toleration {
            key: key.map(Into::into),
            operator: Some(op.into()),
            effect: effect.map(Into::into),
            ..Default::default()
        };
        assert!(tolerates_gpu_taint(&[t(Some(GPU_RESOURCE), "Exists", Some("NoSchedule"))]));
        assert!(tolerates_gpu_taint(&[t(None, "Exists", None)]));
        assert!(!tolerates_gpu_taint(&[t(Some("dedicated"), "Exists", None)]));
        assert!(!tolerates_gpu_taint(&[t(Some(GPU_RESOURCE), "Exists", Some("NoExecute"))]));
    }
}
