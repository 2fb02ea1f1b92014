//! distributed-llama groups, decided without an API server: when the root may run (only
//! with every worker ready, since it cannot serve without them), when it must start again
//! (a worker was replaced: the new one holds no slice of the model until the root sends
//! it), and what the group's status says.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::v1alpha2::{GroupStatus, MemberStatus};
use serde_json::Value;

use crate::chart::{Component, RenderedObject, POD_INDEX_LABEL, ROLE_LABEL};
use crate::reconcile::status::{Health, Rollout};

/// The root's pod-template annotation naming the worker pods it runs with (`<index>:<uid
/// prefix>`, comma-separated): a replaced worker changes it, and so restarts the root.
pub(crate) use model_orchestra_api::keys::WORKERS_ANNOTATION;

/// One pod of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub uid: String,
    /// 0 for the root, 1… for the workers.
    pub index: i32,
    pub node: Option<String>,
    pub ready: bool,
    /// Being deleted: no longer a member.
    pub terminating: bool,
    /// The root's: the workers it was started with ([`WORKERS_ANNOTATION`]).
    pub runs_with: Option<String>,
}

/// A pod as a member of its group: the root by its role label, a worker by its ordinal.
pub(crate) fn member(pod: &Pod) -> Option<Member> {
    let labels = pod.metadata.labels.as_ref()?;
    let index = match labels.get(ROLE_LABEL)?.as_str() {
        "root" => 0,
        "worker" => labels.get(POD_INDEX_LABEL)?.parse().ok()?,
        _ => return None,
    };
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Some(Member {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        index,
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        ready,
        terminating: pod.metadata.deletion_timestamp.is_some(),
        runs_with: pod.metadata.annotations.as_ref().and_then(|a| a.get(WORKERS_ANNOTATION).cloned()),
    })
}

/// What a group's root does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Not every worker is ready: the root is held at zero replicas; `waiting` says for what.
    Wait { waiting: String },
    /// Every worker is ready: the root runs with these worker pods.
    Serve { workers: String },
}

/// A distributed-llama group: its size and whether its root may run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Group {
    pub nodes: i32,
    pub gate: Gate,
}

/// The member at each index of a group of `nodes`: the one not being deleted.
fn members_by_index(nodes: i32, members: &[Member]) -> Vec<(i32, Option<&Member>)> {
    (0..nodes).map(|i| (i, members.iter().find(|m| m.index == i && !m.terminating))).collect()
}

/// Whether the root of a group of `nodes` may run, from its members' pods.
pub(crate) fn gate(nodes: i32, members: &[Member]) -> Gate {
    let workers: Vec<(i32, Option<&Member>)> = members_by_index(nodes, members).into_iter().skip(1).collect();
    let waiting: Vec<String> = workers
        .iter()
        .filter_map(|(i, m)| match m {
            None => Some(format!("worker {i} (no pod)")),
            Some(m) if !m.ready => Some(format!("worker {i}")),
            Some(_) => None,
        })
        .collect();
    if !waiting.is_empty() {
        let ready = workers.len() - waiting.len();
        return Gate::Wait {
            waiting: format!("{ready}/{} workers ready, waiting for {}", workers.len(), waiting.join(", ")),
        };
    }
    // A UID's first 8 hex digits tell a replaced pod from its predecessor.
    let named = workers.iter().filter_map(|(i, m)| {
        let uid = &m.as_ref()?.uid;
        Some(format!("{i}:{}", uid.get(..8).unwrap_or(uid)))
    });
    Gate::Serve { workers: named.collect::<Vec<_>>().join(",") }
}

/// The workers of `now` that are not those of `before` (both [`WORKERS_ANNOTATION`] values).
fn replaced(before: &str, now: &str) -> Vec<String> {
    let before: Vec<&str> = before.split(',').collect();
    now.split(',').filter(|w| !before.contains(w)).filter_map(|w| w.split(':').next()).map(str::to_string).collect()
}

