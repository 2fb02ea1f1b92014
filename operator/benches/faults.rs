//! `make bench-faults`: how many requests a stack loses when something happens, under a
//! steady load through the model gateway, on the local cluster's two real nodes.
//!
//! One Ollama application serving SmolLM2 135M on two replicas behind the model gateway
//! (two replicas), on two real nodes. `BENCH_FAULTS_CLIENTS` clients (default 4) ask without
//! a pause, streamed answers (`/api/generate`, Ollama's API) and whole ones
//! (`/v1/chat/completions`, OpenAI's) in turn, each over a connection of its own, through the
//! gateway's Service, from the cluster's network. Meanwhile, one after another, with a quiet
//! spell after each ([`PHASES`]; `BENCH_FAULTS_PHASES` picks some): a gateway pod deleted, an
//! application pod deleted, a rolling update of the application, a model added (pulled into
//! the running replicas, its first download stalled by the models registry for a while)
//! and removed, verified
//! promotion turned on (a candidate answers the success prompt, then the application rolls:
//! the handover), the operator restarted (its leadership lost), the API server restarted, a
//! node holding a replica of each stopped as a machine loses power (then started again), and
//! `kubectl drain` of the node of an application replica (then uncordon). For each phase:
//! the requests that ended in it, how many failed (and why) or were sent again, the latency
//! of the whole answer (p50, p99), and when the last troubled request ended.
//!
//! A request fails when its status is not 200, its connection breaks once open, or its answer
//! ends before its end (`done: true`, or the chat's message). A request whose connection never
//! opened (nothing was sent) is sent again, 50 ms later, as a client that retries connect
//! failures does (Envoy's `connect-failure`, curl's `--retry-connrefused`), and counted as
//! retried; nothing else is sent again. A client that failed waits 200 ms before its next.
//! `BENCH_FAULTS_KEEP=1` keeps the cluster's directory (its logs, the pods' logs, the audit
//! log).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use local_cluster::isolation::Isolation;
use local_cluster::ollama::{GEMMA3, SMOLLM2};
use local_cluster::{Cluster, Options};
use serde_json::{json, Value};

#[path = "support/process.rs"]
mod process;
use process::{apply, env_num};
#[path = "support/ollama.rs"]
mod ollama;
use ollama::{ollama_cr, operator_process, KillOnDrop, PROMPT};
#[path = "../tests/shared/whole_answer.rs"]
mod whole_answer;
use whole_answer::ask_whole;

const NAMESPACE: &str = "bench-faults";
/// Between two faults, and before the first: the load alone.
const QUIET: Duration = Duration::from_secs(10);
/// A client's pause after a failed request.
const AFTER_FAILURE: Duration = Duration::from_millis(200);
/// How long a client's connect may take (a dead endpoint may never answer).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client sends again a request whose connection never opened, 50 ms apart.
const UNSENT_RETRIES_FOR: Duration = Duration::from_secs(60);
/// How long a stopped node stays Ready in the API server, and its pods on it after that.
const NODE_FAILURE_SECONDS: u32 = 15;

fn main() {
    process::main("faults", bench());
}

/// The faults to run (`BENCH_FAULTS_PHASES`, a comma-separated list of [`PHASES`]; all by
/// default), in the benchmark's order whatever the list's.
struct Wanted(Vec<String>);

/// Each fault's key, in the order they run.
const PHASES: &[&str] = &[
    "gateway",
    "application",
    "rollout",
    "model-added",
    "model-removed",
    "promotion",
    "operator",
    "api-server",
    "node-stop",
    "drain",
];

impl Wanted {
    fn from_env() -> Wanted {
        let Ok(list) = std::env::var("BENCH_FAULTS_PHASES") else {
            return Wanted(PHASES.iter().map(|p| p.to_string()).collect());
        };
        let keys: Vec<String> = list.split(',').map(|k| k.trim().to_string()).filter(|k| !k.is_empty()).collect();
        for key in &keys {
            assert!(PHASES.contains(&key.as_str()), "BENCH_FAULTS_PHASES: no fault {key:?}; the faults are {PHASES:?}");
        }
        Wanted(keys)
    }

