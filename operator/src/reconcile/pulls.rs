//! The models of an Ollama application, decided from what each replica holds: whether a
//! replica may take traffic (its models-ready condition, a readiness gate), and where each
//! listed model stands over the replicas that serve (`status.applications.<app>.models`).
//!
//! A replica that has not served yet takes traffic once it holds every listed model. A
//! replica that serves keeps serving while it pulls a model added to the list (it answers
//! for the models it holds; the status says the new one is `Pulling`): taking it out would
//! stop every model of a one-replica application for a pull. Pure: the puller
//! (`controller::models`) does the requests.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use model_orchestra_api::v1alpha2::{PullPhase, PulledModelStatus};

/// Where one model stands in one replica, as the puller last saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct InReplica {
    pub(crate) phase: PullPhase,
    /// Bytes received and expected, while it is pulled.
    pub(crate) completed: i64,
    pub(crate) total: i64,
    pub(crate) digest: Option<String>,
    pub(crate) size: Option<i64>,
    /// When this replica last finished pulling it.
    pub(crate) pulled_at: Option<Time>,
    /// Why it is not Ready.
    pub(crate) message: String,
}

/// One replica of an Ollama application.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Replica {
    pub(crate) pod: String,
    /// Its models-ready condition as set (None: not yet).
    pub(crate) gate: Option<bool>,
    /// By listed name.
    pub(crate) models: BTreeMap<String, InReplica>,
}

/// Whether the replica may take traffic: it holds every listed model, or it already serves.
pub(crate) fn gate(listed: &[String], replica: &Replica) -> bool {
    replica.gate == Some(true) || holds_all(listed, replica)
}

fn holds_all(listed: &[String], replica: &Replica) -> bool {
    listed.iter().all(|m| replica.models.get(m).is_some_and(|s| s.phase == PullPhase::Ready))
}

/// The message of the models-ready condition: what the replica waits for.
pub(crate) fn gate_message(listed: &[String], replica: &Replica) -> String {
    let missing: Vec<String> = listed
        .iter()
        .filter(|m| replica.models.get(*m).is_none_or(|s| s.phase != PullPhase::Ready))
        .map(|m| match replica.models.get(m) {
            Some(s) if !s.message.is_empty() => format!("{m} ({}: {})", s.phase.as_str(), s.message),
            Some(s) => format!("{m} ({})", s.phase.as_str()),
            None => format!("{m} (Pending)"),
        })
        .collect();
    if missing.is_empty() {
        format!("every listed model is present ({})", listed.join(", "))
    } else {
        format!("waiting for {}", missing.join("; "))
    }
}

/// Each listed model over the replicas that serve, in the order listed. A model is Ready
/// once every replica holds it; Failed when one replica's pull failed; Pulling while one
/// pulls it (with the bytes of every replica pulling it); Pending otherwise.
pub(crate) fn statuses(
    listed: &[String],
    replicas: &[Replica],
    previous: &[PulledModelStatus],
) -> Vec<PulledModelStatus> {
    listed
        .iter()
        .map(|name| {
            let states: Vec<(&str, &InReplica)> =
                replicas.iter().filter_map(|r| r.models.get(name).map(|s| (r.pod.as_str(), s))).collect();
            let holding = states.iter().filter(|(_, s)| s.phase == PullPhase::Ready).count();
            let failed = states.iter().find(|(_, s)| s.phase == PullPhase::Failed);
            let pulling: Vec<&InReplica> =
                states.iter().filter(|(_, s)| s.phase == PullPhase::Pulling).map(|(_, s)| *s).collect();
            let phase = if !replicas.is_empty() && holding == replicas.len() {
                PullPhase::Ready
            } else if failed.is_some() {
                PullPhase::Failed
            } else if !pulling.is_empty() {
                PullPhase::Pulling
            } else {
                PullPhase::Pending
            };
            let message = match (phase, failed) {
                (PullPhase::Failed, Some((pod, s))) => format!("{pod}: {}", s.message),
                (PullPhase::Pending, _) if replicas.is_empty() => "no replica runs yet".into(),
                (PullPhase::Ready, _) => String::new(),
                _ => states
                    .iter()
                    .find(|(_, s)| !s.message.is_empty())
                    .map(|(_, s)| s.message.clone())
                    .unwrap_or_default(),
            };
            let held = states.iter().find(|(_, s)| s.phase == PullPhase::Ready).map(|(_, s)| *s);
            let earlier = previous.iter().find(|p| p.name == *name);
            let last_pull_time = states
                .iter()
                .filter_map(|(_, s)| s.pulled_at.clone())
                .max_by(|a, b| a.0.cmp(&b.0))
                .or_else(|| earlier.and_then(|p| p.last_pull_time.clone()));
            PulledModelStatus {
                name: name.clone(),
                phase,
                completed_bytes: (phase == PullPhase::Pulling).then(|| pulling.iter().map(|s| s.completed).sum()),
                total_bytes: (phase == PullPhase::Pulling).then(|| pulling.iter().map(|s| s.total).sum()),
                digest: held.and_then(|s| s.digest.clone()).or_else(|| earlier.and_then(|p| p.digest.clone())),
                size: held.and_then(|s| s.size).or_else(|| earlier.and_then(|p| p.size)),
                last_pull_time,
                replicas: format!("{holding}/{}", replicas.len()),
                message,
            }
        })
        .collect()
}

