//! Two real nodes: pods on different nodes reach each other and a Service over both; a node
//! that stops (its kubelet, runtime and pods killed at once) goes NotReady and its pods are
//! evicted and run again on the other, and it comes back; `kubectl drain` empties a node; the
//! API server restarts without losing anything.
//! One cluster of two real nodes for these tests, which take turns: each changes or needs
//! both nodes.

use std::sync::OnceLock;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use local_cluster::{Cluster, Options};
use serde_json::json;

use crate::{eventually, get_from_a_pod, image, init, real_namespace};

/// The namespace of the test across two nodes.
const NS_TWO: &str = "two-nodes";

/// Seconds a node may be silent before it is NotReady, and its pods' tolerations of that.
const NODE_FAILURE_SECONDS: u32 = 15;

fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let options = Options { real_nodes: 2, node_failure_seconds: Some(NODE_FAILURE_SECONDS), ..Options::default() };
        Cluster::start_blocking(options).unwrap_or_else(|e| panic!("the two-node cluster did not start: {e}"))
    })
}

/// One test at a time on the two nodes.
async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// `web`: `replicas` pods of `mo-pod serve 8080 web`, spread evenly over the schedulable
/// real nodes, behind the Service `web`.
async fn web(cluster: &Cluster, namespace: &str, replicas: i32) {
    let client = cluster.client().await.unwrap();
    let params = PatchParams::apply("test").force();
    let labels = json!({"app": "web"});
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                // A cordoned or lost node (tainted) is no domain to spread over.
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
                    "labelSelector": {"matchLabels": labels}}],
                "containers": [{"name": "web", "image": image(cluster), "args": ["serve", "8080", "web"],
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1}}]
            }
        }}
    });
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .patch("web", &params, &Patch::Apply(&deployment))
        .await
        .unwrap();
    let service = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": "http"}]}
    });
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client, namespace)
        .patch("web", &params, &Patch::Apply(&service))
        .await
        .unwrap();
}

/// The Ready pods of `web` that are not being deleted, with their nodes.
async fn ready_web_pods(pods: &Api<Pod>) -> Vec<(String, String, String)> {
    let Ok(list) = pods.list(&ListParams::default().labels("app=web")).await else { return Vec::new() };
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| {
            let node = p.spec.as_ref()?.node_name.clone()?;
            let ip = p.status.as_ref()?.pod_ip.clone()?;
            Some((p.name_any(), node, ip))
        })
        .collect()
}

/// Until a Ready web pod runs on each real node: (name, node, address) of each.
async fn one_on_each_node(pods: &Api<Pod>) -> ((String, String, String), (String, String, String)) {
    eventually("a Ready web pod on each real node", || async {
        let ready = ready_web_pods(pods).await;
        let on = |node: &str| ready.iter().find(|(_, n, _)| n == node).cloned();
        Some((on("real-0")?, on("real-1")?))
    })
    .await
}

fn node_ready(node: &Node) -> Option<String> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status.clone())
}