    fn includes(&self, key: &str) -> bool {
        self.0.iter().any(|k| k == key)
    }
}

/// One request of the load.
struct Sample {
    began: Instant,
    took: Duration,
    failed: Option<String>,
    /// Its connection failed to open at least once; it was sent again.
    retried: bool,
}

async fn bench() {
    let wanted = Wanted::from_env();
    let options = Options {
        real_nodes: 2,
        node_failure_seconds: Some(NODE_FAILURE_SECONDS),
        // `BENCH_FAULTS_KEEP=1`: the cluster's directory (its logs, the pods' logs, the audit
        // log) is kept, to see why a request failed.
        keep_dir: std::env::var_os("BENCH_FAULTS_KEEP").is_some(),
        ..Options::default()
    };
    let (cluster, client, gateway_image) = ollama::cluster_of(options, &[SMOLLM2, GEMMA3]).await;
    cluster.run_pods_for_real(NAMESPACE).await.unwrap();
    let mut operator = KillOnDrop(operator_process(&cluster, NAMESPACE, &gateway_image));

    // The CRD in the API server's discovery (what `apply` reads) before the CR is applied.
    let gvk = kube::api::GroupVersionKind::gvk(model_orchestra_api::GROUP, "v1alpha2", "ModelOrchestra");
    while kube::discovery::pinned_kind(&client, &gvk).await.is_err() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut cr = ollama_cr(NAMESPACE, SMOLLM2.name, None);
    cr["spec"]["applications"]["chat"]["replicaCount"] = json!(2);
    // A stalled pull is failed (and retried) after 5 s without a byte.
    cr["spec"]["applications"]["chat"]["engine"]["ollama"]["stallSeconds"] = json!(5);
    apply(&client, &cr).await;
    wait_serving(&client, 2, 2).await;
    let gateway = cluster_ip(&client, "bench-model-orchestra-gateway").await;

    let clients = env_num("BENCH_FAULTS_CLIENTS", 4) as usize;
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..clients)
        .map(|_| {
            let inside = InsideConnector(cluster.isolation().clone());
            tokio::spawn(ask_until(inside, gateway, stop.clone(), samples.clone()))
        })
        .collect();
    // The first answers load the model into each replica: the quiet window starts after them.
    wait_until("the first answers", || async { (samples.lock().unwrap().len() >= clients).then_some(()) }).await;
    samples.lock().unwrap().clear();

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    // Each phase: its name, when it began and ended.
    let mut phases: Vec<(&str, Instant, Instant)> = Vec::new();

    let began = Instant::now();
    tokio::time::sleep(QUIET).await;
    phases.push(("steady load", began, Instant::now()));

    if wanted.includes("gateway") {
        let began = Instant::now();
        delete_one(&pods, &client, "gateway").await;
        tokio::time::sleep(QUIET).await;
        phases.push(("a gateway pod deleted", began, Instant::now()));
    }

    if wanted.includes("application") {
        let began = Instant::now();
        delete_one(&pods, &client, "application-chat").await;
        tokio::time::sleep(QUIET).await;
        phases.push(("an application pod deleted", began, Instant::now()));
    }

    if wanted.includes("rollout") {
        let began = Instant::now();
        let before = names(&pods, "app.kubernetes.io/component=application-chat").await;
        cr["spec"]["applications"]["chat"]["podAnnotations"] = json!({"rolled": "1"});
        apply(&client, &cr).await;
        for name in &before {
            gone(&pods, name).await;
        }
        wait_serving(&client, 2, 2).await;
        tokio::time::sleep(QUIET).await;
        phases.push(("a rolling update of the application", began, Instant::now()));
    }

    if wanted.includes("model-added") {
        // Gemma, never pulled yet: its first download meets a models registry that stops
        // sending; the pull is failed after `stallSeconds` and retried once it sends again.
        let began = Instant::now();
        let blobs = &cluster.models_registry.as_ref().expect("a models registry").blobs;
        blobs.faults.stall(true);
        cr["spec"]["applications"]["chat"]["engine"]["ollama"]["models"] =
            json!([{"name": SMOLLM2.name}, {"name": GEMMA3.name}]);
        apply(&client, &cr).await;
        wait_status(&client, "gemma3's stalled pull failed", |st| {
            model_status(st, GEMMA3.name).is_some_and(|m| {
                m["phase"] == "Failed" && m["message"].as_str().is_some_and(|t| t.contains("no progress"))
            })
        })
        .await;
        blobs.faults.stall(false);
        wait_status(&client, "gemma3 pulled into both replicas", |st| {
            model_status(st, GEMMA3.name).is_some_and(|m| m["phase"] == "Ready" && m["replicas"] == "2/2")
        })
        .await;
        tokio::time::sleep(QUIET).await;
        phases.push(("a model added, its pull stalled (then resumed)", began, Instant::now()));
    }

    if wanted.includes("model-removed") {
        let began = Instant::now();
        cr["spec"]["applications"]["chat"]["engine"]["ollama"]["models"] = json!([{"name": SMOLLM2.name}]);
        apply(&client, &cr).await;
        wait_status(&client, "gemma3 deleted from the replicas", |st| model_status(st, GEMMA3.name).is_none()).await;
        tokio::time::sleep(QUIET).await;
        phases.push(("a model removed (deleted, no pod restarted)", began, Instant::now()));
    }

    if wanted.includes("promotion") {
        let began = Instant::now();
        let before = names(&pods, "app.kubernetes.io/component=application-chat").await;
        cr["spec"]["applications"]["chat"]["promotion"] = json!({"enabled": true, "prompt": PROMPT,
            "expect": r"\s*Paris", "successThreshold": 1, "failureThreshold": 2, "periodSeconds": 1});
        apply(&client, &cr).await;
        wait_status(&client, "the new revision promoted", |st| {
            st["applications"]["chat"]["promotion"]["phase"] == "Promoted"
        })
        .await;
        for name in &before {
            gone(&pods, name).await;
        }
        wait_serving(&client, 2, 2).await;
        tokio::time::sleep(QUIET).await;
        phases.push(("a verified promotion's handover", began, Instant::now()));
    }

    if wanted.includes("operator") {
        let began = Instant::now();
        drop(operator);
        operator = KillOnDrop(operator_process(&cluster, NAMESPACE, &gateway_image));
        tokio::time::sleep(QUIET).await;
        phases.push(("the operator restarted", began, Instant::now()));
    }

    if wanted.includes("api-server") {
        let began = Instant::now();
        cluster.restart_api_server().await.unwrap_or_else(|e| panic!("{e}"));
        tokio::time::sleep(QUIET).await;
        phases.push(("the API server restarted", began, Instant::now()));
    }

    if wanted.includes("node-stop") {
        let began = Instant::now();
        let node = node_of(&pods, "application-chat").await;
        let lost = names_on(&pods, &node).await;
        cluster.stop_real_node(&node).unwrap();
        let nodes: Api<Node> = Api::all(client.clone());
        wait_until("the stopped node is no longer Ready", || async {
            let node = nodes.get(&node).await.ok()?;
            let conditions = node.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Ready" && c.status != "True").then_some(())
        })
        .await;
        // Evicted after the same time again; their replacements run on the other node.
        for name in &lost {
            wait_until("the lost node's pods are evicted", || async {
                pods.get_opt(name).await.ok()?.is_none_or(|p| p.metadata.deletion_timestamp.is_some()).then_some(())
            })
            .await;
        }
        wait_serving(&client, 2, 2).await;
        cluster.start_real_node(&node).await.unwrap();
        tokio::time::sleep(QUIET).await;
        phases.push(("a real node stopped (then started)", began, Instant::now()));
    }

    if wanted.includes("drain") {
        let began = Instant::now();
        let node = node_of(&pods, "application-chat").await;
        kubectl(&cluster, &["drain", &node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "300s"])
            .await;
        wait_serving(&client, 2, 2).await;
        kubectl(&cluster, &["uncordon", &node]).await;
        tokio::time::sleep(QUIET).await;
        phases.push(("kubectl drain of a node (then uncordon)", began, Instant::now()));
    }

    stop.store(true, Ordering::SeqCst);
    for task in load {
        task.await.unwrap();
    }
    drop(operator);

    let samples = samples.lock().unwrap();
    println!(
        "\n{clients} clients through the model gateway (2 replicas) to SmolLM2 135M (2 replicas), two real nodes:"
    );
    println!(
        "  {:<48} {:>7} {:>9} {:>7} {:>8} {:>9} {:>9} {:>10}",
        "phase", "seconds", "requests", "failed", "retried", "p50 (s)", "p99 (s)", "recovered"
    );
    let (mut all, mut lost) = (0, 0);
    for (name, began, ended) in &phases {
        // A request counts where it ended: a stream cut by a fault is the fault's.
        let of: Vec<&Sample> = samples.iter().filter(|s| (*began..*ended).contains(&(s.began + s.took))).collect();
        let failed: Vec<&str> = of.iter().filter_map(|s| s.failed.as_deref()).collect();
        let mut took: Vec<Duration> = of.iter().filter(|s| s.failed.is_none()).map(|s| s.took).collect();
        took.sort();
        let at = |q: f64| took.get(((took.len() as f64 - 1.0) * q).round() as usize).map_or(0.0, |d| d.as_secs_f64());
        // Recovered: when the phase's last failed or retried request ended (since the fault).
        let troubled = of.iter().filter(|s| s.failed.is_some() || s.retried).map(|s| s.began + s.took).max();
        let recovered = troubled.map_or("-".to_string(), |t| format!("{:.1} s", (t - *began).as_secs_f64()));
        println!(
            "  {name:<48} {:>7.1} {:>9} {:>7} {:>8} {:>9.2} {:>9.2} {recovered:>10}",
            (*ended - *began).as_secs_f64(),
            of.len(),
            failed.len(),
            of.iter().filter(|s| s.retried).count(),
            at(0.5),
            at(0.99)
        );
        for sample in of.iter().filter(|s| s.failed.is_some()).take(5) {
            let at = (sample.began - *began).as_secs_f64();
            println!(
                "      failed at +{at:.1} s after {:.1} s: {}",
                sample.took.as_secs_f64(),
                sample.failed.as_deref().unwrap_or("")
            );
        }
        all += of.len();
        lost += failed.len();
    }
    println!("  {:<48} {:>7} {:>9} {lost:>7}", "in all", "", all);
}

