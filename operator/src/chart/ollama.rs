//! An Ollama application as the templates see it: `ollama serve` in each replica (the
//! application's pod settings, its models volume as Ollama's model directory), behind a
//! Service of its own (Ollama's API and its OpenAI-compatible `/v1`). The models are not
//! in the pod template: the operator pulls them into each replica through Ollama's API, and
//! a readiness gate ([`MODELS_READY_CONDITION`]) keeps a replica out of its Service until
//! every listed model is there. Adding or removing a model restarts nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, HTTPGetAction, Lifecycle, LifecycleHandler,
    PodReadinessGate, Probe, ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::names::Meta;
use super::MODELS_DIR;
use crate::model::{ApplicationModel, OllamaSettings};

/// The pod condition the operator sets once every listed model is present in the pod (a
/// readiness gate of the application's pods).
pub use model_orchestra_api::keys::MODELS_READY_CONDITION;

/// Under verified promotion, the models a revision's pods serve (comma-separated), on its
/// pod template: while a candidate is verified, the serving revision's pods keep the models
/// they were made for. (Without promotion, a change of the list is pulled into the running
/// pods and no annotation is rendered: it would restart them.)
pub use model_orchestra_api::keys::MODELS_ANNOTATION;

/// Where Ollama keeps its identity key (`~/.ollama`): a volume of its own, so the root
/// filesystem can stay read-only and the user need not be root.
const HOME: &str = "/home/ollama";
/// Scratch space (Ollama's temporary files): a volume, for the same reason.
const TMP: &str = "/tmp";
/// The longest a stopping replica drains: Ollama cuts every connection it holds when
/// stopped, so a replica told to stop (a rollout, a scale-down, a drain, a promotion's
/// handover, sleep) goes on serving, out of its Service, until no connection to it carries
/// an answer (the drain helper's `/wait-idle`, see `crate::drain`), at least
/// [`DRAIN_AT_LEAST_SECONDS`] and at most this. Not a field: `v1alpha2` is frozen since
/// 1.0.0 (a field added to it would be pruned from stored CRs whenever a bundle carrying
/// 1.0.0's CRD is installed); the next API version makes it one.
pub(crate) const DRAIN_AT_MOST_SECONDS: i64 = crate::chart::ANSWER_GRACE_SECONDS as i64;
/// The shortest drain: while the pod leaves its Service's endpoints, kube-proxy may still
/// send it new connections (the model gateway sends again one refused before it is open).
pub(crate) const DRAIN_AT_LEAST_SECONDS: i64 = 5;
/// What a stopping replica's grace period gives Ollama beyond its drain: it exits at once
/// on SIGTERM (it closes its server and kills its runners), this is a margin.
const STOP_MARGIN_SECONDS: i64 = 5;
/// The drain helper's port (`model-orchestra-operator drain-helper`, a container beside
/// Ollama's, from the operator's own image): the kubelet asks it
/// `GET /wait-idle` as Ollama's `preStop` hook. Another when Ollama's port is this one.
const HELPER_PORT: i32 = 9080;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OllamaContext {
    image: String,
    port: i32,
    env: Vec<EnvVar>,
    readiness_probe: Probe,
    liveness_probe: Probe,
    readiness_gates: Vec<PodReadinessGate>,
    volume_mounts: Vec<VolumeMount>,
    volumes: Vec<Volume>,
    /// The drain: a `preStop` hook that waits until no connection is open.
    lifecycle: Lifecycle,
    /// The drain helper's container.
    drain_helper: Container,
    termination_grace_period_seconds: i64,
    /// The application's Service (the candidate's own, for a candidate).
    service: Meta,
    /// The models listed, for the revision's hash (a change of the list is a new revision
    /// to verify when promotion is enabled).
    models: Vec<String>,
}

/// What an Ollama application shares with the application's other objects.
pub(super) struct OllamaBase<'b> {
    pub(super) service: Meta,
    /// The user's env (own, then template's).
    pub(super) env: Vec<EnvVar>,
    pub(super) models_volume: Option<&'b Volume>,
    /// The drain helper's image: the operator's.
    pub(super) helper_image: &'b str,
}

