//! The operator as users deploy it: `make install` and `make deploy` (the manifests
//! `model-orchestra-operator manifests` prints, applied server-side) with the operator's
//! own image, built by the project's image code from the static binary and pulled by the
//! real node from the cluster's registry. Its pod runs under its ServiceAccount, restricted
//! Pod Security, its probes and its metrics; the seed sample becomes Ready through it; with
//! two replicas, deleting the leader's pod hands the Lease to the other, which reconciles.
//!
//! Each test has a cluster of its own (as `make cluster`), with the operator's namespace
//! pinned to the real node: an operator watching every namespace would take the shared
//! cluster's CRs from the other tests.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::ResourceExt;
use local_cluster::{Cluster, Options};

const NAMESPACE: &str = "model-orchestra-system";
const DEPLOYMENT: &str = "model-orchestra-operator-v0";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kubectl ARGS` as the admin, `input` on stdin; stdout, or a panic quoting stderr.
fn kubectl(cluster: &Cluster, args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut child = cluster
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `make cluster`, `make install`, then `make deploy IMG=<the image in the cluster's
/// registry>` with `replicas`; returns the cluster once the Deployment is available, and
/// how long that took from the apply.
async fn deployed(replicas: u32) -> (Cluster, Duration) {
    deployed_with(replicas, false).await
}

async fn deployed_with(replicas: u32, http_api: bool) -> (Cluster, Duration) {
    deployed_line(replicas, http_api, None).await
}

/// As [`deployed_with`], the line serving `api_version` (`make deploy API_VERSION=…`).
async fn deployed_line(replicas: u32, http_api: bool, api_version: Option<&str>) -> (Cluster, Duration) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Cluster::start(Options::default()).await.unwrap_or_else(|e| panic!("{e}"));
    let image = cluster.push_operator_image("e2e").await.unwrap_or_else(|e| panic!("{e}"));
    // What `make cluster` does for the operator's namespace: its pods run on the real node.
    cluster.run_pods_for_real(NAMESPACE).await.unwrap();
    let crd = root().join("config/crd/models.titanml.co_modelorchestras.yaml");
    kubectl(&cluster, &["apply", "--server-side", "-f", crd.to_str().unwrap()], "");
    let mut manifests = Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"));
    manifests.args(["manifests", "--image", &image, "--claim-unlabeled"]);
    if http_api {
        manifests.arg("--http-api");
    }
    if let Some(version) = api_version {
        manifests.args(["--api-version", version]);
    }
    let deployment = match api_version {
        Some("v1alpha2") => "model-orchestra-operator-v1",
        _ => DEPLOYMENT,
    };
    let out = manifests.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let started = Instant::now();
    kubectl(&cluster, &["apply", "--server-side", "-f", "-"], &String::from_utf8(out.stdout).unwrap());
    if replicas != 1 {
        kubectl(
            &cluster,
            &["-n", NAMESPACE, "scale", &format!("deployment/{deployment}"), &format!("--replicas={replicas}")],
            "",
        );
    }
    kubectl(
        &cluster,
        &["-n", NAMESPACE, "rollout", "status", &format!("deployment/{deployment}"), "--timeout=180s"],
        "",
    );
    (cluster, started.elapsed())
}