/// `<ready>/<listed>` over every Ollama application's models.
pub(crate) fn models_ready<'a>(applications: impl IntoIterator<Item = &'a [PulledModelStatus]>) -> Option<String> {
    let (mut ready, mut listed) = (0, 0);
    for models in applications {
        listed += models.len();
        ready += models.iter().filter(|m| m.phase == PullPhase::Ready).count();
    }
    (listed > 0).then(|| format!("{ready}/{listed}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(digest: &str) -> InReplica {
        InReplica { phase: PullPhase::Ready, digest: Some(digest.into()), size: Some(100), ..Default::default() }
    }

    fn pulling(completed: i64, total: i64) -> InReplica {
        InReplica { phase: PullPhase::Pulling, completed, total, ..Default::default() }
    }

    fn replica(pod: &str, gate: Option<bool>, models: &[(&str, InReplica)]) -> Replica {
        Replica { pod: pod.into(), gate, models: models.iter().map(|(n, s)| (n.to_string(), s.clone())).collect() }
    }

    fn listed(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_new_replica_takes_traffic_only_once_it_holds_every_listed_model() {
        let models = listed(&["a", "b"]);
        assert!(!gate(&models, &replica("p", None, &[("a", ready("x"))])));
        assert!(gate(&models, &replica("p", None, &[("a", ready("x")), ("b", ready("y"))])));
    }

    #[test]
    fn a_serving_replica_keeps_serving_while_it_pulls_an_added_model() {
        let r = replica("p", Some(true), &[("a", ready("x")), ("b", pulling(10, 100))]);
        assert!(gate(&listed(&["a", "b"]), &r));
    }

    #[test]
    fn a_model_is_ready_once_every_replica_holds_it() {
        let replicas = [replica("p", None, &[("a", ready("x"))]), replica("q", None, &[("a", pulling(40, 100))])];
        let s = &statuses(&listed(&["a"]), &replicas, &[])[0];
        assert_eq!((s.phase, s.replicas.as_str()), (PullPhase::Pulling, "1/2"));
        assert_eq!((s.completed_bytes, s.total_bytes), (Some(40), Some(100)));
        assert_eq!(s.digest.as_deref(), Some("x"), "a replica that holds it says its digest");
    }

    #[test]
    fn a_failed_pull_names_the_replica_and_why() {
        let failed = InReplica {
            phase: PullPhase::Failed,
            message: "pull model manifest: file does not exist".into(),
            ..Default::default()
        };
        let s = &statuses(&listed(&["nope"]), &[replica("p", None, &[("nope", failed)])], &[])[0];
        assert_eq!(s.phase, PullPhase::Failed);
        assert_eq!(s.message, "p: pull model manifest: file does not exist");
    }

    #[test]
    fn a_model_no_replica_reports_yet_is_pending_and_a_removed_one_is_dropped() {
        let out = statuses(&listed(&["a"]), &[], &[PulledModelStatus { name: "gone".into(), ..Default::default() }]);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].name.as_str(), out[0].phase), ("a", PullPhase::Pending));
    }

    #[test]
    fn models_ready_counts_every_applications_models() {
        let a = statuses(&listed(&["a", "b"]), &[replica("p", None, &[("a", ready("x"))])], &[]);
        let b = statuses(&listed(&["c"]), &[replica("q", None, &[("c", ready("z"))])], &[]);
        assert_eq!(models_ready([a.as_slice(), b.as_slice()]), Some("2/3".into()));
        assert_eq!(models_ready(std::iter::empty::<&[PulledModelStatus]>()), None);
    }
}