/// Asks until told to stop, streamed and whole answers in turn; records each request. A
/// request whose connection never opened (nothing sent) is sent again, as a client that
/// retries connect failures does; any other failure is final.
async fn ask_until(inside: InsideConnector, at: SocketAddr, stop: Arc<AtomicBool>, samples: Arc<Mutex<Vec<Sample>>>) {
    // A connection per request: each goes to the gateway replica the Service picks then.
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(inside);
    let mut streamed = true;
    while !stop.load(Ordering::SeqCst) {
        let began = Instant::now();
        let mut retried = false;
        let failed = loop {
            match ask_whole(&client, at, SMOLLM2.name, streamed).await {
                Err(lost) if lost.unsent && began.elapsed() < UNSENT_RETRIES_FOR => {
                    retried = true;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(lost) => break Some(lost.said),
                Ok(()) => break None,
            }
        };
        let pause = failed.is_some();
        samples.lock().unwrap().push(Sample { began, took: began.elapsed(), failed, retried });
        streamed = !streamed;
        // A client waits a little after a failure, as any client with a backoff does: else a
        // refused connection would be counted thousands of times a second.
        if pause {
            tokio::time::sleep(AFTER_FAILURE).await;
        }
    }
}

/// Deletes a pod of the stack's `component`, then waits until it is gone and the stack
/// serves again with every replica.
async fn delete_one(pods: &Api<Pod>, client: &kube::Client, component: &str) {
    let of = names(pods, &format!("app.kubernetes.io/component={component}")).await;
    pods.delete(&of[0], &DeleteParams::default()).await.unwrap();
    gone(pods, &of[0]).await;
    wait_serving(client, 2, 2).await;
}

/// The status of the application's model `name`, when the status lists it.
fn model_status<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["applications"]["chat"]["models"].as_array()?.iter().find(|m| m["name"] == name)
}

