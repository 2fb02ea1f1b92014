//! `make bench-gateway`: the model gateway on the local cluster's real node, with Ollama
//! and SmolLM2 135M.
//!
//! - **Wake-up cost**: a request through the gateway for an application asleep (scaled to
//!   zero) to its first token, with the models volume kept across sleep (a claim: the model
//!   is on disk when the replica starts) and with the chart's default (an `emptyDir`: the
//!   woken replica pulls the model again); beside the **floor** measured in the same run:
//!   Ollama as plain processes in the cluster's network namespace — `ollama serve` over a
//!   models directory that holds the model, to the first token.
//! - **Overhead** on a warm application: the latency of `POST /api/show` (answered by the
//!   engine at once) through the gateway's Service minus straight to the application's
//!   Service, p50 and p99 at 1 and 32 concurrent clients (`BENCH_GATEWAY_REQUESTS` each).
//!   Both go through the same forwarder from the host into the cluster's namespace.
//! - The gateway's **memory**: its process's RSS idle and its peak after the load.
//!
//! The operator runs as the release binary, out of the cluster.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject};
use local_cluster::forward::Forwarder;
use local_cluster::ollama::SMOLLM2;
use local_cluster::Cluster;
use serde_json::{json, Value};

#[path = "support/process.rs"]
mod process;
use process::{apply, env_num, proc_kib};
#[path = "support/ollama.rs"]
mod ollama;
use ollama::{exchange, has_token, ollama_cr, operator_process, tempfile_dir, KillOnDrop, PROMPT};

type Client = hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

