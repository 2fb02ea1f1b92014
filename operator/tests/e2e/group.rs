//! distributed-llama groups on the real control plane: the real StatefulSet, Deployment and
//! Job controllers and scheduler place a root and its workers on the local cluster's four
//! kwok nodes (two CPU, two GPU), driven the way users do (`kubectl apply`, `patch`,
//! `delete pod`). kwok stands in for the kubelets: it runs every scheduled pod Ready (the
//! engine's image is never pulled), so what is tested is the operator's part — placement,
//! wiring, gating, restarts, status — on the same code path as in production.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::ApiVersion;
use serde_json::Value;

const RELEASE: &str = "big";
const ROOT: &str = "big-model-orchestra-chat";
const WORKERS: &str = "big-model-orchestra-chat-workers";

/// A group of `nodes` members that may go to every kwok node of the fleet (the GPU nodes are
/// tainted; the real node's taint is not tolerated: distributed-llama's image is in no
/// registry), its model downloaded into a 1Gi cache.
fn group_cr(nodes: i32, model: &str) -> String {
    format!(
        "apiVersion: models.titanml.co/v1alpha2
kind: ModelOrchestra
metadata:
  name: {RELEASE}
spec:
  applications:
    chat:
      engine:
        distributedLlama:
          nodes: {nodes}
      readerConfig:
        modelName: {model}
        device: cpu
      modelCache:
        size: 1Gi
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
"
    )
}

async fn setup(test: &str) -> Option<(Cluster, Operator)> {
    let cluster = Cluster::start(test).await;
    if !cluster.has_fake_nodes(test) {
        return None;
    }
    let options =
        OperatorOptions { api_version: "v1alpha2", routing: "v1", identity: "op-group", ..Default::default() };
    let operator = Operator::start(&cluster, options).await;
    Some((cluster, operator))
}

/// The group's pods not being deleted: the root (if any) and the workers by ordinal.
async fn members(cluster: &Cluster) -> (Vec<Pod>, BTreeMap<i32, Pod>) {
    let pods = cluster.component_pods(RELEASE, "application-chat").await;
    let live = pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none());
    let (mut roots, mut workers) = (Vec::new(), BTreeMap::new());
    for pod in live {
        match pod.labels().get("models.titanml.co/role").map(String::as_str) {
            Some("root") => roots.push(pod),
            Some("worker") => {
                let index = pod.labels()["apps.kubernetes.io/pod-index"].parse().unwrap();
                workers.insert(index, pod);
            }
            _ => {}
        }
    }
    (roots, workers)
}

fn node(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

fn ready_since(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(ready.last_transition_time.as_ref()?.0)
}

fn command(pod: &Pod) -> Vec<String> {
    pod.spec.as_ref().unwrap().containers[0].command.clone().unwrap_or_default()
}

/// Every version of the CR (read at v1alpha2) the API server shows from now on.
fn record_cr(cluster: &Cluster) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let api = cluster.mo_api_at(ApiVersion::V1alpha2);
    let config = watcher::Config::default().fields(&format!("metadata.name={RELEASE}"));
    tokio::spawn(async move {
        let mut stream = watcher(api, config).default_backoff().applied_objects().boxed();
        // A watch error (the watcher retries it) must not end the recording.
        while let Some(event) = stream.next().await {
            if let Ok(cr) = event {
                sink.lock().unwrap().push(cr.data.clone());
            }
        }
    });
    seen
}

/// The UID of every root pod the API server shows from now on.
fn record_root_uids(cluster: &Cluster) -> Arc<Mutex<BTreeSet<String>>> {
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let sink = seen.clone();
    let config =
        watcher::Config::default().labels(&format!("app.kubernetes.io/instance={RELEASE},models.titanml.co/role=root"));
    let pods = cluster.pods();
    tokio::spawn(async move {
        let mut stream = watcher(pods, config).default_backoff().applied_objects().boxed();
        while let Some(event) = stream.next().await {
            if let Ok(pod) = event {
                sink.lock().unwrap().insert(pod.uid().unwrap_or_default());
            }
        }
    });
    seen
}

