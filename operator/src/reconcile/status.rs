//! The status a reconcile reports: conditions `Ready`, `Progressing`, `Degraded` with
//! typed reasons, per-application readiness from the Deployments and their pods, the
//! gateway address. Pure: the reconciler gathers the facts, this decides the status, and it
//! is written only if it changed.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::condition::{ConditionType, Reason};
use super::model::{refresh_done, Download};
// v1alpha2's status is v1alpha1's plus each model and the last refresh: a v1alpha1 line
// leaves those out, so it writes exactly the v1alpha1 status.
use model_orchestra_api::v1alpha2::{ApplicationStatus, ModelOrchestraStatus, ModelPhase, ModelRefresh, ModelStatus};

/// How far the reconcile got.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every object is applied; what the cluster says about them.
    Applied { observed: Box<Observed>, hash: String },
    /// The spec fails the operator's validation: nothing was applied or pruned.
    RenderFailed(String),
    /// The API server refused an object in the dry run (`Invalid` or `Forbidden`):
    /// nothing was written.
    Refused { reason: Reason, message: String },
    /// Applying or pruning failed; retried with backoff.
    ApplyFailed(String),
}

/// Why a component's pods are not running, as a pod reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProblem {
    /// The scheduler cannot place the pod (its message is in `message`).
    pub unschedulable: bool,
    pub message: String,
}

/// One component's readiness.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Health {
    pub replicas: ApplicationStatus,
    pub problem: Option<PodProblem>,
}

/// What the cluster says about the applied objects: the gateway and the applications
/// apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub gateway: Health,
    pub applications: BTreeMap<String, Health>,
    pub gateway_address: Option<String>,
    /// The download of each cached application's model.
    pub models: BTreeMap<String, Download>,
    /// The CR's `models.titanml.co/refresh` annotation.
    pub refresh: Option<String>,
}

/// Readiness of one component from its Deployment (replicas may be owned by an autoscaler,
/// so the live `spec.replicas` is the desired count).
pub fn deployment_readiness(d: Option<&Deployment>) -> ApplicationStatus {
    let Some(d) = d else {
        return ApplicationStatus::default();
    };
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = d.status.clone().unwrap_or_default();
    let ready_replicas = status.ready_replicas.unwrap_or(0);
    let current = status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0) >= desired;
    ApplicationStatus {
        ready_replicas,
        desired_replicas: desired,
        ready: current && updated && ready_replicas >= desired,
        model: None,
    }
}

/// Everything the next status depends on.
pub struct Report<'a> {
    pub previous: &'a ModelOrchestraStatus,
    pub generation: Option<i64>,
    pub outcome: &'a Outcome,
    pub operator_version: &'a str,
    pub now: &'a Time,
}

/// One condition's status, reason and message.
type Verdict = (bool, Reason, String);

