//! The local cluster itself: it starts from the real programs in namespaces of its own, its
//! fake GPU nodes take pods the real scheduler places, its real node runs pods of our own
//! images, two real nodes reach each other's pods, lose one and drain one, the audit log witnesses requests, the fault proxy injects what it is told, claims
//! without a StorageClass get the default one and a provisioned volume, and stopping it —
//! normally, after a panic, or by killing its owner — leaves nothing behind.

mod control_plane;
mod isolation;
mod real_node;
mod real_nodes;
mod storage;
mod teardown;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use local_cluster::Cluster;
use serde_json::json;

pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(90), "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A namespace whose pods run on the real nodes, and its pods.
pub async fn real_namespace(cluster: &Cluster, name: &str) -> Api<Pod> {
    cluster.run_pods_for_real(name).await.unwrap_or_else(|e| panic!("{e}"));
    Api::namespaced(cluster.client().await.unwrap(), name)
}

/// The test pods' image (`mo-pod`) in the cluster's registry.
pub fn image(cluster: &Cluster) -> String {
    local_cluster::registry::pod_image(cluster.registry.as_deref().expect("a cluster with real nodes"))
}

/// Runs `mo-pod get URL` in a pod `name` of its own (on `node`, if given) in the real
/// namespace `namespace`, and returns the answer.
pub async fn get_from_a_pod(cluster: &Cluster, namespace: &str, name: &str, node: Option<&str>, url: &str) -> String {
    let pods = real_namespace(cluster, namespace).await;
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "get", "image": image(cluster), "args": ["get", url]}]}
    });
    if let Some(node) = node {
        pod["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    }
    pods.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&pod)).await.unwrap();
    let phase = eventually(&format!("the pod {name} ends"), || async {
        let phase = pods.get(name).await.ok()?.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    })
    .await;
    let logs = pods.logs(name, &Default::default()).await.unwrap_or_default();
    assert_eq!(phase, "Succeeded", "mo-pod get {url} (node {node:?}): {logs}");
    // The log has stderr too (retries while kube-proxy programs the new Service): the
    // answer is the last line.
    logs.lines().last().unwrap_or_default().to_string()
}
