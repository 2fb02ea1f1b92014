//! The local cluster itself: it starts from the real programs, its fake GPU nodes take
//! pods the real scheduler places, the audit log witnesses requests, the fault proxy
//! injects what it is told, claims without a StorageClass get the default one and a
//! provisioned volume, and stopping it leaves no process behind.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::ResourceExt;
use local_cluster::proxy::{FaultProxy, Faults};
use local_cluster::storage::{PROVISIONED_BY_ANNOTATION, PROVISIONER, SERVICE_ACCOUNT, STORAGE_CLASS};
use local_cluster::{Cluster, Options};
use serde_json::json;

async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_runs_gpu_pods_on_matching_nodes_and_stops_every_process_it_started() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Cluster::start(Options::default()).await.unwrap_or_else(|e| panic!("{e}"));
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
        pids.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
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

/// A fresh namespace on the shared cluster, and a claim in it (no storageClassName).
async fn claim_in_new_namespace(
    cluster: &Cluster,
    namespace: &str,
    spec: serde_json::Value,
) -> Api<PersistentVolumeClaim> {
    let client = cluster.client().await.unwrap();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &PatchParams::apply("test"), &Patch::Apply(&ns))
        .await
        .unwrap();
    let claim =
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": spec});
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, namespace);
    claims.patch("data", &PatchParams::apply("test"), &Patch::Apply(&claim)).await.unwrap();
    claims
}

fn plain_claim() -> serde_json::Value {
    json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}})
}

/// Waits until the claim `data` is Bound; returns it and its volume.
async fn bound(cluster: &Cluster, claims: &Api<PersistentVolumeClaim>) -> (PersistentVolumeClaim, PersistentVolume) {
    let claim = eventually("the claim is Bound", || async {
        let c = claims.get("data").await.ok()?;
        (c.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(c)
    })
    .await;
    let name = claim.spec.as_ref().unwrap().volume_name.clone().expect("a bound claim names its volume");
    let volume = Api::<PersistentVolume>::all(cluster.client().await.unwrap()).get(&name).await.unwrap();
    (claim, volume)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_without_a_class_gets_the_default_class_and_binds_to_a_provisioned_directory() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Cluster::shared();
    let claims = claim_in_new_namespace(cluster, "storage-bind", plain_claim()).await;
    let (claim, volume) = bound(cluster, &claims).await;

    assert_eq!(claim.spec.as_ref().unwrap().storage_class_name.as_deref(), Some(STORAGE_CLASS));
    assert_eq!(claim.status.as_ref().unwrap().capacity.as_ref().unwrap()["storage"].0, "2Gi");
    let spec = volume.spec.as_ref().unwrap();
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(spec.access_modes.as_deref(), Some(&["ReadWriteOnce".to_string()][..]));
    assert_eq!(spec.claim_ref.as_ref().unwrap().uid, claim.uid());
    assert_eq!(volume.annotations()[PROVISIONED_BY_ANNOTATION], PROVISIONER);
    let path = std::path::PathBuf::from(&spec.host_path.as_ref().unwrap().path);
    assert!(path.starts_with(cluster.volumes_dir()) && path.is_dir(), "{}", path.display());

    // Made by the provisioner under its own identity, bound by the real controller.
    let audit = cluster.audit().all();
    let provisioner = format!("system:serviceaccount:{}:{}", SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    assert!(audit.iter().any(|e| e.verb == "create"
        && e.resource() == "persistentvolumes"
        && e.name() == volume.name_any()
        && e.user.username == provisioner));
    assert!(audit.iter().any(|e| e.verb == "update"
        && e.resource() == "persistentvolumeclaims"
        && e.name() == "data"
        && e.user.username == "system:serviceaccount:kube-system:persistent-volume-binder"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_claim_deletes_its_provisioned_volume_and_directory() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Cluster::shared();
    let claims = claim_in_new_namespace(cluster, "storage-delete", plain_claim()).await;
    let (_, volume) = bound(cluster, &claims).await;
    let path = std::path::PathBuf::from(&volume.spec.as_ref().unwrap().host_path.as_ref().unwrap().path);
    assert!(path.is_dir());

    claims.delete("data", &DeleteParams::default()).await.unwrap();
    let volumes: Api<PersistentVolume> = Api::all(cluster.client().await.unwrap());
    eventually("the volume is deleted", || async {
        volumes.get_opt(&volume.name_any()).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(!path.exists(), "{} is removed", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_the_provisioner_cannot_satisfy_gets_a_warning_event_saying_why_and_no_volume() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Cluster::shared();
    let spec = json!({"accessModes": ["ReadWriteOncePod"], "resources": {"requests": {"storage": "1Gi"}}});
    let claims = claim_in_new_namespace(cluster, "storage-refused", spec).await;
    let events: Api<Event> = Api::namespaced(cluster.client().await.unwrap(), "storage-refused");
    let event = eventually("a ProvisioningFailed event on the claim", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("ProvisioningFailed")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("data")
        })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(note.contains("ReadWriteOncePod") && note.contains("use ReadWriteOnce"), "{note}");
    let claim = claims.get("data").await.unwrap();
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    let volumes: Api<PersistentVolume> = Api::all(cluster.client().await.unwrap());
    let uid = claim.metadata.uid.unwrap();
    assert!(volumes.get_opt(&format!("pvc-{uid}")).await.unwrap().is_none(), "no volume was made for it");
}
