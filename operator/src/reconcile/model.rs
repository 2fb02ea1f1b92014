//! Model caches, decided without an API server: which applications a refresh names, where
//! a download stands (from its Job and newest pod), what each application's Deployment does
//! meanwhile, and when a refresh is done.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::chart::{Component, RenderedObject};
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::v1alpha2::{ModelOrchestraStatus, ModelPhase, ModelServing, ModelStatus};

/// Annotating a CR with this (any value) downloads the models of every cached application
/// again; a value listing application names (comma- or space-separated) only theirs.
pub(crate) use model_orchestra_api::keys::REFRESH_ANNOTATION;
/// KEDA's annotation that holds a ScaledObject's target at a replica count.
pub(crate) const KEDA_PAUSED_REPLICAS: &str = "autoscaling.keda.sh/paused-replicas";

/// The applications a refresh value names: those it lists when every word of it is an
/// application's name, else all of them.
pub(crate) fn refresh_selects<'a>(value: &str, applications: &[&'a str]) -> Vec<&'a str> {
    let words: Vec<&str> = value.split([',', ' ']).map(str::trim).filter(|w| !w.is_empty()).collect();
    if !words.is_empty() && words.iter().all(|w| applications.contains(w)) {
        applications.iter().copied().filter(|a| words.contains(a)).collect()
    } else {
        applications.to_vec()
    }
}

/// The refresh value each application's model is downloaded for: the annotation's for those
/// it names, else the one its model was last downloaded for (so removing or narrowing the
/// annotation downloads nothing again).
pub(crate) fn refresh_values(
    annotation: Option<&str>,
    applications: &[&str],
    previous: &ModelOrchestraStatus,
) -> BTreeMap<String, String> {
    let selected = annotation.map(|v| refresh_selects(v, applications)).unwrap_or_default();
    applications
        .iter()
        .filter_map(|&app| {
            let value = if selected.contains(&app) {
                annotation.map(str::to_string)
            } else {
                previous.applications.get(app).and_then(|a| a.model.as_ref()).and_then(|m| m.refresh.clone())
            };
            Some((app.to_string(), value?))
        })
        .collect()
}

/// Where one application's download stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Download {
    pub job: String,
    pub phase: ModelPhase,
    pub message: String,
    /// The refresh value the Job downloads for.
    pub refresh: Option<String>,
    /// The download the application's pods run on (see [`serving`]).
    pub serving: Option<ModelServing>,
}

/// A cached application's download as rendered: its Job, the revision and the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CachedModel {
    pub job: String,
    pub revision: String,
    pub model_name: String,
}

impl CachedModel {
    /// From a rendered download Job (its revision label and `MODEL_NAME`).
    pub(crate) fn of_job(name: &str, job: &Value) -> CachedModel {
        let revision =
            job["metadata"]["labels"][crate::chart::MODEL_REVISION_LABEL].as_str().unwrap_or_default().to_string();
        let env = job["spec"]["template"]["spec"]["containers"][0]["env"].as_array().cloned().unwrap_or_default();
        let model_name = env
            .iter()
            .find(|e| e["name"] == "MODEL_NAME")
            .and_then(|e| e["value"].as_str())
            .unwrap_or_default()
            .to_string();
        CachedModel { job: name.to_string(), revision, model_name }
    }
}

/// The download of each cached application among `objects` (what the chart rendered).
pub(crate) fn cached_models(objects: &[RenderedObject]) -> BTreeMap<String, CachedModel> {
    objects
        .iter()
        .filter(|o| o.kind == Kind::Job)
        .filter_map(|o| match &o.component {
            Component::Application(app) => Some((app.clone(), CachedModel::of_job(&o.name, &o.object))),
            _ => None,
        })
        .collect()
}

/// The download the application's pods run on: the current one once Ready; while another
/// of the same model (a refresh, a new downloader) is not, the one they ran on before; none
/// when the model changed (its pods would start on a model that is not there).
pub(crate) fn serving(model: &CachedModel, phase: ModelPhase, previous: Option<&ModelStatus>) -> Option<ModelServing> {
    if phase == ModelPhase::Ready {
        return Some(ModelServing { revision: model.revision.clone(), model_name: model.model_name.clone() });
    }
    previous.and_then(|p| p.serving.clone()).filter(|s| s.model_name == model.model_name)
}

