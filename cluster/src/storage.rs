//! The cluster's default StorageClass and the provisioner behind it, so a
//! PersistentVolumeClaim without `storageClassName` binds as it would on a real cluster.
//!
//! The provisioner is home-made because upstream ones are made to run as pods: they are
//! published as container images (built with Docker) and reach the node through a kubelet
//! — rancher's local-path-provisioner makes each directory from a helper pod on the node,
//! the CSI hostpath driver is a node plugin the kubelet calls — and this cluster has neither
//! Docker nor a kubelet (kwok plays the nodes and runs no containers).
//!
//! It does what an external provisioner does, with the real PersistentVolume controller
//! doing the rest: the controller marks a claim of our class with the
//! `volume.kubernetes.io/storage-provisioner` annotation; we make a directory under the
//! cluster's `volumes/` and a hostPath PersistentVolume for it (the claim's request and
//! access modes, a `claimRef` to it, `pv.kubernetes.io/provisioned-by`); the controller binds
//! the two. When the claim goes, the controller marks the volume Released and, since the
//! annotation names an external provisioner, leaves its deletion to us: with reclaim policy
//! Delete we remove the directory, then the volume. A claim we cannot satisfy gets a Warning
//! Event saying why, and no volume.
//!
//! It runs on a thread of its own with its own runtime, owned by the [`crate::Cluster`]: the
//! cluster is started on throwaway runtimes (see `Cluster::shared`), and a thread, unlike a
//! child process, needs no program of its own on disk (the operator's test binaries link
//! this library but have no provisioner binary to run) and cannot outlive this program. It
//! authenticates as its own ServiceAccount, `kube-system/local-volume-provisioner`, with a
//! ClusterRole of only what it uses, as the controller manager runs each controller under its
//! own ServiceAccount.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, Controller};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::Error;

/// The provisioner name the StorageClass names and volumes carry.
pub const PROVISIONER: &str = "local-cluster.titanml.co/host-path";
/// The default StorageClass.
pub const STORAGE_CLASS: &str = "host-path";
/// Where the provisioner's ServiceAccount lives, and its name.
pub const SERVICE_ACCOUNT: (&str, &str) = ("kube-system", "local-volume-provisioner");
/// Set by the PersistentVolume controller on claims it leaves to an external provisioner.
pub const STORAGE_PROVISIONER_ANNOTATION: &str = "volume.kubernetes.io/storage-provisioner";
/// The same, under its older name (the controller still sets both).
const BETA_STORAGE_PROVISIONER_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// Names the provisioner of a volume; the controller leaves deleting it to that provisioner.
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
const FIELD_MANAGER: &str = "local-cluster";
/// The provisioner's token is requested once; the cluster lives as long as `make cluster`
/// runs, far less than this.
const TOKEN_SECONDS: i64 = 365 * 24 * 3600;

/// The default StorageClass. Binding is `Immediate`: a volume is a directory on this host,
/// which every (kwok) node reaches alike, so there is no topology to wait for a pod's node
/// for, and a claim binds without a pod, as the operator's model cache expects of a cluster
/// with a default class. (`WaitForFirstConsumer` would also keep a claim Pending until the
/// scheduler places a pod, and tie provisioning to the scheduler's volume binding.)
pub fn storage_class() -> StorageClass {
    serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }))
    .expect("a valid StorageClass")
}

/// What the provisioner may do: read claims and classes, create and delete volumes, record
/// Events.
fn cluster_role() -> ClusterRole {
    serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:local-cluster:volume-provisioner"},
        "rules": [
            {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch", "create", "delete"]},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        ]
    }))
    .expect("a valid ClusterRole")
}

/// Creates the StorageClass, and the provisioner's ServiceAccount and RBAC; returns a
/// token of that ServiceAccount.
pub(crate) async fn install(admin: &Client) -> Result<String, Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let class = storage_class();
    Api::<StorageClass>::all(admin.clone()).patch(&class.name_any(), &params, &Patch::Apply(&class)).await?;
    let (namespace, name) = SERVICE_ACCOUNT;
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}});
    Api::<ServiceAccount>::namespaced(admin.clone(), namespace).patch(name, &params, &Patch::Apply(&account)).await?;
    let role = cluster_role();
    Api::<ClusterRole>::all(admin.clone()).patch(&role.name_any(), &params, &Patch::Apply(&role)).await?;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role.name_any()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.name_any()},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    });
    Api::<ClusterRoleBinding>::all(admin.clone()).patch(&role.name_any(), &params, &Patch::Apply(&binding)).await?;
    crate::kubeconfig::service_account_token_valid_for(admin, namespace, name, TOKEN_SECONDS).await
}