/// `(Ready, Progressing, Degraded)` for an outcome.
fn verdicts(outcome: &Outcome) -> [Verdict; 3] {
    match outcome {
        Outcome::RenderFailed(m) => [
            (false, Reason::RenderFailed, m.clone()),
            (false, Reason::RenderFailed, m.clone()),
            (true, Reason::RenderFailed, m.clone()),
        ],
        Outcome::Refused { reason, message: m } => {
            [(false, *reason, m.clone()), (false, *reason, m.clone()), (true, *reason, m.clone())]
        }
        Outcome::ApplyFailed(m) => [
            (false, Reason::ApplyFailed, m.clone()),
            (true, Reason::Retrying, m.clone()),
            (true, Reason::ApplyFailed, m.clone()),
        ],
        Outcome::Applied { observed, .. } => {
            let failed: Vec<String> = observed
                .models
                .iter()
                .filter(|(_, d)| d.phase == ModelPhase::Failed)
                .map(|(app, d)| format!("{app}: {}", d.message))
                .collect();
            if !failed.is_empty() {
                let m = format!("model download failed: {}", failed.join("; "));
                return [
                    (false, Reason::ModelDownloadFailed, m.clone()),
                    (false, Reason::ModelDownloadFailed, m.clone()),
                    (true, Reason::ModelDownloadFailed, m),
                ];
            }
            let model_waiting = |app: &str| observed.models.get(app).filter(|d| d.phase != ModelPhase::Ready);
            let app_ready = |app: &str, h: &Health| h.replicas.ready && model_waiting(app).is_none();
            let components = std::iter::once(("gateway", &observed.gateway))
                .chain(observed.applications.iter().map(|(k, v)| (k.as_str(), v)));
            let waiting: Vec<(&str, &Health)> = components.filter(|(name, h)| !app_ready(name, h)).collect();
            let ready_apps = observed.applications.iter().filter(|(k, h)| app_ready(k, h)).count();
            let fine = (false, Reason::AsExpected, "all objects applied".to_string());
            if waiting.is_empty() {
                let m = format!("{ready_apps}/{} applications and the gateway are ready", observed.applications.len());
                return [(true, Reason::Ready, m.clone()), (false, Reason::Ready, m), fine];
            }
            let unschedulable: Vec<String> = waiting
                .iter()
                .filter_map(|(name, h)| {
                    h.problem.as_ref().filter(|p| p.unschedulable).map(|p| format!("{name}: {}", p.message))
                })
                .collect();
            if !unschedulable.is_empty() {
                let m = format!("pods cannot be scheduled: {}", unschedulable.join("; "));
                return [
                    (false, Reason::Unschedulable, m.clone()),
                    (true, Reason::Unschedulable, m.clone()),
                    (true, Reason::Unschedulable, m),
                ];
            }
            let described: Vec<String> = waiting
                .iter()
                .map(|(name, h)| match (model_waiting(name), &h.problem) {
                    (Some(d), _) => format!("{name} (model {}: {})", d.phase.as_str(), d.message),
                    (None, Some(p)) => format!("{name} ({})", p.message),
                    (None, None) => name.to_string(),
                })
                .collect();
            let m = format!("waiting for {}", described.join(", "));
            [(false, Reason::ApplicationsNotReady, m.clone()), (true, Reason::ApplicationsNotReady, m), fine]
        }
    }
}

/// The next status. `lastTransitionTime` moves only when a condition's status flips; after
/// a failure the last observed applications and gateway address are kept.
pub fn next_status(r: &Report) -> ModelOrchestraStatus {
    let conditions = ConditionType::ALL
        .into_iter()
        .zip(verdicts(r.outcome))
        .map(|(type_, (status, reason, message))| {
            let status = if status { "True" } else { "False" };
            let since = match condition(r.previous, type_) {
                Some(c) if c.status == status => c.last_transition_time.clone(),
                _ => r.now.clone(),
            };
            Condition {
                type_: type_.as_str().into(),
                status: status.into(),
                reason: reason.as_str().into(),
                message,
                observed_generation: r.generation,
                last_transition_time: since,
            }
        })
        .collect();
    let mut next = ModelOrchestraStatus {
        observed_generation: r.generation,
        conditions,
        operator_version: Some(r.operator_version.into()),
        ..r.previous.clone()
    };
    if let Outcome::Applied { observed, hash } = r.outcome {
        let apps: BTreeMap<String, ApplicationStatus> = observed
            .applications
            .iter()
            .map(|(k, h)| {
                let model = observed
                    .models
                    .get(k)
                    .map(|d| model_status(r.previous.applications.get(k).and_then(|a| a.model.as_ref()), d, r.now));
                let ready = h.replicas.ready && model.as_ref().is_none_or(|m| m.phase == ModelPhase::Ready);
                (k.clone(), ApplicationStatus { ready, model, ..h.replicas.clone() })
            })
            .collect();
        next.applications_ready = Some(format!("{}/{}", apps.values().filter(|a| a.ready).count(), apps.len()));
        if let Some(value) = observed.refresh.as_deref() {
            let new = r.previous.model_refresh.as_ref().is_none_or(|done| done.value != value);
            if new && refresh_done(value, &observed.models) {
                next.model_refresh = Some(ModelRefresh { value: value.to_string(), completed_at: r.now.clone() });
            }
        }
        next.applications = apps;
        next.gateway_address = observed.gateway_address.clone();
        next.applied_hash = Some(hash.clone());
    }
    next
}

/// A model's status: `since` moves only when the phase changes.
fn model_status(previous: Option<&ModelStatus>, d: &Download, now: &Time) -> ModelStatus {
    let since = match previous {
        Some(p) if p.phase == d.phase && p.job == d.job => p.since.clone(),
        _ => Some(now.clone()),
    };
    ModelStatus {
        phase: d.phase,
        message: d.message.clone(),
        since,
        job: d.job.clone(),
        refresh: d.refresh.clone(),
        serving: d.serving.clone(),
    }
}

