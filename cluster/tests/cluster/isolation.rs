//! The cluster's namespaces: every process of the cluster lives in its own network
//! namespace, never the host's; no address of the cluster exists on the host; a request
//! to a fake pod's address fails inside the namespace; a test that stands in for fake pods
//! does so inside it; a forwarder's connect that waits holds up no other connection.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use local_cluster::forward::Forwarder;
use local_cluster::Cluster;
use serde_json::json;

use crate::{eventually, init};

fn net_namespace(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok().map(|p| p.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_process_of_the_cluster_runs_outside_the_hosts_network_namespace() {
    init();
    let cluster = Cluster::shared();
    let host = net_namespace(std::process::id()).unwrap();
    let isolation = cluster.isolation();
    assert_ne!(isolation.net_namespace, host);
    for (name, pid) in cluster.pids() {
        assert_eq!(net_namespace(pid).as_deref(), Some(isolation.net_namespace.as_str()), "{name} ({pid})");
    }
    let all = isolation.pids();
    assert!(all.len() >= cluster.pids().len(), "every component is in the cluster's cgroups: {all:?}");
    for pid in all {
        if let Some(ns) = net_namespace(pid) {
            assert_ne!(ns, host, "process {pid} of the cluster is in the host's network namespace");
        }
    }
}

#[test]
fn no_address_of_the_cluster_exists_in_the_hosts_namespace() {
    init();
    let _cluster = Cluster::shared();
    let out = std::process::Command::new("ip").args(["-4", "-o", "addr"]).output().unwrap();
    let addresses = String::from_utf8_lossy(&out.stdout);
    for prefix in [" 10.10.0.", " 10.244.", " 10.128.", " 10.96."] {
        assert!(!addresses.contains(prefix), "the host has an address {prefix}*:\n{addresses}");
    }
    let out = std::process::Command::new("ip").args(["-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&out.stdout);
    for device in ["cni0", "node0"] {
        assert!(!links.contains(&format!(": {device}")), "the host has the device {device}:\n{links}");
    }
}

/// An admin client that does not retry 503s (kube-rs does by default, for minutes), as the
/// operator's prober does not.
async fn client_without_retries(cluster: &Cluster) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&cluster.kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_servers_proxy_to_a_fake_pod_fails_inside_the_namespace() {
    init();
    let cluster = Cluster::shared();
    let client = client_without_retries(cluster).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fake-target"},
        "spec": {"containers": [{"name": "c", "image": "example.com/never-pulled:1"}]}});
    pods.patch("fake-target", &PatchParams::apply("test"), &Patch::Apply(&pod)).await.unwrap();
    let ip =
        eventually("kwok gives the pod an address", || async { pods.get("fake-target").await.ok()?.status?.pod_ip })
            .await;
    assert!(ip.starts_with("10."), "{ip}");
    let request = http::Request::get("/api/v1/namespaces/default/pods/fake-target:80/proxy/").body(vec![]).unwrap();
    let err = client.request_text(request).await.unwrap_err().to_string();
    // Routed nowhere inside the namespace ("no route to host"); or, once a test stands in
    // for fake pods there, refused on its loopback. Never an answer from outside.
    assert!(err.contains("no route to host") || err.contains("connection refused"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stand_in_for_fake_pods_listens_inside_the_namespace_and_the_api_server_reaches_it() {
    init();
    let cluster = Cluster::shared();
    cluster.serve_fake_pod_addresses().unwrap();
    let listener = cluster.isolation().bind("0.0.0.0:0".parse().unwrap()).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nstand-in");
        }
    });
    let client = cluster.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stood-in"},
        "spec": {"containers": [{"name": "c", "image": "example.com/never-pulled:1"}]}});
    pods.patch("stood-in", &PatchParams::apply("test"), &Patch::Apply(&pod)).await.unwrap();
    eventually("kwok gives the pod an address", || async { pods.get("stood-in").await.ok()?.status?.pod_ip }).await;
    let request =
        http::Request::get(format!("/api/v1/namespaces/default/pods/stood-in:{port}/proxy/")).body(vec![]).unwrap();
    assert_eq!(client.request_text(request).await.unwrap(), "stand-in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarder_connecting_to_an_address_that_does_not_answer_holds_up_no_other_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    init();
    let cluster = Cluster::shared();
    let isolation = cluster.isolation();
    // A listener inside the namespace that accepts nothing: once its queue is full the kernel
    // drops new SYNs, and a connect to it waits, as to an address nobody answers.
    let silent = isolation.socket_for("127.0.0.1:0".parse().unwrap()).unwrap();
    silent.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let silent = silent.listen(0).unwrap();
    let addr = silent.local_addr().unwrap();
    let mut queued = Vec::new();
    for _ in 0..4 {
        let socket = isolation.socket_for(addr).unwrap();
        if let Ok(Ok(c)) = tokio::time::timeout(std::time::Duration::from_millis(300), socket.connect(addr)).await {
            queued.push(c);
        }
    }
    let to_silent = Forwarder::start("127.0.0.1:0".parse().unwrap(), addr, isolation.clone()).unwrap();
    let api_port: u16 = cluster.server.rsplit(':').next().unwrap().parse().unwrap();
    let api = SocketAddr::from((Ipv4Addr::LOCALHOST, api_port));
    let to_api = Forwarder::start("127.0.0.1:0".parse().unwrap(), api, isolation.clone()).unwrap();

    let waiting = tokio::net::TcpStream::connect(to_silent.listen).await.unwrap();
    // (Its other half starts connecting.)
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut other = tokio::net::TcpStream::connect(to_api.listen).await.unwrap();
    other.write_all(b"GET /livez HTTP/1.0\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    other.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.0 400"), "the API server's answer to plain HTTP: {answer}");
    // Answered while the first connection still waits for its other half: open, silent.
    let mut byte = [0u8; 1];
    let pending = waiting.try_read(&mut byte);
    assert!(
        matches!(&pending, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the first connection still waits: {pending:?}"
    );
    drop(queued);
}