/// Why a claim cannot get a volume from us, if it cannot (the fix included).
pub fn unsatisfiable(claim: &PersistentVolumeClaim, class: &StorageClass) -> Option<String> {
    let spec = claim.spec.as_ref()?;
    if spec.selector.is_some() {
        return Some(
            "spec.selector: a provisioned volume cannot match a label selector (a selector only picks among \
             existing volumes); remove the selector, or create a matching PersistentVolume by hand"
                .into(),
        );
    }
    if spec.volume_mode.as_deref() == Some("Block") {
        return Some("spec.volumeMode: Block is not supported, volumes here are directories; use Filesystem".into());
    }
    if spec.access_modes.iter().flatten().any(|m| m == "ReadWriteOncePod") {
        return Some(
            "spec.accessModes: ReadWriteOncePod is only supported for CSI volumes and these are hostPath; use \
             ReadWriteOnce"
                .into(),
        );
    }
    if let Some(source) = &spec.data_source_ref {
        return Some(format!(
            "spec.dataSourceRef: volumes cannot be populated from {} {}; remove the data source",
            source.kind, source.name
        ));
    }
    if let Some(source) = &spec.data_source {
        return Some(format!(
            "spec.dataSource: volumes cannot be populated from {} {}; remove the data source",
            source.kind, source.name
        ));
    }
    if let Some(parameters) = class.parameters.as_ref().filter(|p| !p.is_empty()) {
        let keys: Vec<&str> = parameters.keys().map(String::as_str).collect();
        return Some(format!(
            "StorageClass {}: parameters {} are not understood by {PROVISIONER}, which takes none; remove them",
            class.name_any(),
            keys.join(", ")
        ));
    }
    if class.mount_options.as_ref().is_some_and(|o| !o.is_empty()) {
        return Some(format!(
            "StorageClass {}: mountOptions cannot be set on hostPath volumes; remove them",
            class.name_any()
        ));
    }
    if storage_request(claim).is_none() {
        return Some("spec.resources.requests.storage: required, the volume's capacity".into());
    }
    None
}

fn storage_request(claim: &PersistentVolumeClaim) -> Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity> {
    claim.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?.get("storage")
}

/// The volume for `claim`, at `path`.
pub fn volume_for(claim: &PersistentVolumeClaim, class: &StorageClass, name: &str, path: &Path) -> PersistentVolume {
    let spec = claim.spec.clone().unwrap_or_default();
    let capacity: BTreeMap<String, _> =
        storage_request(claim).map(|q| ("storage".to_string(), q.clone())).into_iter().collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY_ANNOTATION: PROVISIONER}},
        "spec": {
            "capacity": capacity,
            "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
            "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
            "storageClassName": class.name_any(),
            "volumeMode": "Filesystem",
            "hostPath": {"path": path, "type": "Directory"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": claim.namespace(),
                "name": claim.name_any(),
                "uid": claim.uid(),
            },
        }
    }))
    .expect("a valid PersistentVolume")
}

/// The provisioner's thread. Dropping it (or [`Provisioner::stop`]) stops it.
pub struct Provisioner {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Provisioner {
    /// Starts the provisioner with the credentials in `kubeconfig`, making volumes under
    /// `volumes` and logging to `log`; returns once its client is made.
    pub(crate) fn start(kubeconfig: PathBuf, volumes: PathBuf, log: PathBuf) -> Result<Provisioner, Error> {
        std::fs::create_dir_all(&volumes).map_err(|e| Error::io(&volumes, e))?;
        let log_file = std::fs::File::create(&log).map_err(|e| Error::io(&log, e))?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), Error>>();
        let thread = std::thread::Builder::new()
            .name("volume-provisioner".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready_tx.send(Err(Error::io(Path::new("the provisioner's runtime"), e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    // The client's connection pool lives on this runtime: make it here.
                    let client = match crate::client_for(&kubeconfig).await {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    let context = Arc::new(Context::new(client, volumes, log_file));
                    context.log(&format!("running as {}/{}", SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1));
                    tokio::select! {
                        _ = run(context.clone()) => context.log("stopped: its watches ended"),
                        _ = stopped => context.log("stopped"),
                    }
                });
            })
            .map_err(|e| Error::io(Path::new("the provisioner's thread"), e))?;
        let mut provisioner = Provisioner { shutdown: Some(shutdown), thread: Some(thread) };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(provisioner),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                provisioner.stop();
                Err(Error::Start {
                    component: "volume-provisioner".into(),
                    message: "its thread ended before it started".into(),
                    tail: crate::tail(&log, 30),
                    log,
                })
            }
        }
    }

    /// Whether its thread still runs.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops it and waits for its thread to end.
    pub fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Provisioner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a reconcile failed on; it is retried.
