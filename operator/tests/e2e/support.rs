//! End-to-end harness: a real Kubernetes control plane ([`local_cluster`]: etcd,
//! kube-apiserver, controller manager, scheduler, kwok GPU nodes; one per test binary), a
//! namespace per test, and the real operator binary started as a process under **its own
//! identity** — a token of the ServiceAccount bound to the ClusterRole that `config/deploy`
//! installs — so the API server enforces the operator's RBAC.
//!
//! With `E2E_REAL_CLUSTER=1` and `KUBECONFIG` set, the tests run against that cluster
//! instead (kind in CI); tests that need the audit log or a fault proxy then say so and
//! return.

#![allow(dead_code)]

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use local_cluster::audit::AuditEvent;
use local_cluster::proxy::FaultProxy;
use model_orchestra_api::deploy::operator::DeployOptions;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::ApiVersion;
use serde_json::{json, Value};

#[allow(unused_imports)]
pub use local_cluster::proxy::Faults;

pub const FIELD_MANAGER: &str = "model-orchestra-operator";
/// Where the operator's ServiceAccounts live (as `make deploy` installs them).
pub const OPERATOR_NAMESPACE: &str = "model-orchestra-system";
const TIMEOUT: Duration = Duration::from_secs(60);

/// One test's view of the cluster: its own namespace.
pub struct Cluster {
    /// The local control plane (None on an external cluster).
    pub local: Option<&'static local_cluster::Cluster>,
    /// A cluster of this test's own ([`Cluster::start_alone`]), stopped when the test ends.
    alone: bool,
    /// The admin's kubeconfig.
    pub kubeconfig: PathBuf,
    pub client: Client,
    pub namespace: String,
    pub dir: TempDir,
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mo-e2e-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn external_cluster() -> bool {
    std::env::var("E2E_REAL_CLUSTER").is_ok_and(|v| v == "1") && std::env::var_os("KUBECONFIG").is_some()
}

impl Cluster {
    /// The test's namespace (fresh) on the cluster, with the CRD installed.
    pub async fn start(test: &str) -> Cluster {
        Cluster::start_with_labels(test, json!({})).await
    }

    /// Like [`Cluster::start`], the namespace carrying `labels` (e.g. Pod Security levels).
    pub async fn start_with_labels(test: &str, labels: Value) -> Cluster {
        Cluster::start_on(test, labels, false).await
    }

    /// A cluster of this test's own (fake nodes only), for a test about what is cluster-wide:
    /// an admission policy (which every other test's operator would then dry-run for), the
    /// capacity of a GPU node. Stopped when the test ends. On an external cluster, the same
    /// as [`Cluster::start_with_labels`].
    pub async fn start_alone(test: &str, labels: Value) -> Cluster {
        Cluster::start_on(test, labels, true).await
    }