fn main() {
    process::main("gateway", bench());
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn s(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

async fn bench() {
    let (cluster, client, gateway_image) = ollama::cluster_with(&[SMOLLM2]).await;

    let floor_before = floor(&cluster);
    let kept = wake_up(&cluster, &client, &gateway_image, "bench-gateway-claim", true).await;
    let pulled = wake_up(&cluster, &client, &gateway_image, "bench-gateway-emptydir", false).await;
    let floor_after = floor(&cluster);
    let overhead = overhead(&cluster, &client, &gateway_image, "bench-gateway-warm").await;

    let floor = floor_before.min(floor_after);
    println!("\nfloor (plain processes: ollama serve, the model on disk, first token):");
    println!("  before {}s, after {}s", s(floor_before), s(floor_after));
    for (label, w) in [("models on a claim (kept asleep)", &kept), ("models in an emptyDir (pulled again)", &pulled)] {
        println!("\nwake-up, {label}: a request at zero replicas to its first token through the gateway");
        for (phase, at) in &w.phases {
            match at {
                Some(at) => println!("  {phase:<48} {:>6}s", s(*at)),
                None => println!("  {phase:<48}  not seen"),
            }
        }
        println!("  first token {}s = the floor + {}s", s(w.first_token), s(w.first_token.saturating_sub(floor)));
    }
    println!("\ngateway overhead on a warm application (POST /api/show; latency through the gateway minus straight):");
    for o in &overhead.rows {
        println!(
            "  {:>2} clients: straight p50 {} ms p99 {} ms; through the gateway p50 {} ms p99 {} ms; added p50 {} ms p99 {} ms",
            o.clients,
            ms(o.direct.0),
            ms(o.direct.1),
            ms(o.gateway.0),
            ms(o.gateway.1),
            ms(o.gateway.0.saturating_sub(o.direct.0)),
            ms(o.gateway.1.saturating_sub(o.direct.1)),
        );
    }
    println!(
        "  gateway memory: RSS idle {} MiB, peak after the load {} MiB",
        overhead.rss_idle_kib / 1024,
        overhead.rss_peak_kib / 1024
    );
}

/// `ollama serve` over a models directory that already holds SmolLM2, to its first token.
fn floor(cluster: &Cluster) -> Duration {
    let ollama = local_cluster::tools::program("ollama").unwrap();
    let dir = tempfile_dir();
    let registry = &cluster.models_registry.as_ref().unwrap().on_node;
    let name = format!("{registry}/library/{}", SMOLLM2.name);
    let serve = |dir: &std::path::Path| {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = cluster
            .isolation()
            .command(&ollama)
            .arg("serve")
            .env("OLLAMA_HOST", format!("127.0.0.1:{port}"))
            .env("OLLAMA_MODELS", dir.join("models"))
            .env("HOME", dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        while cluster.isolation().connect(addr).is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
        (KillOnDrop(child), port)
    };
    // The model pulled once, by a first server.
    {
        let (_server, port) = serve(&dir);
        let mut ok = false;
        exchange(cluster, port, "POST", "/api/pull", &json!({"model": name, "insecure": true}), |b| {
            ok = String::from_utf8_lossy(b).contains("\"status\":\"success\"");
            !ok
        });
        assert!(ok, "the floor's pull did not succeed");
    }
    let start = Instant::now();
    let (server, port) = serve(&dir);
    let mut first_token = None;
    let ask = json!({"model": name, "prompt": PROMPT, "raw": true, "stream": true,
        "options": {"temperature": 0, "num_predict": 8}});
    exchange(cluster, port, "POST", "/api/generate", &ask, |b| {
        if first_token.is_none() && has_token(b) {
            first_token = Some(start.elapsed());
        }
        first_token.is_none()
    });
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    first_token.expect("a first token")
}

struct Wake {
    phases: Vec<(&'static str, Option<Duration>)>,
    first_token: Duration,
}

/// A forwarder from the host to `service`'s cluster address (port `port`).
async fn forward(cluster: &Cluster, client: &kube::Client, namespace: &str, service: &str, port: u16) -> Forwarder {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let start = Instant::now();
    let ip = loop {
        if let Some(ip) = services.get(service).await.ok().and_then(|s| s.spec?.cluster_ip) {
            break ip;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no Service {service}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let target: SocketAddr = format!("{ip}:{port}").parse().unwrap();
    Forwarder::start("127.0.0.1:0".parse().unwrap(), target, cluster.isolation().clone()).unwrap()
}

fn http() -> Client {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

async fn post(client: &Client, at: SocketAddr, path: &str, body: &Value) -> Option<(u16, Bytes)> {
    let req = http::Request::post(format!("http://{at}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = client.request(req).await.ok()?;
    let code = response.status().as_u16();
    Some((code, response.into_body().collect().await.ok()?.to_bytes()))
}

/// An application that sleeps after 3 s idle; the time from a request at zero replicas to
/// its first token through the gateway.
async fn wake_up(cluster: &Cluster, client: &kube::Client, image: &str, namespace: &str, claim: bool) -> Wake {
    cluster.run_pods_for_real(namespace).await.unwrap();
    let _operator = KillOnDrop(operator_process(cluster, namespace, image));
    let mut cr = ollama_cr(namespace, SMOLLM2.name, None);
    cr["spec"]["applications"]["chat"]["sleep"] = json!({"enabled": true, "idleSeconds": 3, "holdSeconds": 300});
    if claim {
        let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "models", "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        apply(client, &pvc).await;
        cr["spec"]["applications"]["chat"]["modelsVolume"] =
            json!({"name": "models", "persistentVolumeClaim": {"claimName": "models"}});
    }
    apply(client, &cr).await;
    let mos: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &model_orchestra_api::ApiVersion::V1alpha2.resource());
    let status = || async { mos.get("bench").await.ok().map(|cr| cr.data["status"].clone()) };
    // Up once (the model pulled into the claim), then asleep.
    let start = Instant::now();
    loop {
        let st = status().await.unwrap_or_default();
        let models_seen = st["applications"]["chat"]["models"][0]["phase"] == "Ready";
        if models_seen && st["asleep"] == "chat" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "not asleep after 5 minutes: {st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let gateway = forward(cluster, client, namespace, "bench-model-orchestra-gateway", 80).await;
    let body = json!({"model": SMOLLM2.name, "prompt": PROMPT, "raw": true, "stream": true,
        "options": {"temperature": 0, "num_predict": 8}});
    let start = Instant::now();
    let asked = tokio::spawn({
        let at = gateway.listen;
        async move {
            let req = http::Request::post(format!("http://{at}/api/generate"))
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap();
            let response = http().request(req).await.unwrap();
            assert_eq!(response.status(), 200);
            let mut body = response.into_body();
            let mut got = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    got.extend_from_slice(&data);
                    if has_token(&got) {
                        return start.elapsed();
                    }
                }
            }
            panic!("no token: {}", String::from_utf8_lossy(&got));
        }
    });
    let names = ["status Waking", "pod Ready (model present, in the Service)", "status Awake"];
    let mut seen: Vec<Option<Duration>> = vec![None; names.len()];
    while !asked.is_finished() {
        let st = status().await.unwrap_or_default();
        let sleep = st["applications"]["chat"]["sleep"].as_str().unwrap_or_default().to_string();
        let now = start.elapsed();
        if sleep == "Waking" && seen[0].is_none() {
            seen[0] = Some(now);
        }
        if st["applications"]["chat"]["readyReplicas"].as_i64() == Some(1) && seen[1].is_none() {
            seen[1] = Some(now);
        }
        if sleep == "Awake" && seen[2].is_none() {
            seen[2] = Some(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first_token = asked.await.unwrap();
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = ns.delete(namespace, &Default::default()).await;
    Wake { phases: names.into_iter().zip(seen).collect(), first_token }
}

struct Row {
    clients: usize,
    /// (p50, p99) straight to the application's Service.
    direct: (Duration, Duration),
    /// (p50, p99) through the gateway.
    gateway: (Duration, Duration),
}

struct Overhead {
    rows: Vec<Row>,
    rss_idle_kib: u64,
    rss_peak_kib: u64,
}

/// The gateway process of the namespace's CR (its command line names both).
fn gateway_pid(namespace: &str) -> Option<u32> {
    let wanted = format!("--namespace={namespace}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_gateway = args.iter().any(|a| *a == b"gateway") && args.contains(&wanted.as_bytes());
        is_gateway.then_some(pid)
    })
}

/// Latencies of `requests` `POST /api/show` from `clients` concurrent clients; (p50, p99).
async fn latencies(at: SocketAddr, clients: usize, requests: usize) -> (Duration, Duration) {
    let body = json!({"model": SMOLLM2.name});
    let per_client = requests / clients;
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move {
                let client = http();
                let mut times = Vec::with_capacity(per_client);
                for _ in 0..per_client {
                    let start = Instant::now();
                    let (code, _) = post(&client, at, "/api/show", &body).await.expect("an answer");
                    assert_eq!(code, 200);
                    times.push(start.elapsed());
                }
                times
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    (at(0.50), at(0.99))
}

async fn overhead(cluster: &Cluster, client: &kube::Client, image: &str, namespace: &str) -> Overhead {
    cluster.run_pods_for_real(namespace).await.unwrap();
    let _operator = KillOnDrop(operator_process(cluster, namespace, image));
    apply(client, &ollama_cr(namespace, SMOLLM2.name, None)).await;
    let mos: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &model_orchestra_api::ApiVersion::V1alpha2.resource());
    let start = Instant::now();
    loop {
        let ready = mos.get("bench").await.ok().is_some_and(|cr| {
            let conditions = cr.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
            conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        if ready {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "not Ready after 5 minutes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let gateway = forward(cluster, client, namespace, "bench-model-orchestra-gateway", 80).await;
    let direct = forward(cluster, client, namespace, "bench-model-orchestra-chat", 11434).await;
    let pid = gateway_pid(namespace).expect("the gateway's process");
    let rss_idle_kib = proc_kib(pid, "VmRSS:");
    let requests = env_num("BENCH_GATEWAY_REQUESTS", 2000) as usize;
    // Warm both paths (connections, the engine's model metadata).
    latencies(direct.listen, 4, 200).await;
    latencies(gateway.listen, 4, 200).await;
    let mut rows = Vec::new();
    for clients in [1, 32] {
        let direct = latencies(direct.listen, clients, requests).await;
        let through = latencies(gateway.listen, clients, requests).await;
        rows.push(Row { clients, direct, gateway: through });
    }
    let rss_peak_kib = proc_kib(pid, "VmHWM:");
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = ns.delete(namespace, &Default::default()).await;
    Overhead { rows, rss_idle_kib, rss_peak_kib }
}
