//! A distributed-llama application as the templates see it: a root (its OpenAI-compatible
//! API server, `dllama-api`) and `nodes - 1` workers (`dllama worker`) with stable names
//! (a StatefulSet whose ordinals start at 1, behind a headless Service that publishes
//! members before they are ready), one member per node, every member with the application's
//! pod settings. The root lists every worker's stable address; the members also get
//! LeaderWorkerSet's variables (`LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE`, `LWS_WORKER_INDEX`), so
//! the engine's commands stay the same if a LeaderWorkerSet backend is added.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, PodAffinityTerm,
    PodAntiAffinity, Probe, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::names::{check_generated, Meta};
use super::MODELS_DIR;
use crate::error::InputError;
use crate::model::{ApplicationModel, DllamaSettings};

/// The label telling a group's root from its workers (part of their selectors).
pub use model_orchestra_api::keys::ROLE_LABEL;
/// The label the StatefulSet controller gives each pod: its ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GroupContext {
    port: i32,
    image: String,
    root: Member,
    /// The root's API Service.
    api: Meta,
    #[serde(skip_serializing_if = "Option::is_none")]
    workers: Option<Workers>,
    /// The application's affinity, and one member per node.
    affinity: Affinity,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Member {
    meta: Meta,
    container: &'static str,
    port_name: &'static str,
    selector: BTreeMap<String, String>,
    pod_labels: BTreeMap<String, String>,
    pod_annotations: BTreeMap<String, String>,
    command: Vec<String>,
    env: Vec<EnvVar>,
    #[serde(skip_serializing_if = "Option::is_none")]
    readiness_probe: Option<Probe>,
    volume_mounts: Vec<VolumeMount>,
    volumes: Vec<Volume>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Workers {
    #[serde(flatten)]
    member: Member,
    /// The headless Service naming each worker.
    service: Meta,
    replicas: i32,
}

/// What a group shares with the application's other objects: names, labels, the user's
/// env, annotations and volumes, and the model cache's volume.
pub(super) struct GroupBase<'b> {
    pub(super) name: &'b str,
    pub(super) namespace: &'b str,
    /// The field errors name (`spec.applications.<key>`).
    pub(super) field: &'b str,
    /// The application's labels (component included), its pods' and its selector's.
    pub(super) labels: &'b BTreeMap<String, String>,
    pub(super) pod_labels: &'b BTreeMap<String, String>,
    pub(super) selector: &'b BTreeMap<String, String>,
    /// The root's pod annotations (the model's revision rolls it); the workers get the
    /// user's own only (they hold no model).
    pub(super) root_annotations: BTreeMap<String, String>,
    pub(super) env: Vec<EnvVar>,
    pub(super) models_volume: Option<Volume>,
}

/// What the group's model files are called in the cache (distributed-llama's `launch.py`
/// writes `-` as `_`).
pub(super) fn model_dir_name(model: &str) -> String {
    model.replace('-', "_")
}

