//! The control plane and kwok's fake nodes; the fault proxy.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use local_cluster::proxy::{FaultProxy, Faults};
use local_cluster::{Cluster, Options};
use serde_json::json;

use crate::{eventually, pid_alive};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_runs_gpu_pods_on_matching_nodes_and_stops_every_process_it_started() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Cluster::start(Options::fake_nodes_only()).await.unwrap_or_else(|e| panic!("{e}"));
    let client = cluster.client().await.unwrap();

    let out =
        cluster.kubectl().args(["get", "nodes", "-L", "nvidia.com/gpu.product", "--no-headers"]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.lines().count(), 4, "{table}");
    assert!(table.lines().any(|l| l.contains(" Ready ") && l.contains("NVIDIA-GeForce-RTX-3060")), "{table}");
    let version = cluster.kubectl().args(["version", "-o", "json"]).output().unwrap();
    let version: serde_json::Value = serde_json::from_slice(&version.stdout).unwrap();
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.37.2");

    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu"},
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "example.com/reader:1", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]
        }
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.patch("gpu", &PatchParams::apply("test"), &Patch::Apply(&pod)).await.unwrap();
    let running = eventually("the GPU pod runs", || async {
        let p = pods.get("gpu").await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
    })
    .await;
    assert_eq!(running.spec.unwrap().node_name.as_deref(), Some("gpu-a100-0"));
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(nodes.list(&Default::default()).await.unwrap().items.len(), 4);

    let audit = cluster.audit().all();
    assert!(audit.iter().any(|e| e.verb == "patch"
        && e.resource() == "pods"
        && e.name() == "gpu"
        && e.user.username == "kubernetes-admin"));
    assert!(
        audit.iter().any(|e| e.resource() == "pods"
            && e.subresource() == "binding"
            && e.user.username == "system:kube-scheduler"),
        "the scheduler bound it"
    );

    assert!(cluster.provisioner_running());
    let pids = cluster.pids();
    assert_eq!(
        pids.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    );
    let dir = cluster.dir().to_path_buf();
    cluster.stop();
    for (name, pid) in pids {
        assert!(!pid_alive(pid), "{name} ({pid}) still runs");
    }
    assert!(!dir.exists(), "its directory is removed");
    assert!(!cluster.provisioner_running(), "the volume provisioner's thread ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fault_proxy_injects_errors_resets_and_cut_watches_and_otherwise_forwards() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Cluster::shared();
    let proxy = FaultProxy::start(&cluster.server, &cluster.ca_pem).unwrap();
    let dir = std::env::temp_dir().join(format!("proxy-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let admin = local_cluster::client_for(&cluster.kubeconfig).await.unwrap();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "proxy-test", "namespace": "default"}});
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), "default")
        .patch("proxy-test", &PatchParams::apply("test"), &Patch::Apply(&sa))
        .await
        .unwrap();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "proxy-test", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "proxy-test", "namespace": "default"}]
    });
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin, "default")
        .patch("proxy-test", &PatchParams::apply("test"), &Patch::Apply(&binding))
        .await
        .unwrap();
    cluster.service_account_kubeconfig("default", "proxy-test", &kubeconfig, Some(&proxy.url())).await.unwrap();
    let client = local_cluster::client_for(&kubeconfig).await.unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, "v1.37.2", "forwarded with the client's own token");

    proxy.set_faults(Faults { error_rate: 1.0, ..Default::default() });
    let err = client.apiserver_version().await.unwrap_err();
    assert!(err.to_string().contains("injected by the fault proxy"), "{err}");
    proxy.set_faults(Faults { reset_rate: 1.0, ..Default::default() });
    assert!(client.apiserver_version().await.is_err());
    proxy.set_faults(Faults { drop_watches_after: Some(Duration::from_millis(300)), ..Default::default() });
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let mut stream = pods.watch(&kube::api::WatchParams::default().timeout(60), "0").await.unwrap().boxed();
    use futures::StreamExt;
    while let Some(event) = stream.next().await {
        if event.is_err() {
            break;
        }
    }
    assert!(started.elapsed() < Duration::from_secs(30), "the watch was cut off, not timed out");
    let injected = proxy.injected();
    assert!(injected.errors >= 1 && injected.resets >= 1 && injected.dropped_watches >= 1, "{injected:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
