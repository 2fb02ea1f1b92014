//! The real node: pods of our own images pulled from the cluster's registry really run,
//! answer through their Service by name (cluster DNS) and through the API server's service
//! proxy; `kubectl logs`, `exec` and `port-forward` work from the host; only pods of
//! namespaces pinned to it land there.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use local_cluster::Cluster;
use serde_json::{json, Value};

use crate::{eventually, get_from_a_pod, image, init, real_namespace};

async fn apply(cluster: &Cluster, namespace: &str, object: Value) {
    let client = cluster.client().await.unwrap();
    let kind = object["kind"].as_str().unwrap().to_string();
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let params = PatchParams::apply("test").force();
    match kind.as_str() {
        "Pod" => {
            drop(Api::<Pod>::namespaced(client, namespace).patch(&name, &params, &Patch::Apply(&object)).await.unwrap())
        }
        "Service" => drop(
            Api::<k8s_openapi::api::core::v1::Service>::namespaced(client, namespace)
                .patch(&name, &params, &Patch::Apply(&object))
                .await
                .unwrap(),
        ),
        other => panic!("{other}"),
    }
}

/// `web`: `mo-pod serve 8080 TEXT` behind the Service `web` (port 80), Ready by its probe.
async fn web(cluster: &Cluster, namespace: &str, text: &str) -> Pod {
    let pods = real_namespace(cluster, namespace).await;
    apply(cluster, namespace, json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{
            "name": "web", "image": image(cluster), "args": ["serve", "8080", text],
            "ports": [{"containerPort": 8080, "name": "http"}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
            "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true}
        }]}
    }))
    .await;
    apply(
        cluster,
        namespace,
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}
        }),
    )
    .await;
    eventually("the web pod is Ready", || async {
        let pod = pods.get("web").await.ok()?;
        let ready = pod.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(pod)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_our_own_image_runs_on_the_real_node_and_answers_through_its_service_by_name() {
    init();
    let cluster = Cluster::shared();
    let pod = web(cluster, "real-service", "hello from a real pod").await;
    assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some(local_cluster::REAL_NODE_NAME));
    let ip = pod.status.unwrap().pod_ip.unwrap();
    assert!(ip.starts_with("10.244.0."), "a real pod's address, on the node's bridge: {ip}");

    // From another pod: the Service's full name, then its short name (the search path).
    let full =
        get_from_a_pod(cluster, "real-service", "by-full-name", None, "http://web.real-service.svc.cluster.local/")
            .await;
    assert_eq!(full.trim(), "web hello from a real pod");
    let short = get_from_a_pod(cluster, "real-service", "by-short-name", None, "http://web/").await;
    assert_eq!(short.trim(), "web hello from a real pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_pod_answers_through_the_api_servers_service_proxy() {
    init();
    let cluster = Cluster::shared();
    web(cluster, "real-proxy", "through the proxy").await;
    let client = cluster.client().await.unwrap();
    let request =
        http::Request::get("/api/v1/namespaces/real-proxy/services/web:80/proxy/anything").body(vec![]).unwrap();
    let answer = client.request_text(request).await.unwrap();
    assert_eq!(answer.trim(), "web through the proxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_exec_and_port_forward_reach_a_real_pod_from_the_host() {
    init();
    let cluster = Cluster::shared();
    web(cluster, "real-kubectl", "kubectl").await;
    let kubectl = |args: &[&str]| {
        let out = cluster.kubectl().args(["-n", "real-kubectl"]).args(args).output().unwrap();
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(kubectl(&["logs", "web"]).contains("mo-pod: serving on 0.0.0.0:8080"));
    assert_eq!(kubectl(&["exec", "web", "--", "/mo-pod", "get", "http://127.0.0.1:8080/healthz"]), "ok\n");

    let mut forward = cluster
        .kubectl()
        .args(["-n", "real-kubectl", "port-forward", "pod/web", ":8080"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(forward.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // kubectl says "Handling connection for PORT" for each connection: keep reading, or it
    // dies writing to a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // "Forwarding from 127.0.0.1:PORT -> 8080"
    let port =
        line.split("127.0.0.1:").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or_else(|| panic!("{line}"));
    let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    stream.write_all(b"GET /forwarded HTTP/1.0\r\nHost: web\r\n\r\n").unwrap();
    let mut answer = String::new();
    if let Err(e) = stream.read_to_string(&mut answer) {
        panic!("reading the answer through port-forward: {e} (read so far: {answer:?})");
    }
    let _ = forward.kill();
    let _ = forward.wait();
    assert!(answer.ends_with("web kubectl\n"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_a_namespace_not_pinned_to_the_real_node_goes_to_kwok() {
    init();
    let cluster = Cluster::shared();
    let client = cluster.client().await.unwrap();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "not-real"}});
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch("not-real", &PatchParams::apply("test"), &Patch::Apply(&ns))
        .await
        .unwrap();
    apply(
        cluster,
        "not-real",
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "elsewhere"},
            "spec": {"containers": [{"name": "c", "image": image(cluster), "args": ["serve", "8080"]}]}
        }),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client, "not-real");
    let node = eventually("the pod is scheduled", || async { pods.get("elsewhere").await.ok()?.spec?.node_name }).await;
    assert_ne!(node, local_cluster::REAL_NODE_NAME, "the real node's taint keeps other pods away");
}
