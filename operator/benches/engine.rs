//! `make bench-engine`: the time from `kubectl apply` of a CR with one Ollama application
//! and one model (SmolLM2 135M) to the model's first answered token through its Service,
//! on the local cluster's real node, broken down by phase; beside it the **floor**: the same
//! Ollama binary and model as plain processes in the cluster's network namespace (serve,
//! pull from the same models registry, first token), measured before and after.
//!
//! Phases are seen by polling the API every 50 ms (the pod, its Events, the CR's status):
//! each figure is ±50 ms. The operator runs as the release binary, out of the cluster (it
//! reaches the replica through the API server's pod proxy, as `make run` does).
//! BENCH_ENGINE_RUNS repeats the operator path (a fresh namespace each time).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use local_cluster::ollama::{GEMMA3, SMOLLM2};
use local_cluster::Cluster;
use serde_json::json;

#[path = "support/process.rs"]
mod process;
use process::{apply, env_num, proc_kib};
#[path = "support/ollama.rs"]
mod ollama;
use ollama::{exchange, has_token, load_of, ollama_cr, operator_process, tempfile_dir, KillOnDrop, PROMPT};

fn main() {
    process::main("engine", bench());
}

/// Seconds, to 2 decimals.
fn s(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

async fn bench() {
    let (cluster, client, gateway_image) = ollama::cluster_with(&[SMOLLM2, GEMMA3]).await;

    let floor_before = floor(&cluster);
    let mut runs = Vec::new();
    for run in 0..env_num("BENCH_ENGINE_RUNS", 1) {
        runs.push(operator_path(&cluster, &client, &format!("bench-engine-{run}"), &gateway_image).await);
    }
    let floor_after = floor(&cluster);
    let promoted = promotion(&cluster, &client, "bench-engine-promotion", &gateway_image).await;

    println!("\nfloor (plain processes: ollama serve, pull from the models registry, first token):");
    for (label, f) in [("before", &floor_before), ("after", &floor_after)] {
        println!(
            "  {label}: serving {}s, pulled {}s, first token {}s (load {}s): total {}s",
            s(f.serving),
            s(f.pulled - f.serving),
            s(f.first_token - f.pulled),
            s(f.load),
            s(f.first_token)
        );
    }
    let floor_total = floor_before.first_token.min(floor_after.first_token);
    for (i, r) in runs.iter().enumerate() {
        println!("\noperator path, run {i} (from kubectl apply; each phase's end, and its length):");
        let mut last = Duration::ZERO;
        for (phase, at) in &r.phases {
            match at {
                Some(at) => {
                    println!("  {phase:<44} {:>7}s  (+{}s)", s(*at), s(at.saturating_sub(last)));
                    last = *at;
                }
                None => println!("  {phase:<44}  not seen"),
            }
        }
        println!("  model load (Ollama's load_duration)           {}s", s(r.load));
        println!(
            "  total {}s = {:.2}x the floor ({}s); the operator's own gaps: {}s",
            s(r.total),
            r.total.as_secs_f64() / floor_total.as_secs_f64(),
            s(floor_total),
            s(r.operator_gaps)
        );
        println!("  the operator's peak RSS: {} MiB", r.operator_peak_kib / 1024);
    }
    println!("\nverified promotion, smollm2:135m → gemma3:270m (from the apply of the change):");
    for (phase, at) in &promoted {
        println!("  {phase:<52} {}s", s(*at));
    }
}

/// The floor's moments, from the start of `ollama serve`.
struct Floor {
    serving: Duration,
    pulled: Duration,
    first_token: Duration,
    load: Duration,
}

fn floor(cluster: &Cluster) -> Floor {
    let ollama = local_cluster::tools::program("ollama").unwrap();
    let dir = tempfile_dir();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let start = Instant::now();
    let mut serve = cluster
        .isolation()
        .command(&ollama)
        .arg("serve")
        .env("OLLAMA_HOST", format!("127.0.0.1:{port}"))
        .env("OLLAMA_MODELS", dir.join("models"))
        .env("HOME", &dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while cluster.isolation().connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).is_err() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let serving = start.elapsed();
    let registry = &cluster.models_registry.as_ref().unwrap().on_node;
    let name = format!("{registry}/library/{}", SMOLLM2.name);
    let mut ok = false;
    exchange(cluster, port, "POST", "/api/pull", &json!({"model": name, "insecure": true}), |b| {
        ok = String::from_utf8_lossy(b).contains("\"status\":\"success\"");
        !ok
    });
    assert!(ok, "the floor's pull did not succeed");
    let pulled = start.elapsed();
    let mut first_token = None;
    let mut load = Duration::ZERO;
    let ask = json!({"model": name, "prompt": PROMPT, "raw": true, "stream": true,
        "options": {"temperature": 0, "num_predict": 8}});
    exchange(cluster, port, "POST", "/api/generate", &ask, |b| {
        if first_token.is_none() && has_token(b) {
            first_token = Some(start.elapsed());
        }
        load = load_of(b);
        true
    });
    let _ = serve.kill();
    let _ = serve.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Floor { serving, pulled, first_token: first_token.expect("a first token"), load }
}

struct Run {
    phases: Vec<(&'static str, Option<Duration>)>,
    load: Duration,
    total: Duration,
    /// Between a phase the operator waits for and its next step: the apply to the
    /// Deployment, the container started to the pull started, the model present to the
    /// replica Ready.
    operator_gaps: Duration,
    /// The operator's peak RSS (KiB).
    operator_peak_kib: u64,
}

/// A change of an Ollama application's model under verified promotion, from the apply:
/// the candidate Ready (its model pulled), `Promoted` (the candidate's real answer
/// matched), the new model's first token through the application's Service.
async fn promotion(
    cluster: &Cluster,
    client: &kube::Client,
    namespace: &str,
    gateway_image: &str,
) -> Vec<(&'static str, Duration)> {
    cluster.run_pods_for_real(namespace).await.unwrap();
    let operator = KillOnDrop(operator_process(cluster, namespace, gateway_image));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cr = |model: &str, expect: &str| {
        let promotion = json!({"enabled": true, "prompt": PROMPT, "expect": expect,
            "successThreshold": 1, "failureThreshold": 2, "periodSeconds": 1});
        ollama_cr(namespace, model, Some(promotion))
    };
    let mos: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &model_orchestra_api::ApiVersion::V1alpha2.resource());
    let phase = || async {
        let cr = mos.get("bench").await.ok()?;
        let current = cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation;
        current.then(|| cr.data["status"]["applications"]["chat"]["promotion"]["phase"].as_str().map(str::to_string))?
    };
    apply(client, &cr(SMOLLM2.name, r"\s*Paris")).await;
    let started = Instant::now();
    while phase().await.as_deref() != Some("Promoted") {
        assert!(started.elapsed() < Duration::from_secs(300), "the first revision was not promoted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start = Instant::now();
    apply(client, &cr(GEMMA3.name, r"\s*the capital")).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let (mut candidate_ready, mut promoted) = (None, None);
    loop {
        assert!(start.elapsed() < Duration::from_secs(300), "not promoted after 5 minutes");
        let candidates = pods
            .list(&ListParams::default().labels("app.kubernetes.io/component=candidate-chat"))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        // The new revision's candidate (the first revision's may not be gone yet).
        let ready = candidates.iter().any(|p| {
            let models = p.metadata.annotations.as_ref().and_then(|a| a.get("models.titanml.co/models"));
            if models.map(String::as_str) != Some(GEMMA3.name) {
                return false;
            }
            let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
            conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if ready && candidate_ready.is_none() {
            candidate_ready = Some(start.elapsed());
        }
        if promoted.is_none() && phase().await.as_deref() == Some("Promoted") {
            promoted = Some(start.elapsed());
        }
        if promoted.is_some() {
            if let Some((token, _)) =
                first_token_of(client, namespace, "bench-model-orchestra-chat", GEMMA3.name, start).await
            {
                drop(operator);
                return vec![
                    ("candidate Ready (its model pulled)", candidate_ready.unwrap_or_default()),
                    ("Promoted (the candidate's answer matched)", promoted.unwrap_or_default()),
                    ("the new model's first token through the Service (the application rolled)", token),
                ];
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn operator_path(cluster: &Cluster, client: &kube::Client, namespace: &str, gateway_image: &str) -> Run {
    cluster.run_pods_for_real(namespace).await.unwrap();
    let operator = KillOnDrop(operator_process(cluster, namespace, gateway_image));
    // Let it take its Lease and start its watches: the clock starts at the apply.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cr = ollama_cr(namespace, SMOLLM2.name, None);
    let start = Instant::now();
    apply(client, &cr).await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mos: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &model_orchestra_api::ApiVersion::V1alpha2.resource());
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), namespace);
    let names = [
        "the operator created the Deployment",
        "pod created",
        "pod scheduled",
        "image pulled (kubelet Event Pulled)",
        "container started (kubelet Event Started)",
        "Ollama listening (pod's container ready)",
        "model pull started (status Pulling)",
        "model pulled (models-ready condition True)",
        "pod Ready (in the Service)",
        "first token through the Service",
    ];
    let mut seen: Vec<Option<Duration>> = vec![None; names.len()];
    let mut load = Duration::ZERO;
    let service = "bench-model-orchestra-chat";
    while seen[9].is_none() {
        assert!(start.elapsed() < Duration::from_secs(300), "no first answer after 5 minutes: {seen:?}");
        let now = start.elapsed();
        let mark = |i: usize, yes: bool, seen: &mut Vec<Option<Duration>>| {
            if yes && seen[i].is_none() {
                seen[i] = Some(now);
            }
        };
        let deployment = deployments.list(&ListParams::default()).await.map(|l| !l.items.is_empty()).unwrap_or(false);
        mark(0, deployment, &mut seen);
        let pod = pods.list(&ListParams::default()).await.ok().and_then(|l| l.items.into_iter().next());
        if let Some(pod) = &pod {
            let status = pod.status.clone().unwrap_or_default();
            let cond = |t: &str| status.conditions.iter().flatten().any(|c| c.type_ == t && c.status == "True");
            mark(1, true, &mut seen);
            mark(2, cond("PodScheduled"), &mut seen);
            mark(5, cond("ContainersReady"), &mut seen);
            mark(7, cond("models.titanml.co/models-ready"), &mut seen);
            mark(8, cond("Ready"), &mut seen);
        }
        if seen[3].is_none() || seen[4].is_none() {
            let reasons: Vec<String> = events
                .list(&ListParams::default())
                .await
                .map(|l| l.items.into_iter().filter_map(|e| e.reason).collect())
                .unwrap_or_default();
            mark(3, reasons.iter().any(|r| r == "Pulled"), &mut seen);
            mark(4, reasons.iter().any(|r| r == "Started"), &mut seen);
        }
        if seen[6].is_none() {
            let pulling = mos.get("bench").await.ok().is_some_and(|cr| {
                let models = &cr.data["status"]["applications"]["chat"]["models"];
                models.as_array().into_iter().flatten().any(|m| m["phase"] == "Pulling" || m["phase"] == "Ready")
            });
            mark(6, pulling, &mut seen);
        }
        if seen[8].is_some() {
            if let Some((token, l)) = first_token_of(client, namespace, service, SMOLLM2.name, start).await {
                seen[9] = Some(token);
                load = l;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let total = seen[9].unwrap();
    let gap = |from: usize, to: usize| match (seen[from], seen[to]) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => Duration::ZERO,
    };
    // The apply to the Deployment; Ollama listening to the pull started; the model pulled
    // to the pod Ready (the condition set, then the kubelet's Ready: both the operator's).
    let operator_gaps = seen[0].unwrap_or_default() + gap(5, 6) + gap(7, 8);
    let operator_peak_kib = proc_kib(operator.0.id(), "VmHWM:");
    drop(operator);
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = ns.delete(namespace, &Default::default()).await;
    Run { phases: names.into_iter().zip(seen).collect(), load, total, operator_gaps, operator_peak_kib }
}

/// The first token of `model`'s streamed `/api/generate` through the API server's service
/// proxy, from `start`; and Ollama's load duration.
async fn first_token_of(
    client: &kube::Client,
    namespace: &str,
    service: &str,
    model: &str,
    start: Instant,
) -> Option<(Duration, Duration)> {
    let uri = format!("/api/v1/namespaces/{namespace}/services/{service}:http/proxy/api/generate");
    let body = json!({"model": model, "prompt": PROMPT, "raw": true, "stream": true,
        "options": {"temperature": 0, "num_predict": 8}});
    let request = http::Request::post(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let response = client.send(request).await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut stream = http_body_util::BodyDataStream::new(response.into_body());
    let mut got = Vec::new();
    let mut token = None;
    while let Some(Ok(chunk)) = stream.next().await {
        got.extend_from_slice(&chunk);
        if token.is_none() && has_token(&got) {
            token = Some(start.elapsed());
        }
    }
    Some((token?, load_of(&got)))
}