    async fn start_on(test: &str, labels: Value, alone: bool) -> Cluster {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let slug: String = test.replace('_', "-").chars().take(40).collect();
        let (local, kubeconfig, namespace) = if external_cluster() {
            (
                None,
                PathBuf::from(std::env::var_os("KUBECONFIG").expect("checked")),
                format!("mo-e2e-{slug}-{}", std::process::id()),
            )
        } else if alone {
            let own = local_cluster::Cluster::start(local_cluster::Options::fake_nodes_only())
                .await
                .unwrap_or_else(|e| panic!("a cluster of its own: {e}"));
            // 'static like the shared one; stopped (its processes, namespaces and directory
            // gone) when the test's Cluster drops.
            let own: &'static local_cluster::Cluster = Box::leak(Box::new(own));
            (Some(own), own.kubeconfig.clone(), format!("e2e-{slug}"))
        } else {
            let local = local_cluster::Cluster::shared();
            (Some(local), local.kubeconfig.clone(), format!("e2e-{slug}"))
        };
        let alone = alone && local.is_some();
        let client = local_cluster::client_for(&kubeconfig).await.expect("admin client");
        let cluster = Cluster { local, alone, kubeconfig, client, namespace, dir: TempDir::new(test) };
        let ns =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace, "labels": labels}});
        cluster.apply_value(&ns, "namespaces", "", "v1").await;
        install_crd(&cluster.client).await;
        cluster
    }

    pub async fn apply_value(&self, obj: &Value, plural: &str, group: &str, version: &str) -> DynamicObject {
        let ar = kube::api::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
            kind: obj["kind"].as_str().unwrap().into(),
            plural: plural.into(),
        };
        let name = obj["metadata"]["name"].as_str().unwrap();
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        api.patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(obj))
            .await
            .unwrap_or_else(|e| panic!("apply {plural} {name}: {e}"))
    }

    pub fn mo_api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &ApiVersion::V1alpha1.resource())
    }

    /// ModelOrchestras read at `version` (the storage version shows every field).
    pub fn mo_api_at(&self, version: ApiVersion) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &version.resource())
    }

    pub fn api(&self, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &kind.resource())
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Applies a ModelOrchestra manifest (YAML) into the test namespace, as a user would.
    pub async fn apply_cr(&self, yaml: &str) -> DynamicObject {
        self.try_apply_cr(yaml).await.expect("apply CR")
    }

    pub async fn try_apply_cr(&self, yaml: &str) -> Result<DynamicObject, kube::Error> {
        let mut v: Value = serde_yaml::from_str(yaml).expect("CR YAML");
        v["metadata"]["namespace"] = json!(self.namespace);
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        self.mo_api().patch(&name, &PatchParams::apply("e2e-user").force(), &Patch::Apply(&v)).await
    }

    pub async fn cr(&self, name: &str) -> DynamicObject {
        self.mo_api().get(name).await.expect("get CR")
    }

    /// The (kind, name) pairs `render` produces for this CR: the operator must create exactly these.
    pub fn expected(&self, yaml: &str) -> BTreeSet<(Kind, String)> {
        let objects = model_orchestra::render_manifest(yaml, &self.namespace).expect("renders").objects;
        objects.into_iter().map(|o| (o.kind, o.name)).collect()
    }

    /// Every object of a chart kind in the namespace labelled as a child of `owner`.
    pub async fn children(&self, owner: &str) -> Vec<(Kind, DynamicObject)> {
        let selector = format!("models.titanml.co/modelorchestra={owner}");
        let mut out = vec![];
        for kind in Kind::ALL {
            let Ok(list) = self.api(kind).list(&ListParams::default().labels(&selector)).await else {
                continue;
            };
            out.extend(list.items.into_iter().map(|o| (kind, o)));
        }
        out
    }

    pub async fn child_names(&self, owner: &str) -> BTreeSet<(Kind, String)> {
        self.children(owner).await.into_iter().map(|(k, o)| (k, o.name_any())).collect()
    }

    /// Waits until the children of `owner` are exactly `want`.
    pub async fn wait_children(&self, owner: &str, want: &BTreeSet<(Kind, String)>) {
        eventually(&format!("children of {owner} are {want:?}"), || async {
            let have = self.child_names(owner).await;
            (have == *want).then_some(())
        })
        .await;
    }

    /// Waits until the CR's Ready condition has `reason` (and the status is for its generation).
    pub async fn wait_reason(&self, name: &str, reason: &str) -> DynamicObject {
        eventually(&format!("{name} has Ready reason {reason}"), || async {
            let cr = self.mo_api().get(name).await.ok()?;
            (ready_condition(&cr)?["reason"] == reason
                && cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation)
                .then_some(cr)
        })
        .await
    }

    /// Waits until the CR is applied and its pods are ready: `Ready` on the local cluster,
    /// where kwok runs every pod; on an external cluster (whose kubelets would pull the
    /// real images) until the status describes an applied generation.
    pub async fn wait_converged(&self, name: &str) -> DynamicObject {
        if self.local.is_some() {
            return self.wait_reason(name, "Ready").await;
        }
        eventually(&format!("{name} is applied"), || async {
            let cr = self.mo_api().get(name).await.ok()?;
            let applied = cr.data["status"]["appliedHash"].is_string()
                && cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation;
            applied.then_some(cr)
        })
        .await
    }

    /// Whether the tests run on the local cluster with its kwok CPU and GPU nodes (and say
    /// why not, when not).
    pub fn has_fake_nodes(&self, test: &str) -> bool {
        if self.local.is_none() {
            eprintln!("{test}: skipped on an external cluster: it needs the local cluster's kwok GPU nodes");
        }
        self.local.is_some()
    }

    pub async fn delete(&self, kind: Kind, name: &str) {
        self.api(kind).delete(name, &DeleteParams::default()).await.expect("delete");
    }

    pub async fn create_json(&self, kind: Kind, obj: &Value) {
        let o: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
        self.api(kind).create(&PostParams::default(), &o).await.expect("create");
    }

    /// The API server's audit log (None on an external cluster).
    pub fn audit(&self) -> Option<local_cluster::audit::AuditLog> {
        self.local.map(local_cluster::Cluster::audit)
    }

    /// A mark in the audit log (0 on an external cluster).
    pub fn audit_mark(&self) -> u64 {
        self.audit().map_or(0, |a| a.mark())
    }

    /// Writes by the operator instance `identity` to objects in this test's namespace since
    /// `mark` (leases and events excluded), from the audit log.
    pub fn writes_by(&self, identity: &str, mark: u64) -> Option<Vec<AuditEvent>> {
        let events = self.audit()?.since(mark);
        Some(events.into_iter().filter(|e| is_operator_write(e, identity) && e.namespace() == self.namespace).collect())
    }

    /// A kubeconfig for the operator line `routing`: a token of its ServiceAccount (the
    /// RBAC `config/deploy` installs), at `server` when given (a fault proxy).
    pub async fn operator_kubeconfig(&self, routing: &str, server: Option<&str>) -> PathBuf {
        install_operator_rbac(&self.client, routing).await;
        let name = deploy_options(routing).name();
        let token = local_cluster::kubeconfig::service_account_token(&self.client, OPERATOR_NAMESPACE, &name)
            .await
            .expect("token");
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let path = self.dir.0.join(format!("operator-{routing}-{}.kubeconfig", SEQ.fetch_add(1, Ordering::Relaxed)));
        local_cluster::kubeconfig::with_token(&self.kubeconfig, &token, server, &self.namespace, &path)
            .expect("operator kubeconfig");
        path
    }

    /// A fault proxy in front of the API server (None on an external cluster).
    pub fn fault_proxy(&self) -> Option<FaultProxy> {
        let local = self.local?;
        Some(FaultProxy::start(&local.server, &local.ca_pem).expect("fault proxy"))
    }

    /// The pods of one component (`gateway` or `application-<app>`) of the CR `release`.
    pub async fn component_pods(&self, release: &str, component: &str) -> Vec<Pod> {
        let selector = format!("app.kubernetes.io/instance={release},app.kubernetes.io/component={component}");
        self.pods().list(&ListParams::default().labels(&selector)).await.map(|l| l.items).unwrap_or_default()
    }

    /// Runs the cluster's kubectl (the pinned version, or the one on PATH for an external
    /// cluster) as the admin, in the test's namespace; returns stdout, or panics with stderr.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_with_input(args, "")
    }

    /// Like [`Cluster::kubectl`], with `input` on its standard input (`-f -`).
    pub fn kubectl_with_input(&self, args: &[&str], input: &str) -> String {
        let out = self.kubectl_output(args, input);
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl as [`Cluster::kubectl_with_input`] does, and returns what it did, failed or not.
    pub fn kubectl_output(&self, args: &[&str], input: &str) -> std::process::Output {
        use std::io::Write;
        let program =
            self.local.map_or_else(|| PathBuf::from("kubectl"), |_| local_cluster::tools::bin_dir().join("kubectl"));
        let mut child = Command::new(program)
            .args(args)
            .args(["-n", &self.namespace])
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write kubectl's input");
        child.wait_with_output().expect("run kubectl")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let (true, Some(own)) = (self.alone, self.local) {
            own.stop();
            return;
        }
        // The test's namespace goes, and with it its CRs and their pods: the shared
        // cluster's fake GPUs and its load do not grow with every test that ran.
        let program =
            self.local.map_or_else(|| PathBuf::from("kubectl"), |_| local_cluster::tools::bin_dir().join("kubectl"));
        let _ = Command::new(program)
            .args(["delete", "namespace", &self.namespace, "--wait=false", "--ignore-not-found"])
            .env("KUBECONFIG", &self.kubeconfig)
            .output();
    }
}