/// What an application's Deployment does while its model is being downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// As rendered: the current download is Ready.
    Serve,
    /// Its pods stay on this earlier download until the current one is Ready (their
    /// template keeps that revision, so they roll once, when it is).
    Keep(String),
    /// At zero replicas: no download it may run on yet.
    Hold,
}

impl Download {
    pub(crate) fn gate(&self) -> Gate {
        match (&self.phase, &self.serving) {
            (ModelPhase::Ready, _) => Gate::Serve,
            (_, Some(s)) => Gate::Keep(s.revision.clone()),
            (_, None) => Gate::Hold,
        }
    }
}

/// The phase and message of a download from its Job (absent: not created yet) and the
/// newest pod of that Job.
pub(crate) fn download_state(job_name: &str, job: Option<&Job>, pod: Option<&Pod>) -> (ModelPhase, String) {
    let Some(job) = job else {
        return (ModelPhase::Pending, format!("creating the download Job {job_name}"));
    };
    let status = job.status.clone().unwrap_or_default();
    let condition = |t: &str| status.conditions.iter().flatten().find(|c| c.type_ == t && c.status == "True").cloned();
    if condition("Complete").is_some() {
        return (ModelPhase::Ready, format!("downloaded by Job {job_name}"));
    }
    let last_failure = pod.and_then(termination_message);
    if let Some(failed) = condition("Failed") {
        let mut message = format!("Job {job_name}: {}", failed.reason.unwrap_or_else(|| "Failed".into()));
        if let Some(m) = failed.message.filter(|m| !m.is_empty()) {
            message.push_str(&format!(": {m}"));
        }
        if let Some(last) = last_failure {
            message.push_str(&format!("; {last}"));
        }
        return (ModelPhase::Failed, message);
    }
    let pod_status = pod.and_then(|p| p.status.as_ref());
    match pod_status.and_then(|s| s.phase.as_deref()) {
        Some("Running") => (ModelPhase::Downloading, format!("Job {job_name} is downloading")),
        _ => {
            let problem = pod.and_then(super::pod_health::pod_problem).map(|p| p.message);
            let message = match (problem, last_failure) {
                (Some(p), _) => p,
                (None, Some(last)) => format!("retrying after {last}"),
                (None, None) => format!("waiting for the download pod of Job {job_name}"),
            };
            (ModelPhase::Pending, message)
        }
    }
}

/// `container <name>: <termination message or reason> (exit code N)` of a failed container.
fn termination_message(pod: &Pod) -> Option<String> {
    pod.status.as_ref()?.container_statuses.iter().flatten().find_map(|c| {
        let t = c.state.as_ref()?.terminated.as_ref().filter(|t| t.exit_code != 0)?;
        let text = t
            .message
            .clone()
            .filter(|m| !m.trim().is_empty())
            .or_else(|| t.reason.clone())
            .unwrap_or_else(|| "failed".into());
        Some(format!("container {}: {} (exit code {})", c.name, text.trim(), t.exit_code))
    })
}

/// Applies each application's [`Gate`] to its rendered objects: held at zero replicas (its
/// Deployment's `replicas`, or with an autoscaler KEDA's paused-replicas annotation on the
/// ScaledObject), or kept on an earlier download (the pod template's revision).
pub(crate) fn apply_gates(objects: &mut [RenderedObject], gates: &BTreeMap<String, Gate>) {
    for o in objects.iter_mut() {
        let Component::Application(app) = &o.component else { continue };
        match (gates.get(app), o.kind) {
            (Some(Gate::Hold), Kind::Deployment) => {
                if let Some(spec) = o.object.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.insert("replicas".into(), Value::from(0));
                }
            }
            (Some(Gate::Hold), Kind::ScaledObject) => {
                let metadata =
                    o.object.as_object_mut().and_then(|m| m.get_mut("metadata")).and_then(Value::as_object_mut);
                if let Some(metadata) = metadata {
                    let annotations =
                        metadata.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
                    if let Some(a) = annotations.as_object_mut() {
                        a.insert(KEDA_PAUSED_REPLICAS.into(), Value::from("0"));
                    }
                }
            }
            (Some(Gate::Keep(revision)), Kind::Deployment) => {
                let annotations =
                    o.object.pointer_mut("/spec/template/metadata/annotations").and_then(Value::as_object_mut);
                if let Some(a) = annotations {
                    a.insert(crate::chart::MODEL_REVISION_LABEL.into(), Value::from(revision.as_str()));
                }
            }
            _ => {}
        }
    }
}