/// Until the CR's status, at its current generation, satisfies `done`.
async fn wait_status(client: &kube::Client, what: &str, done: impl Fn(&Value) -> bool) {
    let mos: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &model_orchestra_api::ApiVersion::V1alpha2.resource());
    let start = Instant::now();
    loop {
        if let Ok(cr) = mos.get("bench").await {
            let current = cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation;
            if current && done(&cr.data["status"]) {
                return;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(300), "{what}: not after 5 minutes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Until the CR is Ready with `replicas` application replicas and `gateways` gateway pods
/// ready.
async fn wait_serving(client: &kube::Client, replicas: i64, gateways: usize) {
    let mos: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &model_orchestra_api::ApiVersion::V1alpha2.resource());
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let start = Instant::now();
    loop {
        let st = mos.get("bench").await.map(|cr| cr.data["status"].clone()).unwrap_or_default();
        let ready = st["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
        let serving = st["applications"]["chat"]["readyReplicas"].as_i64() == Some(replicas);
        let gateway_pods = pods.list(&ListParams::default().labels("app.kubernetes.io/component=gateway")).await;
        let ready_gateways = gateway_pods
            .map_or(0, |l| l.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && pod_ready(p)).count());
        if ready && serving && ready_gateways == gateways {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "not serving after 5 minutes: {st}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn pod_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The names of the pods with `selector` not being deleted.
async fn names(pods: &Api<Pod>, selector: &str) -> Vec<String> {
    let list = pods.list(&ListParams::default().labels(selector)).await.unwrap();
    list.items.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).filter_map(|p| p.metadata.name).collect()
}

/// The node of a pod of the stack's `component` (not being deleted).
async fn node_of(pods: &Api<Pod>, component: &str) -> String {
    let list = pods.list(&ListParams::default().labels(&format!("app.kubernetes.io/component={component}"))).await;
    let list = list.unwrap();
    let pod = list.items.into_iter().find(|p| p.metadata.deletion_timestamp.is_none()).expect("a pod");
    pod.spec.and_then(|s| s.node_name).expect("a scheduled pod")
}

/// The names of the namespace's pods on `node`.
async fn names_on(pods: &Api<Pod>, node: &str) -> Vec<String> {
    let list = pods.list(&ListParams::default().fields(&format!("spec.nodeName={node}"))).await.unwrap();
    list.items.into_iter().filter_map(|p| p.metadata.name).collect()
}

/// Runs the cluster's kubectl (a user's command, blocking: on a thread of its own).
async fn kubectl(cluster: &Cluster, args: &[&str]) {
    let mut command = cluster.kubectl();
    command.args(args);
    let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Until `f` gives something, for up to 5 minutes.
async fn wait_until<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "{what}: not after 5 minutes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn gone(pods: &Api<Pod>, name: &str) {
    let start = Instant::now();
    while pods.get_opt(name).await.ok().flatten().is_some() {
        assert!(start.elapsed() < Duration::from_secs(120), "{name} still there after 2 minutes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `service`'s cluster IP and port 80.
async fn cluster_ip(client: &kube::Client, service: &str) -> SocketAddr {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let ip = services.get(service).await.unwrap().spec.and_then(|s| s.cluster_ip).expect("a cluster IP");
    format!("{ip}:80").parse().unwrap()
}

/// The load's connections, made inside the cluster's network namespace as a client on the
/// cluster's network makes them (the host reaches no cluster IP). A connect that fails is
/// seen as one, so the request may be sent again safely; through a forwarder it would be a
/// connection closed after the request was written.
#[derive(Clone)]
struct InsideConnector(Arc<Isolation>);

impl tower_service::Service<http::Uri> for InsideConnector {
    type Response = hyper_util::rt::TokioIo<tokio::net::TcpStream>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let isolation = self.0.clone();
        Box::pin(async move {
            let authority = uri.authority().map(|a| a.as_str().to_string()).unwrap_or_default();
            let addr: SocketAddr = authority.parse().map_err(std::io::Error::other)?;
            let stream = isolation.connect_async(addr, CONNECT_TIMEOUT).await?;
            stream.set_nodelay(true)?;
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}