/// Shapes each group's root Deployment to its gate: zero replicas while it waits; while it
/// serves, its pod template names the workers it runs with.
pub(crate) fn apply_gates(objects: &mut [RenderedObject], gates: &BTreeMap<String, Gate>) {
    for o in objects.iter_mut().filter(|o| o.kind == Kind::Deployment) {
        let Component::Application(app) = &o.component else { continue };
        match gates.get(app) {
            Some(Gate::Wait { .. }) => o.object["spec"]["replicas"] = Value::from(0),
            Some(Gate::Serve { workers }) => {
                let annotations = o.object.pointer_mut("/spec/template/metadata/annotations");
                if let Some(a) = annotations.and_then(Value::as_object_mut) {
                    a.insert(WORKERS_ANNOTATION.into(), Value::from(workers.as_str()));
                }
            }
            None => {}
        }
    }
}

/// The group's status. A root counts as ready only while it runs with the current workers.
/// `previous` is the last status reported: a group that served (or was already restarting)
/// and waits again is restarting, and says so until it serves again. `restarted_from` is
/// the workers the root was told to run with before this reconcile told it `gate`'s.
pub(crate) fn status(
    nodes: i32,
    members: &[Member],
    gate: &Gate,
    restarted_from: Option<&str>,
    previous: Option<&GroupStatus>,
) -> GroupStatus {
    let by_index = members_by_index(nodes, members);
    let of = |(index, m): &(i32, Option<&Member>)| MemberStatus {
        index: *index,
        ready: m.is_some_and(|m| m.ready),
        node: m.and_then(|m| m.node.clone()).unwrap_or_default(),
    };
    let root_pod = by_index[0].1;
    // The workers a running root started with, when they are no longer the group's.
    let outdated_against = |before: Option<&str>| match (gate, before) {
        (Gate::Serve { workers }, Some(before)) if before != workers => Some(replaced(before, workers)),
        _ => None,
    };
    // A root this reconcile restarted may already run again when it is observed (pods start
    // in milliseconds where nothing is pulled): its status still says why, once.
    let outdated =
        outdated_against(root_pod.and_then(|r| r.runs_with.as_deref())).or_else(|| outdated_against(restarted_from));
    let mut root = of(&by_index[0]);
    root.ready &= outdated.is_none();
    let workers: Vec<MemberStatus> = by_index[1..].iter().map(of).collect();
    let ready = i32::from(root.ready) + workers.iter().filter(|w| w.ready).count() as i32;
    let restarting =
        outdated.is_some() || previous.is_some_and(|p| p.root.ready || p.message.starts_with("restarting"));
    let doing = if restarting { "restarting" } else { "starting" };
    let message = match (gate, outdated) {
        (Gate::Wait { waiting }, _) => {
            format!("{doing}: the root runs only with every worker ready ({waiting})")
        }
        (Gate::Serve { .. }, Some(replaced)) if !replaced.is_empty() => format!(
            "restarting: worker {} was replaced; the root starts again to send every worker its slice of the model",
            replaced.join(", ")
        ),
        (Gate::Serve { .. }, _) if !root.ready => format!(
            "{doing}: every worker is ready; the root connects to the {} workers and sends each its slice of the model",
            workers.len()
        ),
        (Gate::Serve { .. }, _) => String::new(),
    };
    GroupStatus { nodes, ready, root, workers, message }
}

