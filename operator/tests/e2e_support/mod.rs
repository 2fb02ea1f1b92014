//! End-to-end harness: a cluster (the loopback kube-testserver, or a real cluster when
//! `E2E_REAL_CLUSTER=1` and `KUBECONFIG` are set), a namespace per test, and the real
//! operator binary started as a process against it.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, ResourceExt};
use kube_testserver::{RequestRecord, TestServer};
use model_orchestra::chart::Chart;
use model_orchestra::controller::children::api_resource;
use model_orchestra::controller::reconciler::mo_resource;
use model_orchestra::kinds::Kind;
use serde_json::{json, Value};

pub const FIELD_MANAGER: &str = "model-orchestra-operator";
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Cluster {
    pub server: Option<TestServer>,
    pub kubeconfig: PathBuf,
    pub client: Client,
    pub namespace: String,
    _dir: Option<TempDir>,
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!("mo-e2e-{tag}-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn real_cluster() -> bool {
    std::env::var("E2E_REAL_CLUSTER").is_ok_and(|v| v == "1") && std::env::var_os("KUBECONFIG").is_some()
}

impl Cluster {
    /// A fresh cluster (loopback) or a fresh namespace (real cluster), with the CRD installed.
    pub async fn start(test: &str) -> Cluster {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (server, kubeconfig, dir, namespace) = if real_cluster() {
            let ns = format!("mo-e2e-{}-{}", test.replace('_', "-").chars().take(40).collect::<String>(), std::process::id());
            (None, PathBuf::from(std::env::var_os("KUBECONFIG").expect("checked")), None, ns)
        } else {
            if std::env::var_os("KUBECONFIG").is_some() {
                eprintln!("e2e: using the loopback kube-testserver; set E2E_REAL_CLUSTER=1 to run against $KUBECONFIG");
            }
            let server = TestServer::start().expect("start kube-testserver");
            let dir = TempDir::new(test);
            let path = dir.0.join("kubeconfig");
            server.write_kubeconfig(&path, "default").expect("write kubeconfig");
            (Some(server), path, Some(dir), "e2e".to_string())
        };
        let kc = Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig");
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("kubeconfig");
        let client = Client::try_from(config).expect("client");
        let cluster = Cluster { server, kubeconfig, client, namespace, _dir: dir };
        cluster.apply_value(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}}), "namespaces", "", "v1").await;
        let crd: Value = serde_json::to_value(model_orchestra::crd::crd()).expect("CRD");
        cluster.apply_value(&crd, "customresourcedefinitions", "apiextensions.k8s.io", "v1").await;
        let mo = cluster.mo_api();
        eventually("the CRD is served", || async { mo.list(&Default::default()).await.ok() }).await;
        cluster
    }

    async fn apply_value(&self, obj: &Value, plural: &str, group: &str, version: &str) {
        let ar = kube::api::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
            kind: obj["kind"].as_str().unwrap().into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        api.patch(obj["metadata"]["name"].as_str().unwrap(), &PatchParams::apply("e2e").force(), &Patch::Apply(obj)).await.expect("apply");
    }

    pub fn mo_api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &mo_resource())
    }

    pub fn api(&self, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &api_resource(kind))
    }

    /// Applies a ModelOrchestra manifest (YAML) into the test namespace, as a user would.
    pub async fn apply_cr(&self, yaml: &str) -> DynamicObject {
        let mut v: Value = serde_yaml::from_str(yaml).expect("CR YAML");
        v["metadata"]["namespace"] = json!(self.namespace);
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        self.mo_api().patch(&name, &PatchParams::apply("e2e-user").force(), &Patch::Apply(&v)).await.expect("apply CR")
    }

    pub async fn cr(&self, name: &str) -> DynamicObject {
        self.mo_api().get(name).await.expect("get CR")
    }

    /// The (kind, name) pairs `render` produces for this CR: the operator must create exactly these.
    pub fn expected(&self, yaml: &str) -> BTreeSet<(Kind, String)> {
        let mo = model_orchestra::input::parse_model_orchestra(yaml).expect("valid CR");
        let objects = model_orchestra::render(&Chart::embedded().unwrap(), &mo, &self.namespace).expect("renders");
        objects.into_iter().map(|o| (o.kind, o.name)).collect()
    }

    /// Every object of a chart kind in the namespace labelled as a child of `owner`.
    pub async fn children(&self, owner: &str) -> Vec<(Kind, DynamicObject)> {
        let selector = format!("models.titanml.co/modelorchestra={owner}");
        let mut out = vec![];
        for kind in Kind::ALL.into_iter().filter(|k| !k.is_optional()) {
            let list = self.api(kind).list(&kube::api::ListParams::default().labels(&selector)).await.expect("list");
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
            let generation = cr.metadata.generation;
            let status = cr.data.get("status")?;
            let ready = status["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?;
            (ready["reason"] == reason && status["observedGeneration"].as_i64() == generation).then_some(cr)
        })
        .await
    }

    /// Plays kubelet and the deployment controller: every child Deployment reports all
    /// replicas ready for its current generation.
    pub async fn make_deployments_ready(&self, owner: &str) {
        for (kind, d) in self.children(owner).await {
            if kind != Kind::Deployment {
                continue;
            }
            let replicas = d.data["spec"]["replicas"].as_i64().unwrap_or(1);
            let status = json!({"status": {"observedGeneration": d.metadata.generation, "replicas": replicas, "readyReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas}});
            self.api(Kind::Deployment).patch_status(&d.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await.expect("patch status");
        }
    }

    pub async fn delete(&self, kind: Kind, name: &str) {
        self.api(kind).delete(name, &DeleteParams::default()).await.expect("delete");
    }

    /// Requests the loopback server logged (None on a real cluster).
    pub fn requests(&self) -> Option<Vec<RequestRecord>> {
        self.server.as_ref().map(TestServer::requests)
    }

    pub async fn create_json(&self, kind: Kind, obj: &Value) {
        let o: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
        self.api(kind).create(&PostParams::default(), &o).await.expect("create");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.server.is_none() {
            // A real cluster: remove the test's namespace (and with it its CRs and children).
            let _ = Command::new("kubectl")
                .args(["delete", "namespace", &self.namespace, "--wait=false", "--ignore-not-found"])
                .env("KUBECONFIG", &self.kubeconfig)
                .output();
        }
    }
}

/// Writes (not lease renewals or events) sent by the operator instance `identity` to
/// objects in the namespace, from `since` on in the request log.
pub fn writes_by(requests: &[RequestRecord], identity: &str, since: usize) -> Vec<RequestRecord> {
    requests[since.min(requests.len())..]
        .iter()
        .filter(|r| r.is_write() && r.user_agent.contains(&format!("; {identity})")))
        .filter(|r| !r.path.contains("/leases") && !r.path.contains("/events"))
        .cloned()
        .collect()
}

/// Polls `f` until it returns `Some`, or panics after the timeout naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if start.elapsed() > TIMEOUT {
            panic!("timed out after {TIMEOUT:?} waiting until {what}");
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
}

impl Default for OperatorOptions<'_> {
    fn default() -> Self {
        OperatorOptions { routing: "v0", claim_unlabeled: true, resync_seconds: 300, identity: "op-a" }
    }
}

impl Operator {
    pub fn start(cluster: &Cluster, o: OperatorOptions) -> Operator {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"));
        cmd.arg("run")
            .args(["--routing", o.routing])
            .args(["--identity", o.identity])
            .args(["--watch-namespace", &cluster.namespace])
            .args(["--lease-namespace", &cluster.namespace])
            .args(["--lease-duration-seconds", "4", "--lease-renew-seconds", "1"])
            .args(["--resync-seconds", &o.resync_seconds.to_string()])
            .args(["--metrics-addr", "127.0.0.1:0", "--log-format", "json"])
            .env("KUBECONFIG", &cluster.kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("MODEL_ORCHESTRA_ROUTING")
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

    /// Log lines (JSON) whose message is `message`.
    pub fn logged(&self, message: &str) -> Vec<Value> {
        self.logs.lock().unwrap().iter().filter(|l| l["message"] == message).cloned().collect()
    }

    pub async fn wait_logged(&self, message: &str) -> Value {
        eventually(&format!("{} logs {message:?}", self.identity), || async { self.logged(message).into_iter().next() }).await
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
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples/modelorchestra.yaml")).expect("sample CR")
}

/// A CR named `name` with the given applications (each a small CPU application).
pub fn cr_with_apps(name: &str, apps: &[&str], routing: Option<&str>) -> String {
    let labels = routing.map(|r| format!("\n  labels:\n    operatorVersion: {r}")).unwrap_or_default();
    let mut s = format!("apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata:\n  name: {name}{labels}\nspec:\n  applications:\n");
    for app in apps {
        s.push_str(&format!("    {app}:\n      readerConfig:\n        modelName: org/{app}-model\n        device: cpu\n"));
    }
    s
}