async fn operator_pods(cluster: &Cluster) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(cluster.client().await.unwrap(), NAMESPACE);
    let list = pods.list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={DEPLOYMENT}"))).await;
    list.unwrap().items.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect()
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until the CR `namespace/name` is Ready for its generation; how long it took.
async fn wait_ready(cluster: &Cluster, namespace: &str, name: &str) -> Duration {
    let started = Instant::now();
    loop {
        let out =
            cluster.kubectl().args(["-n", namespace, "get", "modelorchestra", name, "-o", "json"]).output().unwrap();
        if let Ok(cr) = serde_json::from_slice::<serde_json::Value>(&out.stdout) {
            let current = cr["status"]["observedGeneration"] == cr["metadata"]["generation"];
            let ready = cr["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
            if current && ready {
                return started.elapsed();
            }
        }
        if started.elapsed() > Duration::from_secs(120) {
            let status = String::from_utf8_lossy(&out.stdout).into_owned();
            panic!("{namespace}/{name} did not become Ready: {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_deploy_runs_the_operator_image_in_its_pod_and_the_seed_sample_becomes_ready_through_it() {
    let (cluster, deploy_to_ready) = deployed(1).await;
    let pods = operator_pods(&cluster).await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    assert!(ready(pod), "the readiness probe (/readyz) passes");
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(local_cluster::REAL_NODE_NAME), "it runs on the real node");
    assert_eq!(spec.service_account_name.as_deref(), Some(DEPLOYMENT));
    let status = pod.status.as_ref().unwrap();
    let container = &status.container_statuses.as_ref().unwrap()[0];
    assert!(container.image_id.contains("sha256:"), "pulled by digest from the registry: {}", container.image_id);

    // The seed sample, applied unchanged by a user.
    let sample = std::fs::read_to_string(root().join("config/samples/modelorchestra.yaml")).unwrap();
    kubectl(&cluster, &["create", "namespace", "seed"], "");
    let mark = cluster.audit().mark();
    kubectl(&cluster, &["-n", "seed", "apply", "-f", "-"], &sample);
    // The first CR after the CRD's install waits for the API server's admission to map its
    // kind (OwnerReferencesPermissionEnforcement refuses blockOwnerDeletion until then; the
    // operator retries): the time to Ready is measured again on a second one.
    let first_apply_to_ready = wait_ready(&cluster, "seed", "my-model-orchestra").await;
    // A correct CR never gets a warning, the first after the CRD's install neither: the
    // status says WaitingForAPIServer meanwhile, and no Event is published for it.
    let events: Api<Event> = Api::namespaced(cluster.client().await.unwrap(), "seed");
    let warnings: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning") && e.involved_object.kind.as_deref() == Some("ModelOrchestra")
        })
        .map(|e| format!("{}: {}", e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect();
    assert_eq!(warnings, Vec::<String>::new(), "Warning Events on the seed sample CR");
    kubectl(&cluster, &["create", "namespace", "seed-again"], "");
    kubectl(&cluster, &["-n", "seed-again", "apply", "-f", "-"], &sample);
    let apply_to_ready = wait_ready(&cluster, "seed-again", "my-model-orchestra").await;
    let user = format!("system:serviceaccount:{NAMESPACE}:{DEPLOYMENT}");
    let writers: std::collections::BTreeSet<String> = cluster
        .audit()
        .since(mark)
        .into_iter()
        .filter(|e| e.is_write() && e.namespace() == "seed" && e.user.username.starts_with("system:serviceaccount:"))
        .map(|e| e.user.username)
        .collect();
    assert!(writers.contains(&user), "the operator's pod wrote the sample's children: {writers:?}");

    // Its metrics, scraped through the API server's pod proxy as Prometheus would reach the pod.
    let client = cluster.client().await.unwrap();
    let request =
        http::Request::get(format!("/api/v1/namespaces/{NAMESPACE}/pods/{}:8080/proxy/metrics", pod.name_any()))
            .body(vec![])
            .unwrap();
    let metrics = client.request_text(request).await.unwrap();
    assert!(metrics.contains("model_orchestra_"), "{metrics}");
    eprintln!(
        "make deploy → operator Ready: {:.1} s; kubectl apply of the seed sample → Ready: {:.1} s (the first after the CRD's install: {:.1} s)",
        deploy_to_ready.as_secs_f64(),
        apply_to_ready.as_secs_f64(),
        first_apply_to_ready.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_leaders_pod_hands_the_lease_to_the_other_replica_which_reconciles() {
    let (cluster, _) = deployed(2).await;
    let client = cluster.client().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let pods = operator_pods(&cluster).await;
    assert_eq!(pods.len(), 2);
    let standby_and_leader: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    // The Lease's holder, when it is one of the Deployment's pods (the two, or the one that
    // replaces the deleted pod).
    let holder = || async {
        let pods: Vec<String> = operator_pods(&cluster).await.iter().map(|p| p.name_any()).collect();
        leases.list(&ListParams::default()).await.ok()?.items.into_iter().find_map(|l| {
            let holder = l.spec?.holder_identity?;
            pods.contains(&holder).then_some(holder)
        })
    };
    let leader = loop {
        if let Some(h) = holder().await {
            break h;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let sample = std::fs::read_to_string(root().join("config/samples/modelorchestra.yaml")).unwrap();
    kubectl(&cluster, &["create", "namespace", "failover"], "");
    kubectl(&cluster, &["-n", "failover", "apply", "-f", "-"], &sample);
    wait_ready(&cluster, "failover", "my-model-orchestra").await;

    let deleted = Instant::now();
    kubectl(&cluster, &["-n", NAMESPACE, "delete", "pod", &leader, "--wait=false"], "");
    let new_leader = loop {
        if let Some(h) = holder().await.filter(|h| *h != leader) {
            break h;
        }
        assert!(deleted.elapsed() < Duration::from_secs(60), "no other replica took the Lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let lease_taken = deleted.elapsed();
    let taken_by = if standby_and_leader.contains(&new_leader) { "the standby" } else { "the replacement pod" };
    // A change made now is the new leader's to reconcile.
    kubectl(
        &cluster,
        &[
            "-n",
            "failover",
            "patch",
            "modelorchestra",
            "my-model-orchestra",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"applications":{"hello-world":{"podLabels":{"after":"failover"}}}}}"#,
        ],
        "",
    );
    wait_ready(&cluster, "failover", "my-model-orchestra").await;
    let reconciled = deleted.elapsed();
    eprintln!(
        "leader {leader} deleted → {taken_by} {new_leader} holds the Lease after {:.1} s, the change made then is Ready after {:.1} s (lease duration 15 s)",
        lease_taken.as_secs_f64(),
        reconciled.as_secs_f64()
    );
}

/// A serving certificate for the HTTP API's Service, from a CA of the test's own, as the
/// `kubernetes.io/tls` Secret its Deployment mounts (docs: "HTTP API").
fn create_tls_secret(cluster: &Cluster) {
    let dir = cluster.dir().join("http-api-pki");
    let pki = local_cluster::pki::Pki::create(&dir).unwrap();
    let service = format!("model-orchestra-api.{NAMESPACE}.svc");
    pki.serving_for("tls", &["model-orchestra-api", &service], &[]).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    kubectl(
        cluster,
        &[
            "-n",
            NAMESPACE,
            "create",
            "secret",
            "tls",
            "model-orchestra-api-tls",
            &format!("--cert={}", cert.display()),
            &format!("--key={}", key.display()),
        ],
        "",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_deploy_with_the_http_api_serves_it_from_its_own_pod_through_its_service() {
    let (cluster, _) = deployed_with(1, true).await;
    create_tls_secret(&cluster);
    kubectl(&cluster, &["-n", NAMESPACE, "rollout", "status", "deployment/model-orchestra-api", "--timeout=180s"], "");
    let pods: Api<Pod> = Api::namespaced(cluster.client().await.unwrap(), NAMESPACE);
    let api_pods =
        pods.list(&ListParams::default().labels("app.kubernetes.io/name=model-orchestra-api")).await.unwrap();
    let pod = &api_pods.items[0];
    assert!(ready(pod), "its readiness probe (HTTPS /healthz) passes");
    assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some(local_cluster::REAL_NODE_NAME));

    // A team's key, as the cluster admin makes it; a CR in the team's namespace.
    kubectl(&cluster, &["create", "namespace", "team-a"], "");
    let sample = std::fs::read_to_string(root().join("config/samples/modelorchestra.yaml")).unwrap();
    kubectl(&cluster, &["-n", "team-a", "apply", "-f", "-"], &sample);
    let out = Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"))
        .args(["api-key", "create", "--name", "team-a", "--namespace", "team-a"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let key = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // Through its Service, by the API server's service proxy (which strips Authorization:
    // the key goes as X-API-Key). The server's key cache refreshes from a watch: retry briefly.
    let client = cluster.client().await.unwrap();
    let path = format!("/api/v1/namespaces/{NAMESPACE}/services/https:model-orchestra-api:https/proxy/api/v1/namespaces/team-a/modelorchestras");
    let started = Instant::now();
    let list = loop {
        let request = http::Request::get(&path).header("X-API-Key", &key).body(vec![]).unwrap();
        match client.request_text(request).await {
            Ok(body) => break body,
            Err(e) if started.elapsed() < Duration::from_secs(30) => {
                eprintln!("the HTTP API through its Service: {e} (retrying)");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("the HTTP API through its Service: {e}"),
        }
    };
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["my-model-orchestra"], "{list}");
    let request =
        http::Request::get(path.replace("team-a", "kube-system")).header("X-API-Key", &key).body(vec![]).unwrap();
    let refused = client.request_text(request).await.unwrap_err().to_string();
    assert!(refused.contains("403") || refused.contains("Forbidden"), "another namespace is refused: {refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1alpha2_line_in_its_pod_pulls_an_ollama_model_into_its_replica_and_the_model_answers() {
    let (cluster, _) = deployed_line(1, false, Some("v1alpha2")).await;
    // What `make cluster` seeds: the Ollama image and SmolLM2, and the namespace `models`.
    cluster.push_ollama_image().await.unwrap_or_else(|e| panic!("{e}"));
    cluster.push_models(&[local_cluster::ollama::SMOLLM2]).await.unwrap_or_else(|e| panic!("{e}"));
    cluster.run_pods_for_real("models").await.unwrap();
    let sample = std::fs::read_to_string(root().join("config/samples/modelorchestra-v1alpha2-ollama.yaml")).unwrap();
    kubectl(&cluster, &["-n", "models", "apply", "-f", "-"], &sample);
    let apply_to_ready = wait_ready(&cluster, "models", "chat").await;

    // The README's last step, through the API server's service proxy.
    let client = cluster.client().await.unwrap();
    let body = serde_json::json!({"model": "smollm2:135m", "prompt": "The capital of France is", "raw": true,
        "stream": false, "options": {"temperature": 0, "num_predict": 8}});
    let request = http::Request::post(
        "/api/v1/namespaces/models/services/http:chat-model-orchestra-assistant:http/proxy/api/generate",
    )
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(serde_json::to_vec(&body).unwrap())
    .unwrap();
    let answer: serde_json::Value = serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    assert!(answer["response"].as_str().unwrap_or_default().contains("Paris"), "{answer}");
    eprintln!(
        "kubectl apply of the Ollama sample → Ready through the operator's pod: {:.1} s",
        apply_to_ready.as_secs_f64()
    );
}
