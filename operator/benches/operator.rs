//! Operator benchmark (`make bench-operator`): first the physical limit — a bare concurrent
//! server-side-apply client applying exactly the objects `render` produces for the same CRs
//! (no operator, no CR, no dry run, no status), under the operator's ServiceAccount, on a fresh
//! local control plane, until every Deployment is ready — then the same CRs (1,000 × 4
//! applications by default) through the release operator binary on a fresh control plane of
//! the same shape, until every CR is `Ready=True`; both side by side with ratios (converge
//! time, API requests per CR, kube-apiserver CPU). Real control plane (etcd — data in a temp
//! dir, no fsync —, kube-apiserver, controller manager, scheduler, kwok nodes: every
//! Deployment gets its ReplicaSet and pods).
//!
//! Operator reports besides: API requests per CR and per kind, from the API server's audit
//! log; the operator's peak RSS and CPU; kube-apiserver's CPU; then a steady state of resyncs
//! with writes per no-op reconcile; then every CR deleted, and the operator's memory after it
//! forgot them. Targets: ≤ 1.3× the bare apply's converge time, requests and API server CPU;
//! operator peak RSS ≤ 100 MiB; 0 writes per no-op reconcile. Sizes: BENCH_CRS (1000),
//! BENCH_APPS (4), BENCH_STEADY_SECONDS (30), BENCH_RESYNC_SECONDS (10); BENCH_WRAP=heaptrack
//! profiles the operator (heaptrack sees only the system allocator's heap, not mimalloc's;
//! the RSS figures are then the wrapper's).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use local_cluster::{Cluster, Options};
use model_orchestra_api::deploy::operator::DeployOptions;
use serde_json::{json, Value};

#[path = "support/process.rs"]
mod process;
use process::{apply, env_num, proc_kib};

const NAMESPACE: &str = "bench";
const OPERATOR_NAMESPACE: &str = "model-orchestra-system";

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks = fields.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

/// `model_orchestra_reconciles_total` from the operator's /metrics.
fn reconciles(addr: &str) -> f64 {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return 0.0 };
    let _ = write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.lines()
        .filter(|l| l.starts_with("model_orchestra_reconciles_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn main() {
    process::main("operator", bench());
}

/// A fresh control plane with the CRD, the bench namespace and the operator's RBAC; the
/// kubeconfig of the operator's ServiceAccount (in `dir`).
async fn fresh_cluster(dir: &std::path::Path) -> (Cluster, kube::Client, Api<DynamicObject>, std::path::PathBuf) {
    // The controllers create thousands of ReplicaSets and pods: let them keep up.
    let cluster =
        Cluster::start(Options { controller_qps: 500, ..Options::fake_nodes_only() }).await.expect("local cluster");
    let client = cluster.client().await.unwrap();
    apply(&client, &serde_json::to_value(model_orchestra_api::crd::crd()).unwrap()).await;
    apply(&client, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})).await;
    let options = deploy_options();
    for object in model_orchestra_api::deploy::operator::all(&options).into_iter().filter(|o| o["kind"] != "Deployment")
    {
        apply(&client, &object).await;
    }
    let mo: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &model_orchestra_api::ApiVersion::V1alpha1.resource());
    while mo.list(&Default::default()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kubeconfig = dir.join("operator.kubeconfig");
    cluster.service_account_kubeconfig(OPERATOR_NAMESPACE, &options.name(), &kubeconfig, None).await.unwrap();
    (cluster, client, mo, kubeconfig)
}

fn deploy_options() -> DeployOptions {
    DeployOptions {
        namespace: OPERATOR_NAMESPACE.into(),
        image: "unused".into(),
        routing: "v0".into(),
        claim_unlabeled: true,
        api_version: None,
        release: None,
    }
}

/// The CR `name` with `apps` CPU applications.
fn cr(name: &str, apps: u64) -> Value {
    let applications: serde_json::Map<String, Value> = (0..apps)
        .map(|a| (format!("app{a}"), json!({"readerConfig": {"modelName": format!("org/model-{a}"), "device": "cpu"}})))
        .collect();
    json!({"apiVersion": "models.titanml.co/v1alpha1", "kind": "ModelOrchestra", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"applications": applications}})
}

/// What both sides are compared on.
struct Figures {
    converge: Duration,
    requests: usize,
    apiserver_cpu: f64,
}

