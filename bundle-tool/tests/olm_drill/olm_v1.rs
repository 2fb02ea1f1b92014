//! OLM v1 (catalogd and operator-controller, built from `tools/olm`) run as processes in the
//! cluster's namespaces, beside its other controllers (the API server calls catalogd's
//! webhook on that namespace's loopback), with what a cluster would give them: catalogd's TLS
//! certificate, its CA for operator-controller and for the webhook, the cluster's registry
//! marked insecure in `registries.conf` under a HOME of their own — and standing in for
//! ghcr.io there, as an air-gapped cluster's mirror — and caches in the scratch directory.

use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use local_cluster::pki::Pki;
use local_cluster::process::{free_port, Supervised};
use serde_json::json;

use crate::drill::Drill;

pub struct OlmV1 {
    /// Where catalogd serves catalogs (127.0.0.1).
    pub catalogs_port: u16,
    /// Stopped in reverse start order.
    processes: Mutex<Vec<(&'static str, Supervised)>>,
}

impl OlmV1 {
    pub async fn start(drill: &Drill) -> OlmV1 {
        let work = drill.work();
        // OLM reads insecure registries from registries.conf under HOME, never from the env.
        let home = work.join("home");
        let containers = home.join(".config/containers");
        std::fs::create_dir_all(&containers).expect("HOME for OLM");
        let registry = drill.maintainer.base.split('/').next().expect("the registry's address");
        // The released bundles are named ghcr.io/…, which the cluster's registry mirrors.
        std::fs::write(
            containers.join("registries.conf"),
            format!(
                "[[registry]]\nlocation = \"{registry}\"\ninsecure = true\n\n\
                 [[registry]]\nprefix = \"ghcr.io\"\nlocation = \"{registry}\"\ninsecure = true\n"
            ),
        )
        .expect("registries.conf");
        std::fs::write(containers.join("policy.json"), r#"{"default":[{"type":"insecureAcceptAnything"}]}"#)
            .expect("policy.json");
        // catalogd serves catalogs (and its webhook) over TLS: a CA and a certificate for
        // localhost and 127.0.0.1; operator-controller trusts the CA from a directory of CAs.
        let pki = Pki::create(&work.join("pki")).expect("a CA for catalogd");
        pki.serving("catalogd").expect("catalogd's certificate");
        let cas = work.join("pki-cas");
        std::fs::create_dir_all(&cas).expect("the CA directory");
        std::fs::write(cas.join("ca.pem"), &pki.ca.cert).expect("the CA");

        for entry in std::fs::read_dir(local_cluster::tools::share_dir().join("olm")).expect("OLM's CRDs (share/olm)") {
            let path = entry.expect("a CRD file").path();
            drill.apply_yaml(&std::fs::read_to_string(&path).expect("a CRD")).await;
        }
        drill.apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "olmv1-system"}})).await;

        let port = || free_port().expect("a free port");
        let (catalogs_port, webhook_port) = (port(), port());
        let kubeconfig = drill.cluster().kubeconfig.clone();
        let isolation = drill.cluster().isolation().clone();
        let program = |name: &str| {
            isolation.command(local_cluster::tools::program(name).expect("OLM v1 (scripts/build-go-tools.sh olm)"))
        };
        // --cache-dir / --cache-path default to /var/cache, which they empty: always a temp dir.
        let mut catalogd = program("catalogd");
        catalogd
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--system-namespace=olmv1-system")
            .arg(format!("--cache-dir={}", work.join("catalogd-cache").display()))
            .arg("--tls-cert")
            .arg(pki.path("catalogd.crt"))
            .arg("--tls-key")
            .arg(pki.path("catalogd.key"))
            .args(["--catalogs-server-addr", &format!("127.0.0.1:{catalogs_port}")])
            .args(["--external-address", &format!("localhost:{catalogs_port}")])
            .args(["--webhook-server-port", &webhook_port.to_string()])
            .args(["--metrics-bind-address", &format!("127.0.0.1:{}", port())])
            .args(["--health-probe-bind-address", &format!("127.0.0.1:{}", port())])
            .env("HOME", &home);
        let mut operator_controller = program("operator-controller");
        operator_controller
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--system-namespace=olmv1-system")
            .arg(format!("--cache-path={}", work.join("operator-controller-cache").display()))
            .arg("--catalogd-cas-dir")
            .arg(&cas)
            .args(["--health-probe-bind-address", &format!("127.0.0.1:{}", port())])
            .env("HOME", &home);
        let mut processes = vec![];
        for (name, command) in [("catalogd", catalogd), ("operator-controller", operator_controller)] {
            processes.push((name, spawn_logged(drill, name, command)));
        }
        let olm = OlmV1 { catalogs_port, processes: Mutex::new(processes) };

        // catalogd's mutating webhook labels each ClusterCatalog with its name (what the
        // ClusterExtensions select by); registered by URL, as catalogd runs out of cluster.
        let start = Instant::now();
        while isolation.connect(std::net::SocketAddr::from(([127, 0, 0, 1], webhook_port))).is_err() {
            if let Some((name, status)) = olm.exited().into_iter().next() {
                panic!(
                    "{name} exited ({status}) before its webhook listened; see its log in {}",
                    drill.logs().display()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "catalogd's webhook does not listen on port {webhook_port} (not within 60 s)"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        drill
            .apply(&json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "catalogd-mutating-webhook-configuration"},
                "webhooks": [{
                    "name": "inject-metadata-name.olm.operatorframework.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 10,
                    "clientConfig": {
                        "url": format!("https://127.0.0.1:{webhook_port}/mutate-olm-operatorframework-io-v1-clustercatalog"),
                        "caBundle": base64::engine::general_purpose::STANDARD.encode(&pki.ca.cert),
                    },
                    "rules": [{
                        "apiGroups": ["olm.operatorframework.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["clustercatalogs"],
                    }],
                }],
            }))
            .await;
        olm
    }

    /// The OLM programs that have exited, with how.
    pub fn exited(&self) -> Vec<(String, ExitStatus)> {
        let mut processes = self.processes.lock().expect("processes lock");
        processes.iter_mut().filter_map(|(name, p)| p.exited().map(|s| (name.to_string(), s))).collect()
    }
}

impl Drop for OlmV1 {
    fn drop(&mut self) {
        let mut processes = self.processes.lock().expect("processes lock");
        while let Some((_, mut process)) = processes.pop() {
            process.stop(Duration::from_secs(10));
        }
    }
}

fn spawn_logged(drill: &Drill, name: &str, mut command: Command) -> Supervised {
    let log = drill.logs().join(format!("{name}.log"));
    let file = std::fs::File::create(&log).expect("a log file");
    command.stdin(Stdio::null()).stdout(file.try_clone().expect("the log file")).stderr(file);
    local_cluster::process::spawn(command).unwrap_or_else(|e| panic!("start {name}: {e}"))
}
