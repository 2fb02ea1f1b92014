//! The models of an Ollama application, decided from what each replica holds: whether a
//! replica may take traffic (its models-ready condition, a readiness gate), and where each
//! listed model stands over the replicas that serve (`status.applications.<app>.models`).
//!
//! A replica that has not served yet takes traffic once it holds every listed model the
//! models registry has, and at least one: a model the registry does not have (a typo) is
//! `Failed` naming it, and the gateway answers its requests with why, while the others
//! serve — a typo is not an outage. A model whose pull failed otherwise (the registry down,
//! a broken body) keeps a new replica out: it is retried, and a replica without it would
//! answer "not found" beside replicas that have it. A replica that serves keeps serving
//! while it pulls a model added to the list (it answers for the models it holds; the status
//! says the new one is `Pulling`): taking it out would stop every model of a one-replica
//! application for a pull. Pure: the puller (`controller::models`) does the requests.

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
    /// Its last pull failed because the registry does not have it ([`is_missing`]).
    pub(crate) missing: bool,
}

impl InReplica {
    /// The registry does not have it: its last pull said so.
    fn absent(&self) -> bool {
        self.phase == PullPhase::Failed && self.missing
    }
}

/// Whether a pull's error says the registry does not have the model.
pub(crate) fn is_missing(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("file does not exist")
        || m.contains("manifest unknown")
        || m.contains("not found")
        || m.contains("status code 404")
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

/// Whether the replica may take traffic: it holds every listed model the registry has (at
/// least one), or it already serves.
pub(crate) fn gate(listed: &[String], replica: &Replica) -> bool {
    replica.gate == Some(true) || holds_all_it_can(listed, replica)
}

fn holds_all_it_can(listed: &[String], replica: &Replica) -> bool {
    let (held, waiting, _) = sorted(listed, replica);
    waiting.is_empty() && (!held.is_empty() || listed.is_empty())
}

/// The listed models of a replica: held, waited for (pending, pulling, failed for a reason
/// a retry may mend) and absent from the registry.
fn sorted<'a>(listed: &'a [String], replica: &Replica) -> (Vec<&'a str>, Vec<&'a str>, Vec<&'a str>) {
    let (mut held, mut waiting, mut absent) = (Vec::new(), Vec::new(), Vec::new());
    for m in listed {
        match replica.models.get(m) {
            Some(s) if s.phase == PullPhase::Ready => held.push(m.as_str()),
            Some(s) if s.absent() => absent.push(m.as_str()),
            _ => waiting.push(m.as_str()),
        }
    }
    (held, waiting, absent)
}

/// The message of the models-ready condition: what the replica waits for, or serves.
pub(crate) fn gate_message(listed: &[String], replica: &Replica) -> String {
    let (held, waiting, absent) = sorted(listed, replica);
    let describe = |names: &[&str]| {
        names
            .iter()
            .map(|m| match replica.models.get(*m) {
                Some(s) if !s.message.is_empty() => format!("{m} ({}: {})", s.phase.as_str(), s.message),
                Some(s) => format!("{m} ({})", s.phase.as_str()),
                None => format!("{m} (Pending)"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !waiting.is_empty() || (held.is_empty() && !listed.is_empty()) {
        let all: Vec<&str> = waiting.iter().chain(&absent).copied().collect();
        format!("waiting for {}", describe(&all))
    } else if absent.is_empty() {
        format!("every listed model is present ({})", listed.join(", "))
    } else {
        format!("serving {}; the models registry does not have {}", held.join(", "), describe(&absent))
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

    fn failed(message: &str) -> InReplica {
        InReplica {
            phase: PullPhase::Failed,
            missing: is_missing(message),
            message: message.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_model_the_registry_does_not_have_keeps_no_replica_from_serving_the_others() {
        let models = listed(&["smollm2:135m", "nosuch:1b"]);
        let r = replica(
            "p",
            None,
            &[("smollm2:135m", ready("x")), ("nosuch:1b", failed("pull model manifest: file does not exist"))],
        );
        assert!(gate(&models, &r));
        assert_eq!(
            gate_message(&models, &r),
            "serving smollm2:135m; the models registry does not have nosuch:1b (Failed: pull model manifest: file does not exist)"
        );
    }

    #[test]
    fn a_replica_holding_none_of_its_models_takes_no_traffic_even_when_the_registry_lacks_them_all() {
        let models = listed(&["nosuch:1b"]);
        let r = replica("p", None, &[("nosuch:1b", failed("pull model manifest: file does not exist"))]);
        assert!(!gate(&models, &r));
        assert!(gate_message(&models, &r).starts_with("waiting for nosuch:1b (Failed: "));
    }

    #[test]
    fn a_pull_that_failed_for_another_reason_keeps_a_new_replica_out_until_it_is_retried() {
        let models = listed(&["smollm2:135m", "gemma3:270m"]);
        let r = replica("p", None, &[("smollm2:135m", ready("x")), ("gemma3:270m", failed("unexpected EOF"))]);
        assert!(!gate(&models, &r), "the registry has it: a replica without it would answer not found beside others");
        assert_eq!(gate_message(&models, &r), "waiting for gemma3:270m (Failed: unexpected EOF)");
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
