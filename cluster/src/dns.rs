//! Cluster DNS: CoreDNS (built from its Go module with only the plugins used here:
//! `tools/coredns`), answering the cluster's names from the API server. It runs as a
//! process of the real node on the node's address, which is the kubelet's `clusterDNS`,
//! rather than as a pod: the node needs no image for it and names resolve from the first
//! pod on. Nothing outside the cluster resolves (no upstream: the cluster has none).

use std::net::Ipv4Addr;
use std::path::Path;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, Patch, PatchParams};
use kube::Client;

use crate::Error;

/// The cluster's DNS domain: CoreDNS answers for it, and the kubelet gives it to pods.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The user CoreDNS authenticates as (a client certificate of the cluster's CA).
pub const USER: &str = "local-cluster:coredns";

/// The Corefile: the cluster domain and reverse zones from the API server, on `address:53`.
pub fn corefile(address: Ipv4Addr, kubeconfig: &Path, health_port: u16, ready_port: u16) -> String {
    format!(
        ".:53 {{\n    bind {address}\n    errors\n    health 127.0.0.1:{health_port}\n    ready 127.0.0.1:{ready_port}\n    cache 5\n    loadbalance\n    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n        kubeconfig {}\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }}\n}}\n",
        kubeconfig.display()
    )
}

/// What CoreDNS's kubernetes plugin reads, granted to [`USER`].
pub async fn install_rbac(admin: &Client) -> Result<(), Error> {
    let rule = |groups: &[&str], resources: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: vec!["list".into(), "watch".into()],
        ..Default::default()
    };
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta { name: Some("local-cluster:coredns".into()), ..Default::default() },
        rules: Some(vec![
            rule(&[""], &["services", "pods", "namespaces"]),
            rule(&["discovery.k8s.io"], &["endpointslices"]),
        ]),
        ..Default::default()
    };
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta { name: Some("local-cluster:coredns".into()), ..Default::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "local-cluster:coredns".into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: USER.into(),
            namespace: None,
        }]),
    };
    let params = PatchParams::apply("local-cluster").force();
    Api::<ClusterRole>::all(admin.clone()).patch("local-cluster:coredns", &params, &Patch::Apply(&role)).await?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch("local-cluster:coredns", &params, &Patch::Apply(&binding))
        .await?;
    Ok(())
}
