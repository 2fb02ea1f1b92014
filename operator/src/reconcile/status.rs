//! The status a reconcile reports: conditions `Ready`, `Progressing`, `Degraded` with
//! reasons, per-application readiness from the Deployments, the gateway address. Pure: the
//! reconciler gathers the facts, this decides the status, and it is written only if it
//! changed.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{ApplicationStatus, ModelOrchestraStatus};

pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";

/// How far the reconcile got.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The spec cannot be rendered: nothing was applied or pruned.
    RenderFailed(String),
    /// Rendering worked; applying or pruning failed (retried with backoff).
    ApplyFailed(String),
    /// Every object is applied.
    Applied,
}

/// What the cluster says about the applied objects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// Per application (keyed by application name) and the gateway (key `gateway`).
    pub components: BTreeMap<String, ApplicationStatus>,
    pub gateway_address: Option<String>,
}

/// Readiness of one component from its Deployment (replicas may be owned by an autoscaler,
/// so the live `spec.replicas` is the desired count).
pub fn deployment_readiness(d: Option<&Deployment>) -> ApplicationStatus {
    let Some(d) = d else { return ApplicationStatus::default() };
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = d.status.clone().unwrap_or_default();
    let ready_replicas = status.ready_replicas.unwrap_or(0);
    let current = status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0) >= desired;
    ApplicationStatus { ready_replicas, desired_replicas: desired, ready: current && updated && ready_replicas >= desired }
}

/// The next status. `lastTransitionTime` moves only when a condition's status flips.
pub fn next_status(
    previous: &ModelOrchestraStatus,
    generation: Option<i64>,
    outcome: &Outcome,
    observed: &Observed,
    operator_version: &str,
    applied_hash: Option<String>,
    now: &Time,
) -> ModelOrchestraStatus {
    let apps: BTreeMap<String, ApplicationStatus> =
        observed.components.iter().filter(|(k, _)| k.as_str() != "gateway").map(|(k, v)| (k.clone(), v.clone())).collect();
    let not_ready: Vec<&str> = observed.components.iter().filter(|(_, s)| !s.ready).map(|(k, _)| k.as_str()).collect();
    let ready_count = apps.values().filter(|a| a.ready).count();
    let (ready, progressing, degraded) = match outcome {
        Outcome::RenderFailed(m) => (("False", "RenderFailed", m.clone()), ("False", "RenderFailed", m.clone()), ("True", "RenderFailed", m.clone())),
        Outcome::ApplyFailed(m) => (("False", "ApplyFailed", m.clone()), ("True", "Retrying", m.clone()), ("True", "ApplyFailed", m.clone())),
        Outcome::Applied if not_ready.is_empty() => {
            let m = format!("{ready_count}/{} applications and the gateway are ready", apps.len());
            (("True", "Ready", m.clone()), ("False", "Ready", m.clone()), ("False", "AsExpected", "all objects applied".to_string()))
        }
        Outcome::Applied => {
            let m = format!("waiting for {}", not_ready.join(", "));
            (("False", "ApplicationsNotReady", m.clone()), ("True", "ApplicationsNotReady", m), ("False", "AsExpected", "all objects applied".to_string()))
        }
    };
    let conditions = [(READY, ready), (PROGRESSING, progressing), (DEGRADED, degraded)]
        .into_iter()
        .map(|(type_, (status, reason, message))| {
            let last = previous.conditions.iter().find(|c| c.type_ == type_);
            let since = match last {
                Some(c) if c.status == status => c.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: type_.into(),
                status: status.into(),
                reason: reason.into(),
                message,
                observed_generation: generation,
                last_transition_time: since,
            }
        })
        .collect();
    let keep_observed = matches!(outcome, Outcome::RenderFailed(_));
    ModelOrchestraStatus {
        observed_generation: generation,
        conditions,
        applications_ready: if keep_observed { previous.applications_ready.clone() } else { Some(format!("{ready_count}/{}", apps.len())) },
        applications: if keep_observed { previous.applications.clone() } else { apps },
        gateway_address: if keep_observed { previous.gateway_address.clone() } else { observed.gateway_address.clone() },
        operator_version: Some(operator_version.into()),
        applied_hash: applied_hash.or_else(|| previous.applied_hash.clone()),
    }
}

/// The condition of `type_`, if set.
pub fn condition<'a>(status: &'a ModelOrchestraStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn observed(ready: bool) -> Observed {
        let s = ApplicationStatus { ready_replicas: i32::from(ready), desired_replicas: 1, ready };
        Observed {
            components: BTreeMap::from([("chat".to_string(), s.clone()), ("gateway".to_string(), ApplicationStatus { ready: true, ..s })]),
            gateway_address: Some("demo-gateway.ns.svc:80".into()),
        }
    }

    fn status_of(s: &ModelOrchestraStatus, t: &str) -> (String, String) {
        let c = condition(s, t).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn applied_with_all_deployments_ready_is_ready_and_not_progressing() {
        let s = next_status(&Default::default(), Some(2), &Outcome::Applied, &observed(true), "0.1.0", Some("h".into()), &at(1));
        assert_eq!(status_of(&s, READY), ("True".into(), "Ready".into()));
        assert_eq!(status_of(&s, PROGRESSING).0, "False");
        assert_eq!(status_of(&s, DEGRADED).0, "False");
        assert_eq!(s.applications_ready.as_deref(), Some("1/1"));
        assert_eq!(s.observed_generation, Some(2));
        assert!(!s.applications.contains_key("gateway"));
    }

    #[test]
    fn applied_but_waiting_for_an_application_is_progressing_with_its_name() {
        let s = next_status(&Default::default(), Some(1), &Outcome::Applied, &observed(false), "0.1.0", None, &at(1));
        assert_eq!(status_of(&s, READY), ("False".into(), "ApplicationsNotReady".into()));
        assert!(condition(&s, READY).unwrap().message.contains("chat"));
        assert_eq!(status_of(&s, PROGRESSING).0, "True");
    }

    #[test]
    fn a_render_failure_is_degraded_and_keeps_the_last_observed_applications() {
        let before = next_status(&Default::default(), Some(1), &Outcome::Applied, &observed(true), "0.1.0", Some("h".into()), &at(1));
        let s = next_status(&before, Some(2), &Outcome::RenderFailed("spec.x: bad".into()), &Observed::default(), "0.1.0", None, &at(2));
        assert_eq!(status_of(&s, READY), ("False".into(), "RenderFailed".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "RenderFailed".into()));
        assert_eq!(s.applications, before.applications);
        assert_eq!(s.applied_hash.as_deref(), Some("h"));
    }

    #[test]
    fn last_transition_time_changes_only_when_the_condition_flips() {
        let first = next_status(&Default::default(), Some(1), &Outcome::Applied, &observed(false), "0.1.0", None, &at(10));
        let same = next_status(&first, Some(1), &Outcome::Applied, &observed(false), "0.1.0", None, &at(20));
        assert_eq!(condition(&same, READY).unwrap().last_transition_time, at(10));
        assert_eq!(same, first, "nothing changed, so the status is identical and not written");
        let flipped = next_status(&same, Some(1), &Outcome::Applied, &observed(true), "0.1.0", None, &at(30));
        assert_eq!(condition(&flipped, READY).unwrap().last_transition_time, at(30));
        assert_eq!(condition(&flipped, DEGRADED).unwrap().last_transition_time, at(10), "Degraded stayed False");
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