/// The Ollama context of an application (or of its candidate).
pub(super) fn ollama(app: &ApplicationModel, o: &OllamaSettings, base: OllamaBase) -> OllamaContext {
    let value = |name: &str, value: &str| EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() };
    // The contract's settings first; the user's own may not replace them (the pod would
    // not serve where the Service and the probes look).
    let mut env = vec![
        value("OLLAMA_HOST", &format!("0.0.0.0:{}", o.port)),
        value("OLLAMA_MODELS", MODELS_DIR),
        value("HOME", HOME),
        value("TMPDIR", TMP),
    ];
    let ours = ["OLLAMA_HOST", "OLLAMA_MODELS", "HOME", "TMPDIR"];
    env.extend(base.env.into_iter().filter(|e| !ours.contains(&e.name.as_str())));
    let probe = |period: i32, failures: i32| Probe {
        // `GET /` answers "Ollama is running" once the server listens.
        http_get: Some(HTTPGetAction {
            path: Some("/".into()),
            port: IntOrString::String("http".into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Default::default()
    };
    // The models directory: the application's models volume (a memory-backed emptyDir by
    // the chart's default: set `modelsVolume` to keep models on disk or a claim).
    let models = base.models_volume.cloned().unwrap_or_else(|| Volume {
        name: "models".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
    let home =
        Volume { name: "ollama-home".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() };
    let mount = |volume: &Volume, path: &str| VolumeMount {
        name: volume.name.clone(),
        mount_path: path.into(),
        ..Default::default()
    };
    let tmp = Volume { name: "tmp".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() };
    let volume_mounts: Vec<VolumeMount> = [mount(&models, MODELS_DIR), mount(&home, HOME), mount(&tmp, TMP)]
        .into_iter()
        .chain(app.pod.volume_mounts.iter().cloned())
        .collect();
    let volumes: Vec<Volume> = [models, home, tmp].into_iter().chain(app.pod.volumes.iter().cloned()).collect();
    let helper_port = if o.port == HELPER_PORT { HELPER_PORT + 1 } else { HELPER_PORT };
    let drain_helper = Container {
        name: "drain-helper".into(),
        image: Some(base.helper_image.to_string()),
        args: Some(vec![
            "drain-helper".into(),
            format!("--engine-port={}", o.port),
            format!("--port={helper_port}"),
            format!("--at-least={DRAIN_AT_LEAST_SECONDS}"),
            format!("--at-most={DRAIN_AT_MOST_SECONDS}"),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("drain".into()),
            container_port: helper_port,
            ..Default::default()
        }]),
        // An idle process that reads two small files a few times a second while a pod
        // stops. Limits equal to requests: a pod whose Ollama is Guaranteed stays so.
        resources: Some(ResourceRequirements {
            requests: Some(helper_resources()),
            limits: Some(helper_resources()),
            ..Default::default()
        }),
        // Its own, hardened whatever Ollama's is (it needs no privilege to read the pod's
        // connection tables): the restricted Pod Security Standard's, as the operator's image.
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Default::default() }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(65532),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    };
    OllamaContext {
        image: o.image.clone(),
        port: o.port,
        env,
        // Every second: a woken replica joins its Service as soon as Ollama listens.
        readiness_probe: probe(1, 3),
        liveness_probe: probe(10, 6),
        readiness_gates: vec![PodReadinessGate { condition_type: MODELS_READY_CONDITION.into() }],
        volume_mounts,
        volumes,
        // Ollama stops serving the moment it is told to stop (SIGTERM closes its server,
        // requests in flight included). The kubelet runs the preStop hook first, while the
        // pod leaves its Service's endpoints: the replica gets no new connection (the model
        // gateway opens one per request) and answers what it holds until none is left.
        lifecycle: Lifecycle {
            pre_stop: Some(LifecycleHandler {
                // By number: the kubelet resolves a named port among the hook's own
                // container's ports, and the helper's is the helper's.
                http_get: Some(HTTPGetAction {
                    path: Some("/wait-idle".into()),
                    port: IntOrString::Int(helper_port),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        drain_helper,
        termination_grace_period_seconds: DRAIN_AT_MOST_SECONDS + STOP_MARGIN_SECONDS,
        service: base.service,
        models: o.models.clone(),
    }
}

/// The drain helper's requests, and limits.
fn helper_resources() -> BTreeMap<String, Quantity> {
    BTreeMap::from([("cpu".to_string(), Quantity("10m".into())), ("memory".to_string(), Quantity("32Mi".into()))])
}