/// Resolves once `count` objects `api` lists satisfy `done`. A watch, not polling, on both
/// sides: waiting costs the API server next to nothing.
async fn until_all<K>(api: Api<K>, count: usize, done: impl Fn(&K) -> bool)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use kube::runtime::watcher;
    let mut finished = std::collections::HashSet::new();
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                let name = o.meta().name.clone().unwrap_or_default();
                if done(&o) {
                    finished.insert(name);
                } else {
                    finished.remove(&name);
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                finished.remove(&o.meta().name.clone().unwrap_or_default());
            }
            _ => {}
        }
        if finished.len() >= count {
            return;
        }
    }
}

/// A Deployment whose current generation has all its replicas ready.
fn deployment_ready(d: &k8s_openapi::api::apps::v1::Deployment) -> bool {
    let status = d.status.clone().unwrap_or_default();
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    status.observed_generation == d.metadata.generation
        && status.updated_replicas.unwrap_or(0) >= want
        && status.ready_replicas.unwrap_or(0) >= want
}

/// A CR whose current generation is reconciled and Ready.
fn cr_ready(cr: &DynamicObject) -> bool {
    let status = &cr.data["status"];
    let ready = status["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    ready && status["observedGeneration"].as_i64() == cr.metadata.generation
}

/// The physical limit: every object `render` produces for the CRs, server-side applied by a
/// plain client under the operator's identity, as concurrently as the operator applies
/// (`--concurrency` 8 CRs × 8 objects); done when every apply has succeeded and every
/// Deployment is ready — the readiness the operator's `Ready=True` stands for.
async fn bare(crs: u64, apps: u64, dir: &std::path::Path) -> Figures {
    let (cluster, admin, _mo, kubeconfig) = fresh_cluster(dir).await;
    let client = local_cluster::client_for(&kubeconfig).await.unwrap();
    let objects: Vec<Value> = (0..crs)
        .flat_map(|i| model_orchestra::render_value(&cr(&format!("mo-{i:04}"), apps), NAMESPACE).unwrap().objects)
        .map(|o| o.object)
        .collect();
    let apiserver = cluster.pids().into_iter().find(|(n, _)| *n == "kube-apiserver").map(|(_, p)| p).unwrap();
    let audit = cluster.audit();
    let mark = audit.mark();
    let apiserver_cpu0 = cpu_seconds(apiserver);
    let deployments = objects.iter().filter(|o| o["kind"] == "Deployment").count();
    let ready = tokio::spawn(until_all(
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(admin.clone(), NAMESPACE),
        deployments,
        deployment_ready,
    ));
    let started = Instant::now();
    futures::stream::iter(objects.iter())
        .for_each_concurrent(64, |object| {
            let client = client.clone();
            async move {
                let kind = model_orchestra_api::kinds::Kind::from_kind(object["kind"].as_str().unwrap()).unwrap();
                let api: Api<DynamicObject> = Api::namespaced_with(client, NAMESPACE, &kind.resource());
                let name = object["metadata"]["name"].as_str().unwrap();
                let params = PatchParams::apply("model-orchestra-operator").force();
                api.patch(name, &params, &Patch::Apply(object)).await.unwrap();
            }
        })
        .await;
    ready.await.unwrap();
    let converge = started.elapsed();
    let apiserver_cpu = cpu_seconds(apiserver) - apiserver_cpu0;
    let user = format!("system:serviceaccount:{OPERATOR_NAMESPACE}:{}", deploy_options().name());
    let requests = audit.since(mark).into_iter().filter(|e| e.user.username == user).count();
    cluster.stop();
    Figures { converge, requests, apiserver_cpu }
}

async fn bench() {
    let crs = env_num("BENCH_CRS", 1000);
    let apps = env_num("BENCH_APPS", 4);
    let steady = Duration::from_secs(env_num("BENCH_STEADY_SECONDS", 30));
    let resync = env_num("BENCH_RESYNC_SECONDS", 10);
    let dir = std::env::temp_dir().join(format!("mo-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // BENCH_BARE=0 skips the bare apply (a profiling run of the operator alone).
    let bare = if env_num("BENCH_BARE", 1) == 0 { None } else { Some(bare(crs, apps, &dir).await) };
    let (cluster, client, mo, kubeconfig) = fresh_cluster(&dir).await;

    // BENCH_WRAP runs the operator under a profiler, e.g. BENCH_WRAP=heaptrack.
    let binary = env!("CARGO_BIN_EXE_model-orchestra-operator");
    let mut command = match std::env::var("BENCH_WRAP").ok().filter(|w| !w.is_empty()) {
        Some(wrapper) => {
            let mut c = Command::new(wrapper);
            c.arg(binary);
            c
        }
        None => Command::new(binary),
    };
    let mut child = command
        .args([
            "run",
            "--claim-unlabeled",
            "--metrics-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--lease-namespace",
            NAMESPACE,
        ])
        .args(["--resync-seconds", &resync.to_string(), "--identity", "bench"])
        .env("KUBECONFIG", &kubeconfig)
        .env(
            "RUST_LOG",
            std::env::var("BENCH_RUST_LOG").unwrap_or_else(|_| "warn,model_orchestra_operator=info".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("operator binary");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stderr = child.stderr.take().unwrap();
    // BENCH_OPERATOR_LOG=FILE keeps the operator's log (one JSON line per event).
    let mut log = std::env::var_os("BENCH_OPERATOR_LOG").map(|p| std::fs::File::create(p).expect("log file"));
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(log) = log.as_mut() {
                use std::io::Write;
                let _ = writeln!(log, "{line}");
            }
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut metrics_addr = String::new();
    loop {
        let v = rx.recv_timeout(Duration::from_secs(60)).expect("operator starts");
        if v["message"] == "starting" {
            metrics_addr = v["metrics"].as_str().unwrap_or_default().to_string();
        }
        if v["message"] == "leading" {
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let baseline_rss = proc_kib(pid, "VmRSS:");
    let apiserver = cluster.pids().into_iter().find(|(n, _)| *n == "kube-apiserver").map(|(_, p)| p).unwrap();
    let audit = cluster.audit();
    let mark = audit.mark();
    let (operator_cpu0, apiserver_cpu0) = (cpu_seconds(pid), cpu_seconds(apiserver));

    let ready = tokio::spawn(until_all(mo.clone(), crs as usize, cr_ready));
    let started = Instant::now();
    let names: Vec<String> = (0..crs).map(|i| format!("mo-{i:04}")).collect();
    futures::stream::iter(names.iter())
        .for_each_concurrent(16, |name| {
            let mo = mo.clone();
            async move {
                let cr = cr(name, apps);
                mo.patch(name, &PatchParams::apply("bench"), &Patch::Apply(&cr)).await.unwrap();
            }
        })
        .await;
    let created = started.elapsed();
    tokio::time::timeout(Duration::from_secs(1800), ready).await.expect("every CR Ready within 1800 s").unwrap();
    let converged = started.elapsed();
    let converge_events: Vec<_> =
        audit.since(mark).into_iter().filter(|e| e.user_agent.starts_with("model-orchestra-operator/")).collect();
    let peak_converge = proc_kib(pid, "VmHWM:");
    let (operator_cpu, apiserver_cpu) = (cpu_seconds(pid) - operator_cpu0, cpu_seconds(apiserver) - apiserver_cpu0);
    let mut per_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for e in &converge_events {
        let kind = if e.subresource().is_empty() {
            e.resource().to_string()
        } else {
            format!("{}/{}", e.resource(), e.subresource())
        };
        let entry = per_kind.entry(kind).or_default();
        entry.0 += 1;
        entry.1 += usize::from(e.is_write() || e.is_dry_run());
    }

    // Steady state: no CR changes; every resync reconciles every CR.
    tokio::time::sleep(Duration::from_secs(resync + 2)).await;
    let mark = audit.mark();
    let cpu_before = cpu_seconds(pid);
    let reconciles_before = reconciles(&metrics_addr);
    tokio::time::sleep(steady).await;
    let steady_cpu = cpu_seconds(pid) - cpu_before;
    let steady_reconciles = (reconciles(&metrics_addr) - reconciles_before) as u64;
    let steady_events: Vec<_> =
        audit.since(mark).into_iter().filter(|e| e.user_agent.starts_with("model-orchestra-operator/")).collect();
    let steady_writes =
        steady_events.iter().filter(|e| e.is_write() && !matches!(e.resource(), "leases" | "events")).count();
    let rss_steady = proc_kib(pid, "VmRSS:");

    // Forgetting: delete every CR, let the garbage collector and the operator catch up.
    let deleted = Instant::now();
    futures::stream::iter(names.iter())
        .for_each_concurrent(16, |name| {
            let mo = mo.clone();
            async move {
                let _ = mo.delete(name, &Default::default()).await;
            }
        })
        .await;
    while !mo.list(&Default::default()).await.unwrap().items.is_empty() {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The garbage collector then deletes the children, which leave the operator's caches.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let few = kube::api::ListParams::default().limit(1);
    while !deployments.list_metadata(&few).await.unwrap().items.is_empty()
        || !pods.list_metadata(&few).await.unwrap().items.is_empty()
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let children_gone = deleted.elapsed();
    tokio::time::sleep(Duration::from_secs(resync + 5)).await;
    let rss_after_delete = proc_kib(pid, "VmRSS:");
    let peak = proc_kib(pid, "VmHWM:");

    // Under BENCH_WRAP the operator is the wrapper's child: stopped first, so that a
    // profiler sees it exit and writes its data.
    let _ = Command::new("pkill").args(["-TERM", "-P", &pid.to_string()]).status();
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
    cluster.stop();

    let mib = |kb: u64| kb as f64 / 1024.0;
    println!("operator benchmark: {crs} CRs x {apps} applications, real control plane (kube-apiserver 1.37, controller manager, scheduler, kwok)");
    println!("  CRs created in:           {:.2} s", created.as_secs_f64());
    println!("  every CR Ready:           {:.2} s", converged.as_secs_f64());
    println!(
        "  operator API requests:    {} ({:.1} per CR), from the audit log:",
        converge_events.len(),
        converge_events.len() as f64 / crs as f64
    );
    for (kind, (requests, writes)) in &per_kind {
        println!(
            "    {kind:<28} {requests:>7} requests ({:.2} per CR), {writes} writes or dry runs",
            *requests as f64 / crs as f64
        );
    }
    println!("  operator CPU to converge: {operator_cpu:.2} s; kube-apiserver CPU: {apiserver_cpu:.2} s");
    println!(
        "  operator RSS:             baseline {:.1} MiB, peak while converging {:.1} MiB",
        mib(baseline_rss),
        mib(peak_converge)
    );
    println!("  steady state {} s, resync {resync} s ({steady_reconciles} no-op reconciles):", steady.as_secs());
    println!(
        "    writes:                 {steady_writes}   (per no-op reconcile: {:.3}; target 0)",
        steady_writes as f64 / steady_reconciles.max(1) as f64
    );
    println!("    API requests:           {} (leases and reads)", steady_events.len());
    println!(
        "    operator CPU:           {steady_cpu:.2} s   ({:.2} ms per reconcile), RSS {:.1} MiB",
        steady_cpu * 1000.0 / steady_reconciles.max(1) as f64,
        mib(rss_steady)
    );
    println!(
        "  all CRs and their children deleted in {:.1} s; operator RSS after forgetting them: {:.1} MiB (baseline {:.1} MiB)",
        children_gone.as_secs_f64(),
        mib(rss_after_delete),
        mib(baseline_rss)
    );
    println!("  peak RSS overall:         {:.1} MiB (target <= 100 MiB)", mib(peak));
    let ours = Figures { converge: converged, requests: converge_events.len(), apiserver_cpu };
    if let Some(bare) = bare {
        compare(crs, apps, &bare, &ours);
    }
}

/// The operator beside the bare apply of the same objects (targets: ≤ 1.3× on each).
fn compare(crs: u64, apps: u64, bare: &Figures, ours: &Figures) {
    let per_cr = |f: &Figures| f.requests as f64 / crs as f64;
    println!("operator vs bare server-side apply of the same objects ({crs} CRs x {apps} applications, fresh control plane each):");
    println!("  {:<28} {:>10} {:>10} {:>8}", "", "bare", "operator", "ratio");
    let row = |what: &str, b: f64, o: f64, unit: &str| {
        println!("  {what:<28} {:>8.2}{unit} {:>8.2}{unit} {:>7.2}x", b, o, o / b.max(f64::EPSILON));
    };
    row("converge", bare.converge.as_secs_f64(), ours.converge.as_secs_f64(), " s");
    row("API requests per CR", per_cr(bare), per_cr(ours), "  ");
    row("kube-apiserver CPU", bare.apiserver_cpu, ours.apiserver_cpu, " s");
}