fn kubectl(cluster: &Cluster, args: &[&str]) -> String {
    let out = cluster.kubectl().args(args).output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_on_two_real_nodes_reach_each_other_and_a_service_over_both() {
    init();
    let cluster = cluster();
    let _turn = turn().await;
    assert_eq!(cluster.real_nodes, ["real-0", "real-1"]);
    let pods = real_namespace(cluster, NS_TWO).await;
    web(cluster, NS_TWO, 2).await;
    let ((pod0, _, ip0), (pod1, _, ip1)) = one_on_each_node(&pods).await;
    assert!(ip0.starts_with("10.244.0."), "real-0's pods are on its subnet: {ip0}");
    assert!(ip1.starts_with("10.244.1."), "real-1's pods are on its subnet: {ip1}");

    // A pod on one node asks the pod on the other, both ways, by address: the answer names
    // the pod that gave it.
    let answer = get_from_a_pod(cluster, NS_TWO, "from-0", Some("real-0"), &format!("http://{ip1}:8080/")).await;
    assert_eq!(answer, format!("{pod1} web"));
    let answer = get_from_a_pod(cluster, NS_TWO, "from-1", Some("real-1"), &format!("http://{ip0}:8080/")).await;
    assert_eq!(answer, format!("{pod0} web"));
    // And the Service, by name, from the second node (kube-proxy's rules serve both).
    let answer =
        get_from_a_pod(cluster, NS_TWO, "by-name", Some("real-1"), "http://web.two-nodes.svc.cluster.local/").await;
    assert!([format!("{pod0} web"), format!("{pod1} web")].contains(&answer), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_real_node_goes_not_ready_its_pod_runs_again_on_the_other_and_it_comes_back() {
    init();
    let cluster = cluster();
    let _turn = turn().await;
    let pods = real_namespace(cluster, "node-lost").await;
    web(cluster, "node-lost", 1).await;
    let (first, lost, _) =
        eventually("the web pod is Ready", || async { ready_web_pods(&pods).await.into_iter().next() }).await;
    let nodes: Api<Node> = Api::all(cluster.client().await.unwrap());

    cluster.stop_real_node(&lost).unwrap();
    eventually(&format!("{lost} is no longer Ready"), || async {
        (node_ready(&nodes.get(&lost).await.ok()?)? != "True").then_some(())
    })
    .await;
    let (_, now_on, _) = eventually("a new web pod is Ready on the other node", || async {
        ready_web_pods(&pods).await.into_iter().find(|(name, _, _)| *name != first)
    })
    .await;
    assert_ne!(now_on, lost, "the replacement runs on the node that is up");
    let old = pods.get(&first).await.unwrap();
    assert!(old.metadata.deletion_timestamp.is_some(), "the lost node's pod was evicted");

    cluster.start_real_node(&lost).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(node_ready(&nodes.get(&lost).await.unwrap()).as_deref(), Some("True"));
    // Its kubelet confirms what the API server asked while it was gone.
    eventually("the evicted pod is gone once its node is back", || async {
        pods.get_opt(&first).await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drain_moves_a_real_nodes_pods_to_the_other_and_uncordon_takes_pods_again() {
    init();
    let cluster = cluster();
    let _turn = turn().await;
    let pods = real_namespace(cluster, "drain").await;
    web(cluster, "drain", 2).await;
    one_on_each_node(&pods).await;

    kubectl(cluster, &["drain", "real-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "80s"]);
    let ready = eventually("both web pods are Ready on real-0", || async {
        let ready = ready_web_pods(&pods).await;
        (ready.len() == 2).then_some(ready)
    })
    .await;
    assert!(ready.iter().all(|(_, n, _)| n == "real-0"), "{ready:?}");
    let nodes: Api<Node> = Api::all(cluster.client().await.unwrap());
    let drained = nodes.get("real-1").await.unwrap();
    assert_eq!(drained.spec.and_then(|s| s.unschedulable), Some(true), "drain cordons the node");

    kubectl(cluster, &["uncordon", "real-1"]);
    let uncordoned = nodes.get("real-1").await.unwrap();
    assert_ne!(uncordoned.spec.and_then(|s| s.unschedulable), Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_restarted_keeps_every_object_and_a_client_made_before_works_after() {
    init();
    let cluster = cluster();
    let _turn = turn().await;
    let pods = real_namespace(cluster, "api-restart").await;
    web(cluster, "api-restart", 1).await;
    let (pod, _, _) =
        eventually("the web pod is Ready", || async { ready_web_pods(&pods).await.into_iter().next() }).await;
    let api_server_pid = || cluster.pids().into_iter().find(|(name, _)| name == "kube-apiserver").map(|(_, pid)| pid);
    let before = api_server_pid().expect("an API server");

    cluster.restart_api_server().await.unwrap_or_else(|e| panic!("{e}"));

    assert_ne!(api_server_pid(), Some(before), "a new API server process");
    // The client made before the restart (`pods`) reaches the new one; etcd kept the pod,
    // and its kubelet kept it running.
    let after = eventually("the pod read again", || async { pods.get(&pod).await.ok() }).await;
    assert!(after.metadata.deletion_timestamp.is_none(), "{pod} kept");
    let still = eventually("the web pod is still Ready", || async { ready_web_pods(&pods).await.into_iter().next() });
    assert_eq!(still.await.0, pod);
}
