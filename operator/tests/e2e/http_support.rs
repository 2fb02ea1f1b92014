//! The HTTP API on the real control plane: the API's own RBAC as `manifests --http-api`
//! installs it, keys made by the real `api-key create`, the real `serve-api` process under
//! its ServiceAccount's token with TLS on 127.0.0.1, and a small HTTPS client (hyper over
//! rustls, trusting only the test's CA).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::api::DynamicObject;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};

use crate::support::{Cluster, OPERATOR_NAMESPACE};

pub const OPERATOR: &str = env!("CARGO_BIN_EXE_model-orchestra-operator");

/// The API's Role, binding, access ClusterRoles and ServiceAccount (not its Deployment or
/// Service: the tests run the binary), once per test binary.
pub async fn install_api_rbac(cluster: &Cluster) {
    static DONE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    if DONE.initialized() {
        return;
    }
    let options = crate::support::deploy_options("v0");
    cluster
        .apply_value(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}),
            "namespaces",
            "",
            "v1",
        )
        .await;
    for object in model_orchestra_api::deploy::httpapi::all(&options) {
        let (plural, group, version) = match object["kind"].as_str().unwrap() {
            "ServiceAccount" => ("serviceaccounts", "", "v1"),
            "Role" => ("roles", "rbac.authorization.k8s.io", "v1"),
            "RoleBinding" => ("rolebindings", "rbac.authorization.k8s.io", "v1"),
            "ClusterRole" => ("clusterroles", "rbac.authorization.k8s.io", "v1"),
            _ => continue,
        };
        cluster.apply_value(&object, plural, group, version).await;
    }
    let _ = DONE.set(());
}

/// A second namespace for the test (a team the key has no rights in).
pub async fn other_namespace(cluster: &Cluster) -> String {
    let name = format!("{}-b", cluster.namespace.chars().take(55).collect::<String>());
    cluster
        .apply_value(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            "namespaces",
            "",
            "v1",
        )
        .await;
    name
}

