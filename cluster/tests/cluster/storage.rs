//! The default StorageClass and its provisioner.

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::ResourceExt;
use local_cluster::storage::{PROVISIONED_BY_ANNOTATION, PROVISIONER, SERVICE_ACCOUNT, STORAGE_CLASS};
use local_cluster::Cluster;
use serde_json::json;

use crate::eventually;

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