#[derive(Debug, thiserror::Error)]
enum ProvisionError {
    #[error("{0}")]
    Kube(#[from] kube::Error),
    #[error("{path}: {source}", path = path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

struct Context {
    client: Client,
    volumes: PathBuf,
    recorder: Recorder,
    log: Mutex<std::fs::File>,
}

impl Context {
    fn new(client: Client, volumes: PathBuf, log: std::fs::File) -> Context {
        let reporter = Reporter { controller: "local-volume-provisioner".into(), instance: None };
        Context { recorder: Recorder::new(client.clone(), reporter), client, volumes, log: Mutex::new(log) }
    }

    fn log(&self, line: &str) {
        if let Ok(mut file) = self.log.lock() {
            let _ = writeln!(file, "{} {line}", k8s_openapi::jiff::Timestamp::now());
        }
    }

    async fn event<K: Resource<DynamicType = ()>>(&self, object: &K, type_: EventType, reason: &str, note: String) {
        let event =
            Event { type_, reason: reason.into(), note: Some(note), action: "Provisioning".into(), secondary: None };
        if let Err(e) = self.recorder.publish(&event, &object.object_ref(&())).await {
            self.log(&format!("could not record the event {reason}: {e}"));
        }
    }
}

/// Claims to provision, volumes to delete, until the watches end.
async fn run(context: Arc<Context>) {
    let claims = Controller::new(Api::<PersistentVolumeClaim>::all(context.client.clone()), watcher::Config::default())
        .run(provision, retry, context.clone())
        .for_each(|_| async {});
    let volumes = Controller::new(Api::<PersistentVolume>::all(context.client.clone()), watcher::Config::default())
        .run(reclaim, retry, context.clone())
        .for_each(|_| async {});
    futures::future::join(claims, volumes).await;
}

fn retry<K>(_: Arc<K>, error: &ProvisionError, context: Arc<Context>) -> Action {
    context.log(&format!("will retry: {error}"));
    Action::requeue(Duration::from_secs(2))
}

fn ours(annotations: &BTreeMap<String, String>, key: &str) -> bool {
    annotations.get(key).is_some_and(|p| p == PROVISIONER)
}

async fn provision(claim: Arc<PersistentVolumeClaim>, context: Arc<Context>) -> Result<Action, ProvisionError> {
    let annotations = claim.annotations();
    let marked =
        ours(annotations, STORAGE_PROVISIONER_ANNOTATION) || ours(annotations, BETA_STORAGE_PROVISIONER_ANNOTATION);
    let spec = claim.spec.as_ref();
    let bound = spec.and_then(|s| s.volume_name.as_deref()).is_some_and(|v| !v.is_empty());
    if !marked || bound || claim.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let class_name = spec.and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
    let Some(class) = Api::<StorageClass>::all(context.client.clone()).get_opt(&class_name).await? else {
        let note = format!("StorageClass {class_name:?} does not exist (any more); create it, or use another class");
        context.event(claim.as_ref(), EventType::Warning, "ProvisioningFailed", note).await;
        return Ok(Action::requeue(Duration::from_secs(30)));
    };
    let claim_name = format!("{}/{}", claim.namespace().unwrap_or_default(), claim.name_any());
    if let Some(why) = unsatisfiable(&claim, &class) {
        context.log(&format!("{claim_name}: refused: {why}"));
        context.event(claim.as_ref(), EventType::Warning, "ProvisioningFailed", why).await;
        return Ok(Action::await_change());
    }
    // Named after the claim's UID, as upstream provisioners do: a retry finds its own volume.
    let name = format!("pvc-{}", claim.uid().unwrap_or_default());
    let path = context.volumes.join(&name);
    std::fs::create_dir_all(&path).map_err(|source| ProvisionError::Io { path: path.clone(), source })?;
    // Writable by any user, as host-path provisioners make them (a hostPath volume ignores
    // the pod's fsGroup): the pods of non-root images (Ollama's runs as 65532) write there.
    let anyone = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777);
    std::fs::set_permissions(&path, anyone).map_err(|source| ProvisionError::Io { path: path.clone(), source })?;
    let volume = volume_for(&claim, &class, &name, &path);
    match Api::<PersistentVolume>::all(context.client.clone()).create(&PostParams::default(), &volume).await {
        Ok(_) => {
            context.log(&format!("{claim_name}: created {name} at {}", path.display()));
            let note = format!("volume {name} created at {}", path.display());
            context.event(claim.as_ref(), EventType::Normal, "ProvisioningSucceeded", note).await;
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

async fn reclaim(volume: Arc<PersistentVolume>, context: Arc<Context>) -> Result<Action, ProvisionError> {
    let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let spec = volume.spec.as_ref();
    let delete = spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
    let deleting = volume.metadata.deletion_timestamp.is_some();
    if !ours(volume.annotations(), PROVISIONED_BY_ANNOTATION) || !released || !delete || deleting {
        return Ok(Action::await_change());
    }
    let name = volume.name_any();
    let expected = context.volumes.join(&name);
    let path = spec.and_then(|s| s.host_path.as_ref()).map(|h| PathBuf::from(&h.path));
    // Remove only a directory we made: a volume made by hand with our annotation may point
    // anywhere.
    if path.as_deref() != Some(expected.as_path()) {
        let note = format!(
            "not deleted: its hostPath is not {}, the directory this provisioner made for it; delete the volume \
             (and its directory) by hand",
            expected.display()
        );
        context.log(&format!("{name}: {note}"));
        context.event(volume.as_ref(), EventType::Warning, "VolumeFailedDelete", note).await;
        return Ok(Action::await_change());
    }
    match std::fs::remove_dir_all(&expected) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(ProvisionError::Io { path: expected, source }),
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: volume.uid(), resource_version: None }),
        ..Default::default()
    };
    match Api::<PersistentVolume>::all(context.client.clone()).delete(&name, &params).await {
        Ok(_) => context.log(&format!("{name}: released, deleted with {}", expected.display())),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(spec: serde_json::Value) -> PersistentVolumeClaim {
        let mut spec = spec;
        spec["resources"] = json!({"requests": {"storage": "1Gi"}});
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u-1"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn the_default_class_is_annotated_default_and_deletes_its_volumes() {
        let class = storage_class();
        assert_eq!(class.annotations()[DEFAULT_CLASS_ANNOTATION], "true");
        assert_eq!(class.provisioner, PROVISIONER);
        assert_eq!(class.reclaim_policy.as_deref(), Some("Delete"));
    }

    #[test]
    fn a_plain_claim_is_satisfiable() {
        assert_eq!(unsatisfiable(&claim(json!({"accessModes": ["ReadWriteOnce"]})), &storage_class()), None);
        assert_eq!(unsatisfiable(&claim(json!({"accessModes": ["ReadWriteMany"]})), &storage_class()), None);
    }

    #[test]
    fn a_claim_with_a_selector_is_refused_naming_the_field() {
        let c = claim(json!({"accessModes": ["ReadWriteOnce"], "selector": {"matchLabels": {"a": "b"}}}));
        assert!(unsatisfiable(&c, &storage_class()).unwrap().starts_with("spec.selector:"));
    }

    #[test]
    fn a_claim_for_a_block_device_is_refused() {
        let c = claim(json!({"accessModes": ["ReadWriteOnce"], "volumeMode": "Block"}));
        assert!(unsatisfiable(&c, &storage_class()).unwrap().starts_with("spec.volumeMode:"));
    }

    #[test]
    fn a_claim_for_read_write_once_pod_is_refused() {
        let c = claim(json!({"accessModes": ["ReadWriteOncePod"]}));
        assert!(unsatisfiable(&c, &storage_class()).unwrap().contains("ReadWriteOncePod"));
    }

    #[test]
    fn a_claim_to_be_populated_from_a_snapshot_is_refused() {
        let c = claim(
            json!({"accessModes": ["ReadWriteOnce"], "dataSourceRef": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s"}}),
        );
        assert!(unsatisfiable(&c, &storage_class()).unwrap().contains("VolumeSnapshot s"));
    }

    #[test]
    fn a_class_with_parameters_is_refused_naming_them() {
        let mut class = storage_class();
        class.parameters = Some([("type".to_string(), "ssd".to_string())].into());
        let why = unsatisfiable(&claim(json!({"accessModes": ["ReadWriteOnce"]})), &class).unwrap();
        assert!(why.contains("parameters type"), "{why}");
    }

    #[test]
    fn a_volume_has_the_claims_request_and_modes_and_refers_to_it() {
        let c = claim(json!({"accessModes": ["ReadWriteMany"], "storageClassName": STORAGE_CLASS}));
        let v = volume_for(&c, &storage_class(), "pvc-u-1", Path::new("/v/pvc-u-1"));
        let spec = v.spec.unwrap();
        assert_eq!(spec.capacity.unwrap()["storage"].0, "1Gi");
        assert_eq!(spec.access_modes.unwrap(), ["ReadWriteMany"]);
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(spec.storage_class_name.as_deref(), Some(STORAGE_CLASS));
        assert_eq!(spec.host_path.unwrap().path, "/v/pvc-u-1");
        let claim_ref = spec.claim_ref.unwrap();
        assert_eq!(
            (claim_ref.namespace.as_deref(), claim_ref.name.as_deref(), claim_ref.uid.as_deref()),
            (Some("ns"), Some("c"), Some("u-1"))
        );
        assert_eq!(v.metadata.annotations.unwrap()[PROVISIONED_BY_ANNOTATION], PROVISIONER);
    }
}