/// The CR's Ready condition.
pub fn ready_condition(cr: &DynamicObject) -> Option<&Value> {
    cr.data.get("status")?["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")
}

/// A write by the operator instance `identity` (its user agent names it), leases and events
/// excluded.
pub fn is_operator_write(e: &AuditEvent, identity: &str) -> bool {
    e.is_write()
        && e.user_agent.starts_with("model-orchestra-operator/")
        && e.user_agent.contains(&format!("; {identity})"))
        && !matches!(e.resource(), "leases" | "events")
}

/// The CRD, installed once per cluster (server-side apply; waits until it is served).
async fn install_crd(client: &Client) {
    static DONE: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let key = cluster_key(client).await;
    if DONE.lock().unwrap().get_or_insert_with(HashSet::new).contains(&key) {
        return;
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    // The optional kinds' real CRDs (KEDA, Prometheus Operator), taken from their pinned
    // Go modules by scripts/build-go-tools.sh, so what the operator renders for them is
    // validated by their real schemas.
    // The CRD the operator ships (both versions).
    let crd = model_orchestra_api::crd::crd();
    let mut crds = vec![serde_json::to_value(crd).expect("CRD")];
    for file in ["keda.sh_scaledobjects.yaml", "monitoring.coreos.com_servicemonitors.yaml"] {
        let path = local_cluster::tools::share_dir().join("crds").join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run scripts/build-go-tools.sh)", path.display()));
        crds.push(serde_yaml::from_str(&text).expect("CRD YAML"));
    }
    for crd in &crds {
        let name = crd["metadata"]["name"].as_str().unwrap();
        api.patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("apply the CRD {name}: {e}"));
    }
    for crd in &crds {
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        eventually(&format!("the CRD {name} is established"), || async {
            let c = api.get(&name).await.ok()?;
            c.data["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
                .then_some(())
        })
        .await;
    }
    let mo: Api<DynamicObject> = Api::all_with(client.clone(), &ApiVersion::V1alpha1.resource());
    eventually("the CRD is served", || async { mo.list(&Default::default()).await.ok() }).await;
    DONE.lock().unwrap().get_or_insert_with(HashSet::new).insert(key);
}

