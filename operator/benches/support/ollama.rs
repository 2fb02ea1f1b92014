//! What the benchmarks of Ollama applications share: a CR, the operator as a process, a
//! blocking HTTP exchange inside the cluster's network namespace, the figures of a streamed
//! answer.

// Each benchmark that includes this module uses part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use local_cluster::ollama::TestModel;
use local_cluster::{Cluster, Options};
use serde_json::{json, Value};

pub const PROMPT: &str = "The capital of France is";

/// The local cluster, ready for a benchmark of Ollama applications: the Ollama image and
/// `models` in its registries, the operator's image pushed (the model gateway's; its
/// reference returned) and the CRD installed.
pub async fn cluster_with(models: &[TestModel]) -> (Cluster, kube::Client, String) {
    cluster_of(Options::default(), models).await
}

/// [`cluster_with`] for a cluster of `options` (more real nodes, a shorter node failure time).
pub async fn cluster_of(options: Options, models: &[TestModel]) -> (Cluster, kube::Client, String) {
    let cluster = Cluster::start(options).await.expect("local cluster with real nodes");
    cluster.push_ollama_image().await.expect("the Ollama image");
    cluster.push_models(models).await.expect("the models");
    let gateway_image = cluster.push_operator_image("bench").await.expect("the operator image (make static)");
    let client = cluster.client().await.unwrap();
    super::process::apply(&client, &serde_json::to_value(model_orchestra_api::crd::crd()).unwrap()).await;
    (cluster, client, gateway_image)
}

/// One blocking HTTP/1.1 exchange with a server in the cluster's namespace; calls `each`
/// with the bytes received so far until it says stop or the server closes.
pub fn exchange(
    cluster: &Cluster,
    port: u16,
    method: &str,
    path: &str,
    body: &Value,
    mut each: impl FnMut(&[u8]) -> bool,
) {
    let mut stream = cluster.isolation().connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).expect("connect");
    let body = body.to_string();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let n = stream.read(&mut buf).unwrap_or(0);
        if n == 0 {
            return;
        }
        got.extend_from_slice(&buf[..n]);
        if !each(&got) {
            return;
        }
    }
}

/// Whether a streamed answer holds a non-empty token yet.
pub fn has_token(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.split("\"response\":\"").skip(1).any(|rest| !rest.starts_with('"'))
}

/// Ollama's `load_duration` (ns) in the answer's last line.
pub fn load_of(bytes: &[u8]) -> Duration {
    let text = String::from_utf8_lossy(bytes);
    let ns = text
        .split("\"load_duration\":")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u64>().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

pub fn tempfile_dir() -> std::path::PathBuf {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("bench-engine-floor-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The CR `bench`: one Ollama application `chat` serving `model` from the models registry.
pub fn ollama_cr(namespace: &str, model: &str, promotion: Option<Value>) -> Value {
    let mut cr = json!({
        "apiVersion": "models.titanml.co/v1alpha2", "kind": "ModelOrchestra",
        "metadata": {"name": "bench", "namespace": namespace},
        "spec": {"applications": {"chat": {
            "engine": {"ollama": {
                "models": [{"name": model}],
                "registry": {"host": local_cluster::registry::models_address(), "insecure": true},
            }},
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        }}},
    });
    if let Some(p) = promotion {
        cr["spec"]["applications"]["chat"]["promotion"] = p;
    }
    cr
}

pub fn operator_process(cluster: &Cluster, namespace: &str, gateway_image: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"))
        .args(["run", "--api-version", "v1alpha2", "--claim-unlabeled", "--watch-namespace", namespace])
        .args(["--lease-namespace", namespace, "--metrics-addr", "127.0.0.1:0"])
        .args(["--model-gateway-image", gateway_image])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