/// An application's health from its root Deployment's and its group's: ready when the root
/// serves and every member is ready; until then its rollout waits for the group (a stuck
/// root stays stuck), and its replicas count the group's members.
pub(crate) fn health(root: Health, group: GroupStatus) -> Health {
    let mut h = root;
    let ready = h.replicas.ready && group.ready == group.nodes;
    if !ready && !matches!(h.rollout, Rollout::Stuck { .. }) {
        let message =
            if group.message.is_empty() { "the root is not ready".to_string() } else { group.message.clone() };
        h.rollout = Rollout::Progressing { message, serving: false };
    }
    h.replicas.ready = ready;
    h.replicas.ready_replicas = group.ready;
    h.replicas.desired_replicas = group.nodes;
    h.replicas.group = Some(group);
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn worker(index: i32, uid: &str, ready: bool) -> Member {
        Member {
            uid: format!("{uid}-uid-long-enough"),
            index,
            node: Some(format!("node-{index}")),
            ready,
            terminating: false,
            runs_with: None,
        }
    }

    fn root(ready: bool) -> Member {
        Member { index: 0, ..worker(0, "r", ready) }
    }

    #[test]
    fn a_pod_is_the_root_by_its_role_and_a_worker_by_its_ordinal() {
        let pod = |labels: Value| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"uid": "u", "labels": labels},
                "spec": {"containers": [], "nodeName": "n1"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            }))
            .unwrap()
        };
        let root = member(&pod(json!({ROLE_LABEL: "root"}))).unwrap();
        assert_eq!((root.index, root.node.as_deref(), root.ready), (0, Some("n1"), true));
        assert_eq!(member(&pod(json!({ROLE_LABEL: "worker", POD_INDEX_LABEL: "3"}))).unwrap().index, 3);
        assert_eq!(member(&pod(json!({"app": "x"}))), None, "not a group's pod");
    }

    #[test]
    fn the_root_waits_until_every_worker_is_ready() {
        let members = [worker(1, "a", true), worker(2, "b", false)];
        let Gate::Wait { waiting } = gate(4, &members) else { panic!("serves without workers 2 and 3") };
        assert_eq!(waiting, "1/3 workers ready, waiting for worker 2, worker 3 (no pod)");
    }

    #[test]
    fn a_worker_being_deleted_is_not_a_member() {
        let mut leaving = worker(1, "a", true);
        leaving.terminating = true;
        assert!(matches!(gate(2, &[leaving]), Gate::Wait { .. }));
    }

    #[test]
    fn a_replaced_worker_changes_what_the_root_runs_with_and_the_root_itself_does_not() {
        let before = gate(3, &[root(true), worker(1, "a", true), worker(2, "b", true)]);
        let root_replaced = gate(3, &[root(false), worker(1, "a", true), worker(2, "b", true)]);
        let worker_replaced = gate(3, &[root(true), worker(1, "a", true), worker(2, "c", true)]);
        assert!(matches!(before, Gate::Serve { .. }));
        assert_eq!(before, root_replaced);
        assert_ne!(before, worker_replaced);
    }

    #[test]
    fn workers_beyond_the_group_size_do_not_count() {
        let members = [worker(1, "a", true), worker(2, "b", false), worker(3, "c", false)];
        assert!(matches!(gate(2, &members), Gate::Serve { .. }), "a scale-down's leftover workers are ignored");
    }

    #[test]
    fn a_waiting_root_is_held_at_zero_replicas_and_a_serving_one_names_its_workers() {
        let deployment = |app: &str| RenderedObject {
            kind: Kind::Deployment,
            name: app.into(),
            component: Component::Application(app.into()),
            object: json!({"spec": {"replicas": 1, "template": {"metadata": {"annotations": {}}}}}),
        };
        let mut objects = vec![deployment("waits"), deployment("serves"), deployment("takeoff")];
        let gates = BTreeMap::from([
            ("waits".to_string(), Gate::Wait { waiting: String::new() }),
            ("serves".to_string(), Gate::Serve { workers: "abc".into() }),
        ]);
        apply_gates(&mut objects, &gates);
        assert_eq!(objects[0].object["spec"]["replicas"], 0);
        assert_eq!(objects[1].object["spec"]["replicas"], 1);
        assert_eq!(objects[1].object["spec"]["template"]["metadata"]["annotations"][WORKERS_ANNOTATION], "abc");
        assert_eq!(objects[2].object, deployment("takeoff").object);
    }

    #[test]
    fn the_status_lists_every_member_with_its_node_and_counts_the_ready_ones() {
        let members = [root(true), worker(1, "a", true), worker(2, "b", false)];
        let s = status(4, &members, &gate(4, &members), None, None);
        assert_eq!((s.nodes, s.ready), (4, 2));
        assert_eq!(s.root, MemberStatus { index: 0, ready: true, node: "node-0".into() });
        let workers: Vec<(i32, bool, &str)> = s.workers.iter().map(|w| (w.index, w.ready, w.node.as_str())).collect();
        assert_eq!(workers, [(1, true, "node-1"), (2, false, "node-2"), (3, false, "")]);
    }

    #[test]
    fn a_group_that_served_and_lost_a_worker_says_it_is_restarting_until_it_serves_again() {
        let serving = [root(true), worker(1, "a", true)];
        let served = status(2, &serving, &gate(2, &serving), None, None);
        assert_eq!(served.message, "");
        let lost = [root(true)];
        let waiting = status(2, &lost, &gate(2, &lost), None, Some(&served));
        assert!(
            waiting.message.starts_with("restarting: the root runs only with every worker ready"),
            "{}",
            waiting.message
        );
        assert!(waiting.message.contains("worker 1 (no pod)"), "{}", waiting.message);
        let back = [worker(1, "b", true)];
        let starting = status(2, &back, &gate(2, &back), None, Some(&waiting));
        assert!(starting.message.starts_with("restarting: every worker is ready"), "{}", starting.message);
        let first = status(2, &back, &gate(2, &back), None, None);
        assert!(first.message.starts_with("starting:"), "{}", first.message);
    }

    #[test]
    fn a_root_started_with_a_replaced_worker_is_not_ready_and_the_status_names_the_worker() {
        let old = [worker(1, "a", true), worker(2, "b", true)];
        let Gate::Serve { workers: started_with } = gate(3, &old) else { panic!("serves") };
        let mut running = root(true);
        running.runs_with = Some(started_with.clone());
        let now = [running.clone(), worker(1, "a", true), worker(2, "c", true)];
        let s = status(3, &now, &gate(3, &now), None, None);
        assert!(!s.root.ready);
        assert_eq!(s.ready, 2);
        assert!(s.message.starts_with("restarting: worker 2 was replaced"), "{}", s.message);
        let same = [running, worker(1, "a", true), worker(2, "b", true)];
        let s = status(3, &same, &gate(3, &same), None, None);
        assert!(s.root.ready && s.message.is_empty(), "{s:?}");
    }

    #[test]
    fn a_root_restarted_by_this_reconcile_says_why_even_when_its_new_pod_already_runs() {
        let old = [worker(1, "a", true), worker(2, "b", true)];
        let Gate::Serve { workers: before } = gate(3, &old) else { panic!("serves") };
        let now = [worker(1, "a", true), worker(2, "c", true)];
        let Gate::Serve { workers: after } = gate(3, &now) else { panic!("serves") };
        let mut restarted = root(true);
        restarted.runs_with = Some(after);
        let members = [restarted, worker(1, "a", true), worker(2, "c", true)];
        let s = status(3, &members, &gate(3, &members), Some(&before), None);
        assert!(!s.root.ready, "ready once the Deployment reports it, not in the reconcile that restarted it");
        assert!(s.message.starts_with("restarting: worker 2 was replaced"), "{}", s.message);
        let next = status(3, &members, &gate(3, &members), None, Some(&s));
        assert!(next.root.ready && next.message.is_empty(), "{next:?}");
    }

    #[test]
    fn a_group_is_ready_only_when_its_root_serves_and_every_member_is_ready() {
        let root_deployment = |ready: bool| Health {
            replicas: model_orchestra_api::v1alpha2::ApplicationStatus { ready, ..Default::default() },
            rollout: Rollout::Done,
            problem: None,
            sleeps: false,
        };
        let all = [root(true), worker(1, "a", true)];
        let h = health(root_deployment(true), status(2, &all, &gate(2, &all), None, None));
        assert!(h.replicas.ready);
        assert_eq!((h.replicas.ready_replicas, h.replicas.desired_replicas), (2, 2));
        // A root held at zero replicas is a finished rollout: the group says otherwise.
        let waiting = [worker(1, "a", false)];
        let h = health(root_deployment(true), status(2, &waiting, &gate(2, &waiting), None, None));
        assert!(!h.replicas.ready);
        assert!(matches!(h.rollout, Rollout::Progressing { serving: false, .. }), "{:?}", h.rollout);
        assert_eq!(h.replicas.group.unwrap().ready, 0);
    }
}