fn ready_status(cr: &Value) -> Option<&str> {
    cr["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?["status"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_four_is_placed_on_four_nodes_wired_by_stable_names_and_ready_only_when_every_member_is() {
    let Some((cluster, _operator)) = setup("group-four").await else { return };
    let versions = record_cr(&cluster);
    let start = Instant::now();
    cluster.kubectl_with_input(&["apply", "-f", "-"], &group_cr(4, "qwen3_0.6b_q40"));
    cluster.wait_reason(RELEASE, "Ready").await;
    eprintln!("a 4-node group became Ready {:.1} s after kubectl apply", start.elapsed().as_secs_f64());

    let (roots, workers) = members(&cluster).await;
    assert_eq!(roots.len(), 1, "one root");
    assert_eq!(workers.keys().copied().collect::<Vec<_>>(), [1, 2, 3], "workers numbered from 1");
    let nodes: BTreeSet<String> = roots.iter().chain(workers.values()).map(node).collect();
    assert_eq!(nodes.len(), 4, "one member per node: {nodes:?}");

    // The root names each worker by its stable DNS name: the pod's hostname in the
    // headless Service's subdomain.
    let args = command(&roots[0]);
    let at = args.iter().position(|a| a == "--workers").expect("--workers");
    let ns = &cluster.namespace;
    let expected: Vec<String> = (1..=3).map(|i| format!("{WORKERS}-{i}.{WORKERS}.{ns}.svc:9999")).collect();
    assert_eq!(args[at + 1..], expected[..]);
    for (i, pod) in &workers {
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(format!("{WORKERS}-{i}").as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some(WORKERS));
    }

    // The root started only once every worker was Ready.
    let last_worker_ready = workers.values().filter_map(ready_since).max().expect("workers ready");
    let root_created = roots[0].metadata.creation_timestamp.as_ref().unwrap().0;
    assert!(root_created >= last_worker_ready, "root created {root_created}, last worker ready {last_worker_ready}");

    // Ready only with every member ready, in every version of the status written.
    let versions = versions.lock().unwrap().clone();
    let ready: Vec<&Value> = versions.iter().filter(|cr| ready_status(cr) == Some("True")).collect();
    assert!(!ready.is_empty(), "the watch saw the CR Ready");
    for cr in &ready {
        let group = &cr["status"]["applications"]["chat"]["group"];
        assert_eq!((group["ready"].as_i64(), group["nodes"].as_i64()), (Some(4), Some(4)), "{group:#}");
    }
    let not_ready = versions.iter().filter(|cr| ready_status(cr) == Some("False")).count();
    assert!(not_ready > 0, "the CR was not Ready while its group started");

    let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get(RELEASE).await.unwrap();
    let chat = &cr.data["status"]["applications"]["chat"];
    assert_eq!(chat["address"], format!("{ROOT}.{ns}.svc:9999"));
    assert_eq!(chat["group"]["root"]["node"], node(&roots[0]));
    for (i, pod) in &workers {
        let status = &chat["group"]["workers"][(*i - 1) as usize];
        assert_eq!(
            (status["index"].as_i64(), status["node"].as_str(), status["ready"].as_bool()),
            (Some(*i as i64), Some(node(pod).as_str()), Some(true))
        );
    }
    let table = cluster.kubectl(&["get", "modelorchestras.v1alpha2.models.titanml.co", RELEASE]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[header.iter().position(|h| *h == "READY").unwrap()], "True", "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_larger_than_the_fleet_is_unschedulable_with_the_schedulers_message_until_scaled_down() {
    let Some((cluster, _operator)) = setup("group-eight").await else { return };
    cluster.kubectl_with_input(&["apply", "-f", "-"], &group_cr(8, "qwen3_0.6b_q40"));
    let cr = cluster.wait_reason(RELEASE, "Unschedulable").await;
    let message = ready_condition(&cr).unwrap()["message"].as_str().unwrap().to_string();
    assert!(message.contains("nodes are available") && message.contains("anti-affinity"), "{message}");
    let (roots, _) = members(&cluster).await;
    assert!(roots.is_empty(), "the root waits for its workers");

    // As a user would: a merge patch at the preferred version.
    let patch = r#"{"spec":{"applications":{"chat":{"engine":{"distributedLlama":{"nodes":4}}}}}}"#;
    cluster.kubectl(&["patch", "modelorchestra", RELEASE, "--type", "merge", "-p", patch]);
    cluster.wait_reason(RELEASE, "Ready").await;
    let all = cluster.component_pods(RELEASE, "application-chat").await;
    let indices: BTreeSet<String> =
        all.iter().filter_map(|p| p.labels().get("apps.kubernetes.io/pod-index").cloned()).collect();
    assert_eq!(indices, BTreeSet::from(["1".into(), "2".into(), "3".into()]), "no worker of the old size remains");
    assert_eq!(all.len(), 4, "a root and three workers: {:?}", all.iter().map(|p| p.name_any()).collect::<Vec<_>>());
    let (roots, _) = members(&cluster).await;
    let args = command(&roots[0]);
    assert_eq!(args.iter().skip_while(|a| *a != "--workers").count(), 4, "--workers and three addresses: {args:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_worker_restarts_the_root_once_and_the_status_says_why() {
    let Some((cluster, _operator)) = setup("group-restart").await else { return };
    cluster.kubectl_with_input(&["apply", "-f", "-"], &group_cr(4, "qwen3_0.6b_q40"));
    cluster.wait_reason(RELEASE, "Ready").await;
    let (roots, _) = members(&cluster).await;
    let before = roots[0].uid().unwrap();
    let uids = record_root_uids(&cluster);
    let versions = record_cr(&cluster);
    // The watches have listed what is there before anything changes.
    eventually("the root pod is seen", || async { uids.lock().unwrap().contains(&before).then_some(()) }).await;
    eventually("the CR is seen", || async { (!versions.lock().unwrap().is_empty()).then_some(()) }).await;

    cluster.kubectl(&["delete", "pod", &format!("{WORKERS}-2"), "--wait=false"]);
    let after = eventually("a new root serves", || async {
        let (roots, _) = members(&cluster).await;
        let root = roots.first()?;
        (root.uid()? != before && ready_since(root).is_some()).then(|| root.uid().unwrap())
    })
    .await;
    cluster.wait_reason(RELEASE, "Ready").await;
    // Long enough for a second restart, had there been one, to show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(*uids.lock().unwrap(), BTreeSet::from([before, after]), "the root restarted exactly once");
    let versions = versions.lock().unwrap().clone();
    let messages: Vec<&str> =
        versions.iter().filter_map(|cr| cr["status"]["applications"]["chat"]["group"]["message"].as_str()).collect();
    let statuses: Vec<&Value> = versions.iter().map(|cr| &cr["status"]["applications"]["chat"]).collect();
    assert!(
        messages.iter().any(|m| m.starts_with("restarting") && m.contains("worker 2")),
        "the status said why: {statuses:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_size_not_a_power_of_two_is_refused_at_kubectl_apply_naming_the_field() {
    let cluster = Cluster::start("group-cel").await;
    let out = cluster.kubectl_output(&["apply", "-f", "-"], &group_cr(3, "qwen3_0.6b_q40"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted");
    assert!(stderr.contains("spec.applications[chat].engine.distributedLlama.nodes"), "{stderr}");
    assert!(stderr.contains("a power of two from 1 to 64"), "{stderr}");
    assert!(cluster.mo_api().get_opt(RELEASE).await.unwrap().is_none(), "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_failed_download_is_model_download_failed_and_no_member_starts() {
    let Some((cluster, _operator)) = setup("group-download").await else { return };
    // The local cluster's kwok fails the download of `missing/model`, as a 404 would.
    let cr = group_cr(2, "missing/model").replace("size: 1Gi", "size: 1Gi\n        downloader: {backoffLimit: 0}");
    cluster.kubectl_with_input(&["apply", "-f", "-"], &cr);
    cluster.wait_reason(RELEASE, "ModelDownloadFailed").await;
    let (roots, _) = members(&cluster).await;
    assert!(roots.is_empty(), "the root has no model to read");
    let root = cluster.api(Kind::Deployment).get(ROOT).await.unwrap();
    assert_eq!(root.data["spec"]["replicas"], 0);
}