/// Which cluster a client talks to: the UID of its `kube-system` namespace.
async fn cluster_key(client: &Client) -> String {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces.get("kube-system").await.ok().and_then(|n| n.metadata.uid).unwrap_or_default()
}

pub fn crd_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

pub fn deploy_options(routing: &str) -> DeployOptions {
    DeployOptions {
        namespace: OPERATOR_NAMESPACE.into(),
        image: "unused".into(),
        routing: routing.into(),
        claim_unlabeled: false,
        api_version: None,
        release: None,
    }
}

/// The Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding of `config/deploy`
/// for the line `routing` (not its Deployment: the tests run the binary themselves).
async fn install_operator_rbac(client: &Client, routing: &str) {
    static DONE: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let key = format!("{}/{routing}", cluster_key(client).await);
    if DONE.lock().unwrap().get_or_insert_with(HashSet::new).contains(&key) {
        return;
    }
    let discovery = kube::discovery::Discovery::new(client.clone()).run().await.expect("discovery");
    for object in model_orchestra_api::deploy::operator::all(&deploy_options(routing)) {
        if object["kind"] == "Deployment" {
            continue;
        }
        let gvk = kube::api::GroupVersionKind::try_from(&kube::api::TypeMeta {
            api_version: object["apiVersion"].as_str().unwrap().into(),
            kind: object["kind"].as_str().unwrap().into(),
        })
        .unwrap();
        let (ar, caps) = discovery.resolve_gvk(&gvk).expect("a served kind");
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), object["metadata"]["namespace"].as_str().unwrap(), &ar)
            }
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            object["metadata"]["name"].as_str().unwrap(),
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&object),
        )
        .await
        .expect("apply operator RBAC");
    }
    // The tests run the operator outside the cluster: it asks promotion candidates through
    // the API server's service proxy, which `make run` users have through their kubeconfig.
    let name = deploy_options(routing).name();
    let out_of_cluster = format!("{name}-out-of-cluster");
    let mut role =
        serde_json::to_value(model_orchestra_api::deploy::rbac::out_of_cluster_role(&out_of_cluster)).unwrap();
    role["apiVersion"] = "rbac.authorization.k8s.io/v1".into();
    role["kind"] = "ClusterRole".into();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": out_of_cluster},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": out_of_cluster},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": OPERATOR_NAMESPACE}]
    });
    for (object, plural) in [(role, "clusterroles"), (binding, "clusterrolebindings")] {
        let ar = kube::api::ApiResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: object["kind"].as_str().unwrap().into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        api.patch(&out_of_cluster, &PatchParams::apply("e2e").force(), &Patch::Apply(&object))
            .await
            .expect("apply the out-of-cluster role");
    }
    DONE.lock().unwrap().get_or_insert_with(HashSet::new).insert(key);
}

/// Polls `f` until it returns `Some`, or panics after the timeout naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(TIMEOUT, what, f).await
}

pub async fn eventually_within<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The operator binary running as a process; killed on drop.
pub struct Operator {
    child: Child,
    pub identity: String,
    logs: Arc<Mutex<Vec<Value>>>,
}

