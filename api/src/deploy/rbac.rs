//! The operator's ClusterRole, derived from the kinds the chart can render
//! ([`crate::kinds::Kind::ALL`]) rather than kept by hand.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kinds::Kind;
use crate::GROUP;

/// Verbs on rendered kinds: watch (to repair hand-edited or deleted children), apply
/// (create + patch), prune (delete).
const CHILD_VERBS: [&str; 6] = ["get", "list", "watch", "create", "patch", "delete"];

/// One RBAC rule: `verbs` on `resources` of the API group `group`.
pub(crate) fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// The ClusterRole named `name`: one rule per API group of the rendered kinds, plus the
/// CRD itself, its status, Events and Leases (leader election).
pub fn cluster_role(name: &str) -> ClusterRole {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for kind in Kind::ALL {
        by_group.entry(kind.group()).or_default().push(kind.plural());
    }
    let mut rules: Vec<PolicyRule> =
        by_group.iter().map(|(group, resources)| rule(group, resources, &CHILD_VERBS)).collect();
    rules.push(rule(GROUP, &["modelorchestras"], &["get", "list", "watch"]));
    rules.push(rule(GROUP, &["modelorchestras/status"], &["get", "patch", "update"]));
    // Children carry `blockOwnerDeletion: true` to their CR; where the API server enforces
    // OwnerReferencesPermissionEnforcement (OpenShift), that needs `update` on the owner's
    // finalizers.
    rules.push(rule(GROUP, &["modelorchestras/finalizers"], &["update"]));
    // The model gateway's Role grants its ServiceAccount the scale of the applications that
    // sleep; the API server lets the operator grant only what it holds itself.
    rules.push(rule("apps", &["deployments/scale"], &["get", "patch", "update"]));
    // Pods of the rendered Deployments, read-only: why a pod is not scheduled or not
    // running belongs on the CR.
    rules.push(rule("", &["pods"], &["get", "list", "watch"]));
    // An Ollama replica's models-ready condition (a readiness gate the operator decides).
    rules.push(rule("", &["pods/status"], &["patch"]));
    // Whether any admission could refuse a creation the operator's validation passed
    // (`reconcile::admission`): metadata only, never changed.
    rules.push(rule("", &["resourcequotas", "limitranges"], &["list", "watch"]));
    rules.push(rule(
        "admissionregistration.k8s.io",
        &[
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
            "validatingadmissionpolicybindings",
            "mutatingadmissionpolicybindings",
        ],
        &["list", "watch"],
    ));
    rules.push(rule("events.k8s.io", &["events"], &["create", "patch"]));
    // A standby watches its line's Lease, to take it as soon as the leader releases it.
    rules.push(rule("coordination.k8s.io", &["leases"], &["get", "watch", "create", "update", "patch"]));
    ClusterRole {
        metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
        rules: Some(rules),
        ..Default::default()
    }
}

/// What an operator run outside the cluster (`make run`, the e2e tests) needs beyond
/// [`cluster_role`]: `create` on `services/proxy`, to ask promotion candidates through the
/// API server's service proxy, and `create`/`get`/`delete` on `pods/proxy`, to pull an
/// Ollama replica's models through its pod proxy and delete the ones no longer listed. In the cluster it talks to gateways and pods
/// directly, so the installed ClusterRole leaves these out.
pub fn out_of_cluster_role(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
        rules: Some(vec![
            rule("", &["services/proxy"], &["create"]),
            rule("", &["pods/proxy"], &["create", "get", "delete"]),
        ]),
        ..Default::default()
    }
}

pub fn cluster_role_yaml(name: &str) -> String {
    serde_yaml::to_string(&cluster_role(name)).expect("a ClusterRole serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_renderable_kind_gets_apply_watch_and_prune_verbs() {
        let role = cluster_role("r");
        for kind in Kind::ALL {
            let rule = role
                .rules
                .as_ref()
                .unwrap()
                .iter()
                .find(|r| {
                    r.api_groups.as_deref() == Some(&[kind.group().to_string()])
                        && r.resources.as_ref().unwrap().contains(&kind.plural().to_string())
                })
                .unwrap_or_else(|| panic!("no rule for {kind:?}"));
            assert_eq!(rule.verbs, CHILD_VERBS.map(String::from));
        }
    }

    #[test]
    fn the_cr_itself_is_read_only_apart_from_its_status() {
        let role = cluster_role("r");
        let cr = role
            .rules
            .unwrap()
            .into_iter()
            .find(|r| r.resources.as_deref() == Some(&["modelorchestras".to_string()]))
            .unwrap();
        assert_eq!(cr.verbs, ["get", "list", "watch"]);
    }
}