/// Runs `model-orchestra-operator api-key …` as the admin; stdout, or panics with stderr.
pub fn api_key(cluster: &Cluster, args: &[&str]) -> String {
    let out = Command::new(OPERATOR)
        .arg("api-key")
        .args(args)
        .args(["--api-namespace", OPERATOR_NAMESPACE])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .output()
        .expect("run api-key");
    assert!(out.status.success(), "api-key {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A key named `name` for `namespaces`, made by `api-key create`.
pub fn create_key(cluster: &Cluster, name: &str, namespaces: &[&str], access: &str) -> String {
    let mut args = vec!["create", "--name", name, "--access", access];
    for ns in namespaces {
        args.extend(["--namespace", ns]);
    }
    api_key(cluster, &args).trim().to_string()
}

/// A key name unique to the test (keys are cluster-wide objects).
pub fn key_name(cluster: &Cluster, tag: &str) -> String {
    let ns: String = cluster.namespace.trim_start_matches("e2e-").chars().take(30).collect();
    format!("{}-{tag}", ns.trim_end_matches('-'))
}

/// The `serve-api` process; killed on drop.
pub struct ApiServer {
    child: Child,
    pub address: String,
    pub ca_pem: String,
    logs: Arc<Mutex<Vec<Value>>>,
}

impl ApiServer {
    pub async fn start(cluster: &Cluster, extra: &[&str]) -> ApiServer {
        install_api_rbac(cluster).await;
        let token = local_cluster::kubeconfig::service_account_token(
            &cluster.client,
            OPERATOR_NAMESPACE,
            model_orchestra_api::deploy::httpapi::NAME,
        )
        .await
        .expect("the API's token");
        let dir = cluster.dir.0.join(format!("api-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("api.kubeconfig");
        local_cluster::kubeconfig::with_token(&cluster.kubeconfig, &token, None, &cluster.namespace, &kubeconfig)
            .expect("the API's kubeconfig");
        let pki = local_cluster::pki::Pki::create(&dir.join("pki")).expect("a CA");
        pki.serving("api").expect("a serving certificate");
        let ca_pem = std::fs::read_to_string(pki.path("ca.crt")).expect("the CA");
        let mut child = Command::new(OPERATOR)
            .arg("serve-api")
            .args(["--listen", "127.0.0.1:0", "--keys-namespace", OPERATOR_NAMESPACE, "--log-format", "json"])
            .arg("--tls-cert")
            .arg(pki.path("api.crt"))
            .arg("--tls-key")
            .arg(pki.path("api.key"))
            .args(extra)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve-api");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => sink.lock().unwrap().push(v),
                    Err(_) => eprintln!("[serve-api] {line}"),
                }
            }
        });
        let mut server = ApiServer { child, address: String::new(), ca_pem, logs };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                panic!("serve-api exited with {status}: {:#?}", server.logs());
            }
            if let Some(l) = server.logged("listening").first() {
                server.address = l["address"].as_str().unwrap().to_string();
                return server;
            }
            assert!(std::time::Instant::now() < deadline, "serve-api did not start: {:#?}", server.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn logged(&self, message: &str) -> Vec<Value> {
        self.logs.lock().unwrap().iter().filter(|l| l["message"] == message).cloned().collect()
    }

    pub fn logs(&self) -> Vec<Value> {
        self.logs.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }

    pub fn client(&self) -> HttpsClient {
        HttpsClient::new(&self.address, &self.ca_pem)
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for l in self.logs() {
                eprintln!("[serve-api] {l}");
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// HTTPS to the server, trusting only the test CA.
#[derive(Clone)]
pub struct HttpsClient {
    address: String,
    connector: tokio_rustls::TlsConnector,
}

pub type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

impl HttpsClient {
    pub fn new(address: &str, ca_pem: &str) -> HttpsClient {
        use rustls_pki_types::pem::PemObject;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        HttpsClient { address: address.to_string(), connector: tokio_rustls::TlsConnector::from(Arc::new(config)) }
    }

    /// The TLS stream to the server (for raw requests).
    pub async fn tls(&self) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let tcp = tokio::net::TcpStream::connect(&self.address).await.expect("connect");
        let _ = tcp.set_nodelay(true);
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap().to_owned();
        self.connector.connect(name, tcp).await.expect("TLS handshake")
    }

    /// A keep-alive connection.
    pub async fn connect(&self) -> Sender {
        let io = hyper_util::rt::TokioIo::new(self.tls().await);
        let (sender, connection) = hyper::client::conn::http1::handshake(io).await.expect("HTTP handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        sender
    }

    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Answer {
        let mut sender = self.connect().await;
        send(&mut sender, method, path, headers, body).await
    }

    pub async fn get(&self, path: &str, key: &str) -> Answer {
        self.request("GET", path, &[("authorization", &format!("Bearer {key}"))], None).await
    }

    pub async fn send_json(&self, method: &str, path: &str, key: &str, body: &Value) -> Answer {
        let body = serde_json::to_vec(body).unwrap();
        self.request(
            method,
            path,
            &[("authorization", &format!("Bearer {key}")), ("content-type", "application/json")],
            Some(&body),
        )
        .await
    }

    /// The response head, and its body as it streams (a watch).
    pub async fn stream(&self, path: &str, key: &str) -> (u16, hyper::body::Incoming) {
        let mut sender = self.connect().await;
        let request = http::Request::builder()
            .method("GET")
            .uri(path)
            .header("host", &self.address)
            .header("authorization", format!("Bearer {key}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = sender.send_request(request).await.expect("send");
        (response.status().as_u16(), response.into_body())
    }
}

pub async fn send(
    sender: &mut Sender,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Answer {
    let mut builder = http::Request::builder().method(method).uri(path).header("host", "127.0.0.1");
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let request = builder.body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default()))).unwrap();
    let response = sender.send_request(request).await.expect("send");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.expect("the body").to_bytes();
    Answer { status, headers, body }
}

/// Reads server-sent events from `body` until one named `event` satisfies `accept`, or
/// `within` passes; returns its data.
pub async fn next_event(
    body: &mut hyper::body::Incoming,
    buffer: &mut String,
    event: &str,
    within: Duration,
    accept: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let name = block.lines().find_map(|l| l.strip_prefix("event:")).map(str::trim).unwrap_or("message");
            let data: String = block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
            if name == event {
                if let Ok(v) = serde_json::from_str::<Value>(&data) {
                    if accept(&v) {
                        return Some(v);
                    }
                }
            }
        }
        let frame = tokio::time::timeout_at(deadline, body.frame()).await.ok()??.ok()?;
        if let Ok(data) = frame.into_data() {
            buffer.push_str(&String::from_utf8_lossy(&data));
        }
    }
}

/// A small valid ModelOrchestra (v1alpha1, one CPU application).
pub fn cr(name: &str, app: &str) -> Value {
    json!({
        "apiVersion": "models.titanml.co/v1alpha1",
        "kind": "ModelOrchestra",
        "metadata": {"name": name},
        "spec": {"applications": {app: {"readerConfig": {"modelName": format!("org/{app}"), "device": "cpu"}}}}
    })
}

/// Merge-patches a CR's status as the admin (what the operator would report).
pub async fn set_status(cluster: &Cluster, name: &str, status: Value) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &cluster.namespace,
        &model_orchestra_api::ApiVersion::STORAGE.resource(),
    );
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
        .await
        .expect("patch status");
}

pub fn target_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target"))
}