/// The group's objects' context.
pub(super) fn group(app: &ApplicationModel, d: &DllamaSettings, base: GroupBase) -> Result<GroupContext, InputError> {
    let GroupBase { name, namespace, field, labels, pod_labels, selector, .. } = base;
    let workers_name = format!("{name}-workers");
    check_generated(&workers_name, field)?;
    // A worker's hostname is its pod's name: `<workers>-<ordinal>`.
    check_generated(&format!("{workers_name}-{}", d.nodes.max(1) - 1), field)?;
    let role = |role: &str, map: &BTreeMap<String, String>| {
        let mut map = map.clone();
        map.insert(ROLE_LABEL.into(), role.into());
        map
    };
    let port = d.port.to_string();
    let leader = format!("{name}.{namespace}.svc");
    let env = |index: EnvVar| {
        let lws = [value("LWS_LEADER_ADDRESS", &leader), value("LWS_GROUP_SIZE", &d.nodes.to_string()), index];
        lws.into_iter().chain(base.env.iter().cloned()).collect::<Vec<_>>()
    };
    let model = model_dir_name(app.reader.model_name.as_deref().unwrap_or_default());
    let mut root_command: Vec<String> = [
        "dllama-api",
        "--host",
        "0.0.0.0",
        "--port",
        &port,
        "--model",
        &format!("{MODELS_DIR}/{model}/dllama_model_{model}.m"),
        "--tokenizer",
        &format!("{MODELS_DIR}/{model}/dllama_tokenizer_{model}.t"),
        "--buffer-float-type",
        d.buffer_float_type.as_str(),
        "--nthreads",
        &d.nthreads.to_string(),
        "--max-seq-len",
        &d.max_seq_len.to_string(),
    ]
    .map(String::from)
    .to_vec();
    let worker_addresses: Vec<String> =
        (1..d.nodes).map(|i| format!("{workers_name}-{i}.{workers_name}.{namespace}.svc:{port}")).collect();
    if !worker_addresses.is_empty() {
        root_command.push("--workers".into());
        root_command.extend(worker_addresses);
    }
    // Every member has the chart's shared-memory volume, as every pod of the chart does (a
    // user's mount may name it).
    let dshm = Volume {
        name: "dshm".into(),
        empty_dir: Some(EmptyDirVolumeSource { medium: Some("Memory".into()), ..Default::default() }),
        ..Default::default()
    };
    let dshm_mount = VolumeMount { name: "dshm".into(), mount_path: "/dev/shm".into(), ..Default::default() };
    let user_mounts = std::iter::once(dshm_mount).chain(app.pod.volume_mounts.iter().cloned());
    let user_volumes = std::iter::once(dshm).chain(app.pod.volumes.iter().cloned());
    let models_mount = base.models_volume.as_ref().map(|v| VolumeMount {
        name: v.name.clone(),
        mount_path: MODELS_DIR.into(),
        read_only: Some(true),
        ..Default::default()
    });
    let root = Member {
        meta: Meta { name: name.to_string(), labels: role("root", labels) },
        container: "dllama-api",
        port_name: "http",
        selector: role("root", selector),
        pod_labels: role("root", pod_labels),
        pod_annotations: base.root_annotations,
        command: root_command,
        env: env(value("LWS_WORKER_INDEX", "0")),
        // The API answers only once every worker is connected and holds its slice; it
        // answers one request at a time, so the probe is patient. (A TCP probe would end
        // dllama-api: it does not survive a connection that sends nothing.)
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/v1/models".into()),
                port: IntOrString::String("http".into()),
                ..Default::default()
            }),
            period_seconds: Some(10),
            timeout_seconds: Some(10),
            failure_threshold: Some(6),
            ..Default::default()
        }),
        volume_mounts: models_mount.into_iter().chain(user_mounts.clone()).collect(),
        volumes: base.models_volume.clone().into_iter().chain(user_volumes.clone()).collect(),
    };
    let workers = (d.nodes > 1).then(|| {
        let index = EnvVar {
            name: "LWS_WORKER_INDEX".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.labels['{POD_INDEX_LABEL}']"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        Workers {
            member: Member {
                meta: Meta { name: workers_name.clone(), labels: role("worker", labels) },
                container: "dllama-worker",
                port_name: "worker",
                selector: role("worker", selector),
                pod_labels: role("worker", pod_labels),
                pod_annotations: app.pod.pod_annotations.clone(),
                command: [
                    "dllama",
                    "worker",
                    "--host",
                    "0.0.0.0",
                    "--port",
                    &port,
                    "--nthreads",
                    &d.nthreads.to_string(),
                ]
                .map(String::from)
                .to_vec(),
                env: env(index),
                // A worker takes one connection, the root's: a probe's would end it.
                readiness_probe: None,
                volume_mounts: user_mounts.collect(),
                volumes: user_volumes.collect(),
            },
            service: Meta { name: workers_name.clone(), labels: role("worker", labels) },
            replicas: d.nodes - 1,
        }
    });
    Ok(GroupContext {
        port: d.port,
        image: d.image.clone(),
        root,
        api: Meta { name: name.to_string(), labels: role("root", labels) },
        workers,
        affinity: one_per_node(&app.pod.affinity, selector),
    })
}

impl GroupContext {
    /// The workers' StatefulSet and headless Service, when there are workers.
    pub(super) fn workers_name(&self) -> Option<&str> {
        self.workers.as_ref().map(|w| w.member.meta.name.as_str())
    }
}

fn value(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
}

/// The application's affinity with one more required term: no two members of the group on
/// one node (the group's pods share the application's selector labels).
fn one_per_node(affinity: &Affinity, selector: &BTreeMap<String, String>) -> Affinity {
    let mut affinity = affinity.clone();
    let anti = affinity.pod_anti_affinity.get_or_insert_with(PodAntiAffinity::default);
    anti.required_during_scheduling_ignored_during_execution.get_or_insert_with(Vec::new).push(PodAffinityTerm {
        label_selector: Some(LabelSelector { match_labels: Some(selector.clone()), ..Default::default() }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    });
    affinity
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_name_is_the_directory_launch_py_writes() {
        assert_eq!(model_dir_name("qwen3-0.6b_q40"), "qwen3_0.6b_q40");
    }

    #[test]
    fn one_member_per_node_adds_to_the_applications_own_anti_affinity() {
        let own = Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    topology_key: "zone".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let merged = one_per_node(&own, &BTreeMap::from([("a".to_string(), "b".to_string())]));
        let terms = merged.pod_anti_affinity.unwrap().required_during_scheduling_ignored_during_execution.unwrap();
        assert_eq!(
            terms.iter().map(|t| t.topology_key.as_str()).collect::<Vec<_>>(),
            ["zone", "kubernetes.io/hostname"]
        );
    }
}