pub struct OperatorOptions<'a> {
    pub routing: &'a str,
    pub claim_unlabeled: bool,
    pub resync_seconds: u64,
    pub identity: &'a str,
    /// The kubeconfig it runs with; default: its own ServiceAccount's token.
    pub kubeconfig: Option<&'a Path>,
    /// How long its Lease lasts without renewal (short, so leader tests are quick).
    pub lease_seconds: u64,
    /// The ModelOrchestra version the line serves.
    pub api_version: &'a str,
    /// More flags.
    pub extra_args: &'a [&'a str],
}

impl Default for OperatorOptions<'_> {
    fn default() -> Self {
        OperatorOptions {
            routing: "v0",
            claim_unlabeled: true,
            resync_seconds: 300,
            identity: "op-a",
            kubeconfig: None,
            lease_seconds: 4,
            api_version: "v1alpha1",
            extra_args: &[],
        }
    }
}

impl Operator {
    /// Starts the operator for the test's namespace, under its own ServiceAccount.
    pub async fn start(cluster: &Cluster, o: OperatorOptions<'_>) -> Operator {
        let kubeconfig = match o.kubeconfig {
            Some(k) => k.to_path_buf(),
            None => cluster.operator_kubeconfig(o.routing, None).await,
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"));
        cmd.arg("run")
            .args(["--routing", o.routing])
            .args(["--api-version", o.api_version])
            .args(["--identity", o.identity])
            .args(["--watch-namespace", &cluster.namespace])
            .args(["--lease-namespace", &cluster.namespace])
            .args(["--lease-duration-seconds", &o.lease_seconds.to_string(), "--lease-renew-seconds", "1"])
            .args(["--resync-seconds", &o.resync_seconds.to_string()])
            .args(["--metrics-addr", "127.0.0.1:0", "--log-format", "json"])
            .args(o.extra_args)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", std::env::var("E2E_OPERATOR_LOG").unwrap_or_else(|_| "info".into()))
            .env_remove("MODEL_ORCHESTRA_ROUTING")
            .env_remove("MODEL_ORCHESTRA_API_VERSION")
            .env_remove("MODEL_ORCHESTRA_CLAIM_UNLABELED")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if o.claim_unlabeled {
            cmd.arg("--claim-unlabeled");
        }
        let mut child = cmd.spawn().expect("start operator");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = logs.clone();
        let tag = o.identity.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => sink.lock().unwrap().push(v),
                    Err(_) => eprintln!("[{tag}] {line}"),
                }
            }
        });
        Operator { child, identity: o.identity.to_string(), logs }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Log lines (JSON) whose message is `message`.
    pub fn logged(&self, message: &str) -> Vec<Value> {
        self.logs.lock().unwrap().iter().filter(|l| l["message"] == message).cloned().collect()
    }

    pub async fn wait_logged(&self, message: &str) -> Value {
        eventually(&format!("{} logs {message:?}", self.identity), || async { self.logged(message).into_iter().next() })
            .await
    }

    /// The operations endpoint address, from the startup log.
    pub async fn metrics_addr(&self) -> String {
        self.wait_logged("starting").await["metrics"].as_str().unwrap().to_string()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait for a graceful exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        false
    }

    pub fn dump_logs(&self) {
        for l in self.logs.lock().unwrap().iter() {
            eprintln!("[{}] {l}", self.identity);
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        self.kill();
    }
}

pub fn sample() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples/modelorchestra.yaml"))
        .expect("sample CR")
}

/// A CR named `name` with the given applications (each a small CPU application).
pub fn cr_with_apps(name: &str, apps: &[&str], routing: Option<&str>) -> String {
    let labels = routing.map(|r| format!("\n  labels:\n    operatorVersion: {r}")).unwrap_or_default();
    let mut s = format!("apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata:\n  name: {name}{labels}\nspec:\n  applications:\n");
    for app in apps {
        s.push_str(&format!(
            "    {app}:\n      readerConfig:\n        modelName: org/{app}-model\n        device: cpu\n"
        ));
    }
    s
}

/// A tiny HTTP/1.0 GET (the operations endpoint is plain text on loopback).
pub async fn http_get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    let code = buf.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

pub async fn fetch_metrics(addr: &str) -> String {
    http_get(addr, "/metrics").await.1
}

pub fn metric(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok())).unwrap_or(0.0)
}

/// The operator's image in the shared cluster's registry, pushed once: what its model
/// gateways run.
pub async fn shared_operator_image(local: &'static local_cluster::Cluster) -> &'static str {
    static PUSHED: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    PUSHED.get_or_init(|| async { local.push_operator_image("e2e").await.unwrap_or_else(|e| panic!("{e}")) }).await
}