/// Whether the refresh `value` is done: every application it names has its model Ready,
/// downloaded for that value.
pub(crate) fn refresh_done(value: &str, downloads: &BTreeMap<String, Download>) -> bool {
    let apps: Vec<&str> = downloads.keys().map(String::as_str).collect();
    let selected = refresh_selects(value, &apps);
    !selected.is_empty()
        && selected.iter().all(|a| {
            downloads.get(*a).is_some_and(|d| d.phase == ModelPhase::Ready && d.refresh.as_deref() == Some(value))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use model_orchestra_api::v1alpha2::{ApplicationStatus, ModelStatus};
    use serde_json::json;

    fn job(conditions: Value) -> Job {
        serde_json::from_value(json!({"metadata": {"name": "j"}, "status": {"conditions": conditions}})).unwrap()
    }

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    #[test]
    fn a_refresh_naming_applications_selects_only_them_and_any_other_value_all() {
        let apps = ["chat", "embedder"];
        assert_eq!(refresh_selects("chat", &apps), ["chat"]);
        assert_eq!(refresh_selects("embedder, chat", &apps), ["chat", "embedder"]);
        assert_eq!(refresh_selects("2026-11-24", &apps), ["chat", "embedder"]);
        assert_eq!(refresh_selects("chat other", &apps), ["chat", "embedder"], "not only application names: all");
    }

    #[test]
    fn an_application_a_refresh_does_not_name_keeps_the_value_its_model_was_downloaded_for() {
        let mut previous = ModelOrchestraStatus::default();
        let model = ModelStatus { refresh: Some("1".into()), ..Default::default() };
        previous.applications.insert("embedder".into(), ApplicationStatus { model: Some(model), ..Default::default() });
        let values = refresh_values(Some("chat"), &["chat", "embedder"], &previous);
        assert_eq!(
            values,
            BTreeMap::from([("chat".to_string(), "chat".to_string()), ("embedder".to_string(), "1".to_string())])
        );
        assert_eq!(refresh_values(None, &["chat"], &ModelOrchestraStatus::default()), BTreeMap::new());
    }

    #[test]
    fn a_complete_job_is_ready() {
        let (phase, _) = download_state("j", Some(&job(json!([{"type": "Complete", "status": "True"}]))), None);
        assert_eq!(phase, ModelPhase::Ready);
    }

    #[test]
    fn a_failed_job_is_failed_with_its_reason_and_the_containers_termination_message() {
        let failed = job(
            json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]),
        );
        let p = pod(
            json!({"phase": "Failed", "containerStatuses": [{"name": "download", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "404 Repository Not Found\n"}}}]}),
        );
        let (phase, message) = download_state("j", Some(&failed), Some(&p));
        assert_eq!(phase, ModelPhase::Failed);
        assert_eq!(
            message,
            "Job j: BackoffLimitExceeded: Job has reached the specified backoff limit; container download: 404 Repository Not Found (exit code 1)"
        );
    }

    #[test]
    fn a_running_download_pod_is_downloading_and_one_that_cannot_pull_is_pending_with_why() {
        let active = job(json!([]));
        assert_eq!(
            download_state("j", Some(&active), Some(&pod(json!({"phase": "Running"})))).0,
            ModelPhase::Downloading
        );
        let stuck = pod(
            json!({"phase": "Pending", "containerStatuses": [{"name": "download", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}}}]}),
        );
        assert_eq!(
            download_state("j", Some(&active), Some(&stuck)),
            (ModelPhase::Pending, "container download: ErrImagePull: not found".into())
        );
        assert_eq!(download_state("j", None, None).0, ModelPhase::Pending);
    }

    fn rendered(kind: Kind, app: &str, object: Value) -> RenderedObject {
        RenderedObject { kind, name: app.into(), component: Component::Application(app.into()), object }
    }

    #[test]
    fn a_held_application_is_at_zero_replicas_a_kept_one_on_its_earlier_revision_and_the_others_as_rendered() {
        let deployment = json!({"spec": {"replicas": 2, "template": {"metadata": {"annotations": {"models.titanml.co/model-revision": "new"}}}}});
        let mut objects = vec![
            rendered(Kind::Deployment, "chat", deployment.clone()),
            rendered(Kind::Deployment, "embedder", deployment.clone()),
            rendered(Kind::ScaledObject, "chat", json!({"metadata": {"name": "chat"}, "spec": {}})),
            rendered(Kind::Deployment, "ready", deployment.clone()),
        ];
        let gates = BTreeMap::from([
            ("chat".to_string(), Gate::Hold),
            ("embedder".to_string(), Gate::Keep("old".into())),
            ("ready".to_string(), Gate::Serve),
        ]);
        apply_gates(&mut objects, &gates);
        assert_eq!(objects[0].object["spec"]["replicas"], 0);
        assert_eq!(objects[1].object["spec"]["replicas"], 2);
        assert_eq!(
            objects[1].object["spec"]["template"]["metadata"]["annotations"]["models.titanml.co/model-revision"],
            "old"
        );
        assert_eq!(objects[2].object["metadata"]["annotations"][KEDA_PAUSED_REPLICAS], "0");
        assert_eq!(objects[3].object, deployment);
    }

    #[test]
    fn pods_stay_on_the_earlier_download_of_the_same_model_but_not_of_another() {
        let model = |revision: &str, name: &str| CachedModel {
            job: format!("j-{revision}"),
            revision: revision.into(),
            model_name: name.into(),
        };
        let earlier = ModelStatus {
            serving: Some(ModelServing { revision: "r0".into(), model_name: "org/a".into() }),
            ..Default::default()
        };
        assert_eq!(
            serving(&model("r1", "org/a"), ModelPhase::Downloading, Some(&earlier)).unwrap().revision,
            "r0",
            "a refresh: keep serving"
        );
        assert_eq!(
            serving(&model("r1", "org/b"), ModelPhase::Downloading, Some(&earlier)),
            None,
            "another model: wait"
        );
        assert_eq!(
            serving(&model("r1", "org/a"), ModelPhase::Failed, Some(&earlier)).unwrap().revision,
            "r0",
            "a failed refresh tears nothing down"
        );
        assert_eq!(serving(&model("r1", "org/b"), ModelPhase::Ready, None).unwrap().revision, "r1");
        let d = |phase, serving: Option<&str>| Download {
            job: "j".into(),
            phase,
            message: String::new(),
            refresh: None,
            serving: serving.map(|r| ModelServing { revision: r.into(), model_name: "m".into() }),
        };
        assert_eq!(d(ModelPhase::Ready, Some("r1")).gate(), Gate::Serve);
        assert_eq!(d(ModelPhase::Downloading, Some("r0")).gate(), Gate::Keep("r0".into()));
        assert_eq!(d(ModelPhase::Pending, None).gate(), Gate::Hold);
    }

    #[test]
    fn a_refresh_is_done_when_every_model_it_names_is_ready_for_its_value() {
        let d = |phase, refresh: &str| Download {
            job: "j".into(),
            phase,
            message: String::new(),
            refresh: Some(refresh.into()),
            serving: None,
        };
        let mut downloads = BTreeMap::from([
            ("chat".to_string(), d(ModelPhase::Ready, "x")),
            ("embedder".to_string(), d(ModelPhase::Downloading, "x")),
        ]);
        assert!(!refresh_done("x", &downloads));
        assert!(refresh_done("chat", &BTreeMap::from([("chat".to_string(), d(ModelPhase::Ready, "chat"))])));
        downloads.get_mut("embedder").unwrap().phase = ModelPhase::Ready;
        assert!(refresh_done("x", &downloads));
    }
}