/// The condition of `type_`, if set.
pub fn condition(status: &ModelOrchestraStatus, type_: ConditionType) -> Option<&Condition> {
    status.conditions.iter().find(|c| c.type_ == type_.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    const READY: ConditionType = ConditionType::Ready;
    const PROGRESSING: ConditionType = ConditionType::Progressing;
    const DEGRADED: ConditionType = ConditionType::Degraded;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn health(ready: bool) -> Health {
        Health {
            replicas: ApplicationStatus { ready_replicas: i32::from(ready), desired_replicas: 1, ready, model: None },
            problem: None,
        }
    }

    fn applied(ready: bool) -> Outcome {
        let observed = Observed {
            gateway: health(true),
            applications: BTreeMap::from([("chat".to_string(), health(ready))]),
            gateway_address: Some("demo-gateway.ns.svc:80".into()),
            ..Default::default()
        };
        Outcome::Applied { observed: Box::new(observed), hash: "h".into() }
    }

    fn next(previous: &ModelOrchestraStatus, generation: i64, outcome: &Outcome, now: i64) -> ModelOrchestraStatus {
        next_status(&Report {
            previous,
            generation: Some(generation),
            outcome,
            operator_version: "0.1.0",
            now: &at(now),
        })
    }

    fn status_of(s: &ModelOrchestraStatus, t: ConditionType) -> (String, String) {
        let c = condition(s, t).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn applied_with_all_deployments_ready_is_ready_and_not_progressing() {
        let s = next(&Default::default(), 2, &applied(true), 1);
        assert_eq!(status_of(&s, READY), ("True".into(), "Ready".into()));
        assert_eq!(status_of(&s, PROGRESSING).0, "False");
        assert_eq!(status_of(&s, DEGRADED).0, "False");
        assert_eq!(s.applications_ready.as_deref(), Some("1/1"));
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(s.applied_hash.as_deref(), Some("h"));
        assert!(!s.applications.contains_key("gateway"));
    }

    #[test]
    fn applied_but_waiting_for_an_application_is_progressing_with_its_name() {
        let s = next(&Default::default(), 1, &applied(false), 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "ApplicationsNotReady".into()));
        assert!(condition(&s, READY).unwrap().message.contains("chat"));
        assert_eq!(status_of(&s, PROGRESSING).0, "True");
    }

    #[test]
    fn an_unschedulable_application_is_degraded_with_the_schedulers_message() {
        let mut outcome = applied(false);
        if let Outcome::Applied { observed, .. } = &mut outcome {
            observed.applications.get_mut("chat").unwrap().problem = Some(PodProblem {
                unschedulable: true,
                message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.".into(),
            });
        }
        let s = next(&Default::default(), 1, &outcome, 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "Unschedulable".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "Unschedulable".into()));
        assert_eq!(
            condition(&s, READY).unwrap().message,
            "pods cannot be scheduled: chat: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
        );
    }

    #[test]
    fn a_render_failure_is_degraded_and_keeps_the_last_observed_applications() {
        let before = next(&Default::default(), 1, &applied(true), 1);
        let s = next(&before, 2, &Outcome::RenderFailed("spec.x: bad".into()), 2);
        assert_eq!(status_of(&s, READY), ("False".into(), "RenderFailed".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "RenderFailed".into()));
        assert_eq!(s.applications, before.applications);
        assert_eq!(s.applied_hash.as_deref(), Some("h"));
    }

    #[test]
    fn an_object_the_server_refuses_is_degraded_with_its_reason_and_nothing_progresses() {
        let before = next(&Default::default(), 1, &applied(true), 1);
        let s = next(&before, 2, &Outcome::Refused { reason: Reason::Invalid, message: "Service s: denied".into() }, 2);
        assert_eq!(status_of(&s, READY), ("False".into(), "Invalid".into()));
        assert_eq!(status_of(&s, PROGRESSING), ("False".into(), "Invalid".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "Invalid".into()));
        assert_eq!(s.gateway_address, before.gateway_address);
    }

    #[test]
    fn an_apply_failure_is_retried_and_degraded() {
        let s = next(&Default::default(), 1, &Outcome::ApplyFailed("applying ConfigMap c: timeout".into()), 1);
        assert_eq!(status_of(&s, PROGRESSING), ("True".into(), "Retrying".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "ApplyFailed".into()));
    }

    #[test]
    fn last_transition_time_changes_only_when_the_condition_flips() {
        let first = next(&Default::default(), 1, &applied(false), 10);
        let same = next(&first, 1, &applied(false), 20);
        assert_eq!(condition(&same, READY).unwrap().last_transition_time, at(10));
        assert_eq!(same, first, "nothing changed, so the status is identical and not written");
        let flipped = next(&same, 1, &applied(true), 30);
        assert_eq!(condition(&flipped, READY).unwrap().last_transition_time, at(30));
        assert_eq!(condition(&flipped, DEGRADED).unwrap().last_transition_time, at(10), "Degraded stayed False");
    }

    fn with_model(phase: ModelPhase, message: &str, refresh: Option<&str>) -> Outcome {
        let mut outcome = applied(true);
        if let Outcome::Applied { observed, .. } = &mut outcome {
            let download = Download {
                job: "chat-dl-1".into(),
                phase,
                message: message.into(),
                refresh: refresh.map(str::to_string),
                serving: None,
            };
            observed.models.insert("chat".into(), download);
            observed.refresh = refresh.map(str::to_string);
        }
        outcome
    }

    #[test]
    fn a_failed_download_is_model_download_failed_and_degraded_with_its_message() {
        let s = next(
            &Default::default(),
            1,
            &with_model(ModelPhase::Failed, "Job chat-dl-1: BackoffLimitExceeded", None),
            1,
        );
        assert_eq!(status_of(&s, READY), ("False".into(), "ModelDownloadFailed".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "ModelDownloadFailed".into()));
        assert_eq!(
            condition(&s, READY).unwrap().message,
            "model download failed: chat: Job chat-dl-1: BackoffLimitExceeded"
        );
        let model = s.applications["chat"].model.clone().unwrap();
        assert_eq!((model.phase, model.job.as_str()), (ModelPhase::Failed, "chat-dl-1"));
        assert!(!s.applications["chat"].ready);
    }

    #[test]
    fn an_application_whose_model_is_downloading_is_not_ready_and_says_so() {
        let s =
            next(&Default::default(), 1, &with_model(ModelPhase::Downloading, "Job chat-dl-1 is downloading", None), 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "ApplicationsNotReady".into()));
        assert_eq!(
            condition(&s, READY).unwrap().message,
            "waiting for chat (model Downloading: Job chat-dl-1 is downloading)"
        );
        assert_eq!(s.applications_ready.as_deref(), Some("0/1"));
    }

    #[test]
    fn a_models_since_moves_only_when_its_phase_changes() {
        let first = next(&Default::default(), 1, &with_model(ModelPhase::Downloading, "a", None), 10);
        let same = next(&first, 1, &with_model(ModelPhase::Downloading, "a", None), 20);
        assert_eq!(same.applications["chat"].model.as_ref().unwrap().since, Some(at(10)));
        let ready = next(&same, 1, &with_model(ModelPhase::Ready, "done", None), 30);
        assert_eq!(ready.applications["chat"].model.as_ref().unwrap().since, Some(at(30)));
    }

    #[test]
    fn a_refresh_is_stamped_once_when_its_models_are_ready() {
        let running = next(&Default::default(), 1, &with_model(ModelPhase::Downloading, "", Some("r1")), 10);
        assert_eq!(running.model_refresh, None);
        let done = next(&running, 1, &with_model(ModelPhase::Ready, "", Some("r1")), 20);
        assert_eq!(done.model_refresh, Some(ModelRefresh { value: "r1".into(), completed_at: at(20) }));
        let later = next(&done, 1, &with_model(ModelPhase::Ready, "", Some("r1")), 30);
        assert_eq!(later.model_refresh, done.model_refresh, "the same value is not stamped again");
    }

    #[test]
    fn a_deployment_is_ready_only_when_current_updated_and_all_replicas_ready() {
        let mut d: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2}
        }))
        .unwrap();
        assert!(deployment_readiness(Some(&d)).ready);
        d.metadata.generation = Some(3);
        assert!(!deployment_readiness(Some(&d)).ready, "status describes an older generation");
        assert!(!deployment_readiness(None).ready);
    }
}
