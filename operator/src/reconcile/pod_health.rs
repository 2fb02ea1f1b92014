//! What a pod says about why it is not running: the scheduler's own message, or a
//! container stuck waiting. Pure: the controller caches the pods, this reads them.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Why a component's pods are not running, as a pod reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodProblem {
    /// The scheduler cannot place the pod (its message is in `message`).
    pub unschedulable: bool,
    pub message: String,
}

/// Container waiting reasons that mean the pod will not start by itself.
const STUCK_REASONS: [&str; 6] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
];

/// The scheduler's words for a pod whose claims (of a class that binds at once) are not
/// bound yet: its volume binding rejects the pod before any node is tried.
const UNBOUND_CLAIMS: &str = "pod has unbound immediate PersistentVolumeClaims";

/// Orders pods by creation: creationTimestamp has whole seconds, so a rollout's new pod
/// often ties with the old one; the resourceVersion (an integer that grows with each write on
/// an etcd-backed API server; 0 if not) breaks the tie — the old pod's last write came
/// before the new pod existed.
pub(crate) fn newness(pod: &Pod) -> (Option<Time>, u64) {
    let version = pod.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
    (pod.metadata.creation_timestamp.clone(), version)
}

/// What a single pod reports: unschedulable (the scheduler's message), or a container
/// stuck waiting.
pub(crate) fn pod_problem(pod: &Pod) -> Option<PodProblem> {
    let status = pod.status.as_ref()?;
    if let Some(c) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    {
        let message = c.message.clone().unwrap_or_else(|| "no node fits the pod".into());
        // The scheduler tries a pod before its claims are bound (the operator applies
        // them together; a provisioner takes a moment): it waits, it is not unplaceable.
        // A claim that never binds stalls the rollout, which its deadline reports.
        let unschedulable = !message.contains(UNBOUND_CLAIMS);
        let message = if unschedulable { message } else { format!("waiting for its volumes to bind ({message})") };
        return Some(PodProblem { unschedulable, message });
    }
    status.container_statuses.iter().flatten().find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref().filter(|r| STUCK_REASONS.contains(r))?;
        let message =
            waiting.message.as_deref().map(|m| format!("{reason}: {m}")).unwrap_or_else(|| reason.to_string());
        Some(PodProblem { unschedulable: false, message: format!("container {}: {message}", c.name) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "status": status})).unwrap()
    }

    #[test]
    fn of_two_pods_created_in_the_same_second_the_later_written_is_newer() {
        let at = |rv: &str| -> Pod {
            serde_json::from_value(
                json!({"metadata": {"name": "p", "creationTimestamp": "2026-11-24T01:03:47Z", "resourceVersion": rv}}),
            )
            .unwrap()
        };
        // 99 < 100 as numbers, not as strings.
        assert!(newness(&at("100")) > newness(&at("99")));
        let later: Pod = serde_json::from_value(
            json!({"metadata": {"name": "p", "creationTimestamp": "2026-11-24T01:03:48Z", "resourceVersion": "5"}}),
        )
        .unwrap();
        assert!(newness(&later) > newness(&at("100")), "creation time first");
    }

    #[test]
    fn an_unschedulable_pod_carries_the_schedulers_message() {
        let p = pod(
            json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}),
        );
        assert_eq!(
            pod_problem(&p),
            Some(PodProblem {
                unschedulable: true,
                message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.".into()
            })
        );
    }

    #[test]
    fn a_pod_whose_claims_are_not_bound_yet_waits_for_them_and_is_not_unschedulable() {
        // As the scheduler said it in the OLM v1 drill, under load.
        let message = "0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found";
        let p = pod(
            json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}),
        );
        let problem = pod_problem(&p).unwrap();
        assert!(!problem.unschedulable);
        assert_eq!(problem.message, format!("waiting for its volumes to bind ({message})"));
    }

    #[test]
    fn a_container_stuck_pulling_its_image_is_a_problem_but_a_starting_one_is_not() {
        let stuck = pod(
            json!({"containerStatuses": [{"name": "reader", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"i\""}}}]}),
        );
        assert_eq!(
            pod_problem(&stuck).unwrap().message,
            "container reader: ImagePullBackOff: Back-off pulling image \"i\""
        );
        let starting = pod(
            json!({"containerStatuses": [{"name": "reader", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        );
        assert_eq!(pod_problem(&starting), None);
    }
}
