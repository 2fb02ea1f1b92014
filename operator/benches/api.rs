//! `make bench-api`: the HTTP API under load on the local control plane. 100 CRs, 10 keys,
//! 50 concurrent clients (keep-alive HTTPS, 5 per key) alternating a GET of one CR and a
//! list of all 100 for 30 s, through the release `serve-api` process. Reports authorized
//! requests per second, latency percentiles and the server's RSS.
//! BENCH_API_CRS, BENCH_API_CLIENTS, BENCH_API_KEYS, BENCH_API_SECONDS change the shape;
//! BENCH_API_READ_CACHE_SECONDS=0 sends every read to the API server.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::api::{Api, DynamicObject};
use local_cluster::{Cluster, Options};
use serde_json::{json, Value};

#[path = "support/process.rs"]
mod process;
use process::{apply, env_num, proc_kib};

const NAMESPACE: &str = "bench-api";
const API_NAMESPACE: &str = "model-orchestra-system";

fn main() {
    process::main("api", bench());
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(address: &str, connector: &tokio_rustls::TlsConnector) -> Sender {
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap().to_owned();
    let tls = connector.connect(name, tcp).await.unwrap();
    let (sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.unwrap();
    tokio::spawn(connection);
    sender
}

async fn bench() {
    let crs = env_num("BENCH_API_CRS", 100);
    let clients = env_num("BENCH_API_CLIENTS", 50);
    let key_count = env_num("BENCH_API_KEYS", 10);
    let seconds = env_num("BENCH_API_SECONDS", 30);

    let cluster = Cluster::start(Options::fake_nodes_only()).await.expect("local cluster");
    let client = cluster.client().await.unwrap();
    apply(&client, &serde_json::to_value(model_orchestra_api::crd::crd()).unwrap()).await;
    for ns in [NAMESPACE, API_NAMESPACE] {
        apply(&client, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await;
    }
    let options = model_orchestra_api::deploy::operator::DeployOptions {
        namespace: API_NAMESPACE.into(),
        image: "unused".into(),
        routing: "v0".into(),
        claim_unlabeled: true,
        api_version: None,
        release: None,
    };
    for object in model_orchestra_api::deploy::httpapi::all(&options) {
        if !["Deployment", "Service"].contains(&object["kind"].as_str().unwrap()) {
            apply(&client, &object).await;
        }
    }
    let mo: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &model_orchestra_api::ApiVersion::V1alpha1.resource());
    while mo.list(&Default::default()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..crs {
        let cr = json!({
            "apiVersion": "models.titanml.co/v1alpha1", "kind": "ModelOrchestra",
            "metadata": {"name": format!("mo-{i}"), "namespace": NAMESPACE},
            "spec": {"applications": {"chat": {"readerConfig": {"modelName": "org/chat", "device": "cpu"}}}}
        });
        apply(&client, &cr).await;
    }
    let binary = env!("CARGO_BIN_EXE_model-orchestra-operator");
    let mut keys = vec![];
    for k in 0..key_count {
        let out = Command::new(binary)
            .args([
                "api-key",
                "create",
                "--name",
                &format!("bench-{k}"),
                "--namespace",
                NAMESPACE,
                "--api-namespace",
                API_NAMESPACE,
            ])
            .env("KUBECONFIG", &cluster.kubeconfig)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        keys.push(String::from_utf8(out.stdout).unwrap().trim().to_string());
    }
    let dir = std::env::temp_dir().join(format!("mo-bench-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("api.kubeconfig");
    cluster
        .service_account_kubeconfig(API_NAMESPACE, model_orchestra_api::deploy::httpapi::NAME, &kubeconfig, None)
        .await
        .unwrap();
    let pki = local_cluster::pki::Pki::create(&dir.join("pki")).unwrap();
    pki.serving("api").unwrap();
    let mut server = Command::new(binary)
        .args(["serve-api", "--listen", "127.0.0.1:0", "--keys-namespace", API_NAMESPACE, "--log-format", "json"])
        .args(["--rate-limit", "100000", "--rate-burst", "100000"])
        .args(["--read-cache-seconds", &std::env::var("BENCH_API_READ_CACHE_SECONDS").unwrap_or_else(|_| "1".into())])
        .arg("--tls-cert")
        .arg(pki.path("api.crt"))
        .arg("--tls-key")
        .arg(pki.path("api.key"))
        .env("KUBECONFIG", &kubeconfig)
        // The request log is measured too, written to a pipe that is drained.
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = server.id();
    let stderr = server.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v["message"] == "listening" {
                    let _ = tx.send(v["address"].as_str().unwrap().to_string());
                }
            }
        }
    });
    let address = rx.recv_timeout(Duration::from_secs(60)).expect("serve-api listening");
    let rss_idle = proc_kib(pid, "VmRSS:");

    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(pki.path("ca.crt")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let connector = tokio_rustls::TlsConnector::from(Arc::new(
        rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth(),
    ));
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut tasks = vec![];
    for c in 0..clients {
        let key = keys[(c % key_count) as usize].clone();
        let address = address.clone();
        let connector = connector.clone();
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&address, &connector).await;
            let mut latencies = vec![];
            let mut failed = 0u64;
            let mut i = c;
            while Instant::now() < end {
                i += 1;
                let path = if i % 2 == 0 {
                    format!("/api/v1/namespaces/{NAMESPACE}/modelorchestras/mo-{}", i % crs)
                } else {
                    format!("/api/v1/namespaces/{NAMESPACE}/modelorchestras")
                };
                let request = http::Request::get(path)
                    .header("host", "127.0.0.1")
                    .header("authorization", format!("Bearer {key}"))
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                let t = Instant::now();
                let response = sender.send_request(request).await.unwrap();
                let ok = response.status() == 200;
                response.into_body().collect().await.unwrap();
                if ok {
                    latencies.push(t.elapsed());
                } else {
                    failed += 1;
                }
            }
            (latencies, failed)
        }));
    }
    let mut latencies = vec![];
    let mut failed = 0;
    let mut rss_peak_during = 0;
    for t in tasks {
        let (l, f) = t.await.unwrap();
        latencies.extend(l);
        failed += f;
        rss_peak_during = rss_peak_during.max(proc_kib(pid, "VmRSS:"));
    }
    let elapsed = start.elapsed().as_secs_f64();
    latencies.sort();
    let pct =
        |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)].as_secs_f64() * 1000.0;
    let cpu: f64 = {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
            + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        ticks / 100.0
    };
    println!("bench-api: {crs} CRs, {key_count} keys, {clients} clients, GET one / list all alternating, {seconds} s");
    println!(
        "  authorized requests: {} ({:.0}/s), refused or failed: {failed}",
        latencies.len(),
        latencies.len() as f64 / elapsed
    );
    println!("  latency ms: p50 {:.1}, p90 {:.1}, p99 {:.1}, max {:.1}", pct(0.50), pct(0.90), pct(0.99), pct(1.0));
    println!(
        "  serve-api RSS: {:.1} MiB at start, {:.1} MiB peak (VmHWM), CPU {cpu:.1} s",
        rss_idle as f64 / 1024.0,
        proc_kib(pid, "VmHWM:").max(rss_peak_during) as f64 / 1024.0
    );
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
