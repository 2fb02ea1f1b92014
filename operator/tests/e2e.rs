//! End-to-end: the real operator binary as a process against the loopback kube-testserver
//! (or a real cluster: `E2E_REAL_CLUSTER=1 KUBECONFIG=… cargo test --test e2e`).

mod e2e_support;

use std::collections::BTreeSet;
use std::time::Duration;

use e2e_support::*;
use kube::api::{Patch, PatchParams};
use kube::ResourceExt;
use kube_testserver::Faults;
use model_orchestra::kinds::Kind;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_cr_gets_every_rendered_object_owned_and_managed_by_the_operator() {
    let cluster = Cluster::start("sample").await;
    let _op = Operator::start(&cluster, OperatorOptions::default());
    let cr = cluster.apply_cr(&sample()).await;
    let name = cr.name_any();
    cluster.wait_children(&name, &cluster.expected(&sample())).await;
    let uid = cluster.cr(&name).await.uid().unwrap();
    for (kind, child) in cluster.children(&name).await {
        let owner = &child.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!((owner.uid.as_str(), owner.controller), (uid.as_str(), Some(true)), "{kind:?} {}", child.name_any());
        let managers: Vec<_> = child.metadata.managed_fields.iter().flatten().map(|m| (m.manager.clone(), m.operation.clone())).collect();
        assert!(managers.contains(&(Some(FIELD_MANAGER.into()), Some("Apply".into()))), "{kind:?}: {managers:?}");
    }
    let cr = cluster.wait_reason(&name, "ApplicationsNotReady").await;
    assert_eq!(cr.data["status"]["gatewayAddress"], json!(format!("my-model-orchestra-gateway.{}.svc:80", cluster.namespace)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cr_becomes_ready_once_its_deployments_report_ready() {
    if real_cluster() {
        eprintln!("skipped on a real cluster: the sample's GPU pods cannot become ready there");
        return;
    }
    let cluster = Cluster::start("ready").await;
    let _op = Operator::start(&cluster, OperatorOptions::default());
    let name = cluster.apply_cr(&sample()).await.name_any();
    cluster.wait_children(&name, &cluster.expected(&sample())).await;
    let waiting = cluster.wait_reason(&name, "ApplicationsNotReady").await;
    cluster.make_deployments_ready(&name).await;
    let ready = cluster.wait_reason(&name, "Ready").await;
    let status = &ready.data["status"];
    assert_eq!(status["applicationsReady"], "1/1");
    assert_eq!(status["applications"]["hello-world"], json!({"readyReplicas": 1, "desiredReplicas": 1, "ready": true}));
    let since = |cr: &kube::api::DynamicObject, t: &str| {
        cr.data["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == t).unwrap()["lastTransitionTime"].clone()
    };
    assert_eq!(since(&waiting, "Degraded"), since(&ready, "Degraded"), "Degraded did not flip, so its time stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_reader_config_changes_the_config_map_and_the_pod_template_checksum() {
    let cluster = Cluster::start("config").await;
    let _op = Operator::start(&cluster, OperatorOptions::default());
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    let checksum = |d: &kube::api::DynamicObject| d.data["spec"]["template"]["metadata"]["annotations"]["checksum/config"].clone();
    let before = cluster.api(Kind::Deployment).get("demo-model-orchestra-chat").await.unwrap();
    let changed = yaml.replace("org/chat-model", "org/other-model");
    cluster.apply_cr(&changed).await;
    let after = eventually("the deployment's checksum changes", || async {
        let d = cluster.api(Kind::Deployment).get("demo-model-orchestra-chat").await.ok()?;
        (checksum(&d) != checksum(&before)).then_some(d)
    })
    .await;
    let cm = cluster.api(Kind::ConfigMap).get("demo-model-orchestra-chat").await.unwrap();
    assert!(cm.data["data"].to_string().contains("org/other-model"), "{}", cm.data["data"]);
    assert_eq!(after.uid(), before.uid(), "updated in place, not recreated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_an_application_deletes_exactly_its_objects() {
    let cluster = Cluster::start("remove-app").await;
    let _op = Operator::start(&cluster, OperatorOptions::default());
    let both = cr_with_apps("demo", &["chat", "embed"], None);
    cluster.apply_cr(&both).await;
    cluster.wait_children("demo", &cluster.expected(&both)).await;
    let uids_before: BTreeSet<String> = cluster.children("demo").await.iter().filter_map(|(_, o)| o.uid()).collect();
    let one = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&one).await;
    cluster.wait_children("demo", &cluster.expected(&one)).await;
    let uids_after: BTreeSet<String> = cluster.children("demo").await.iter().filter_map(|(_, o)| o.uid()).collect();
    assert!(uids_after.is_subset(&uids_before), "the kept objects were not recreated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_child_is_recreated_and_a_hand_edited_child_is_repaired() {
    let cluster = Cluster::start("repair").await;
    let _op = Operator::start(&cluster, OperatorOptions::default());
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    let want = cluster.expected(&yaml);
    cluster.wait_children("demo", &want).await;

    cluster.delete(Kind::Service, "demo-model-orchestra-chat").await;
    cluster.wait_children("demo", &want).await;

    let edit = json!({"data": {"config.yaml": "edited by hand"}});
    cluster.api(Kind::ConfigMap).patch("demo-model-orchestra-chat", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    eventually("the hand edit is reverted", || async {
        let cm = cluster.api(Kind::ConfigMap).get("demo-model-orchestra-chat").await.ok()?;
        (cm.data["data"]["config.yaml"] != "edited by hand").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_cr_garbage_collects_its_children() {
    let cluster = Cluster::start("gc").await;
    let _op = Operator::start(&cluster, OperatorOptions::default());
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    cluster.mo_api().delete("demo", &Default::default()).await.unwrap();
    cluster.wait_children("demo", &BTreeSet::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_cr_reports_render_failed_and_changes_nothing() {
    let cluster = Cluster::start("invalid").await;
    let _op = Operator::start(&cluster, OperatorOptions::default());
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    cluster.wait_reason("demo", "ApplicationsNotReady").await;
    let versions = |children: Vec<(Kind, kube::api::DynamicObject)>| -> BTreeSet<(String, Option<String>)> {
        children.into_iter().map(|(_, o)| (o.name_any(), o.resource_version())).collect()
    };
    let before = versions(cluster.children("demo").await);

    // An application key that is not a DNS label: the CRD schema cannot see map keys, the operator must.
    let invalid = cr_with_apps("demo", &["Chat_Bot"], None);
    cluster.apply_cr(&invalid).await;
    let cr = cluster.wait_reason("demo", "RenderFailed").await;
    let ready = cr.data["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap().clone();
    assert!(ready["message"].as_str().unwrap().contains("spec.applications"), "{ready}");
    assert_eq!(versions(cluster.children("demo").await), before, "nothing applied or pruned");

    let events = cluster.client.clone();
    let api: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(events, &cluster.namespace);
    eventually("a RenderFailed event is published", || async {
        let list = api.list(&Default::default()).await.ok()?;
        list.items.iter().any(|e| e.reason.as_deref() == Some("RenderFailed")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_killed_mid_reconcile_converges_after_restart_without_duplicates() {
    let cluster = Cluster::start("restart").await;
    if let Some(server) = &cluster.server {
        // Slow every request so the kill lands between applies.
        server.set_faults(Faults { latency_ms: 40, ..Default::default() });
    }
    let mut op = Operator::start(&cluster, OperatorOptions::default());
    let yaml = cr_with_apps("demo", &["a", "b", "c"], None);
    cluster.apply_cr(&yaml).await;
    eventually("some children exist", || async { (!cluster.child_names("demo").await.is_empty()).then_some(()) }).await;
    op.kill();
    let partial = cluster.child_names("demo").await;
    if let Some(server) = &cluster.server {
        server.set_faults(Faults::default());
    }
    let _op = Operator::start(&cluster, OperatorOptions { identity: "op-b", ..Default::default() });
    let want = cluster.expected(&yaml);
    cluster.wait_children("demo", &want).await;
    assert!(partial.len() <= want.len());
    assert_eq!(cluster.children("demo").await.len(), want.len(), "no duplicates");
    cluster.wait_reason("demo", "ApplicationsNotReady").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_faults_injected_the_operator_converges_once_they_stop() {
    let cluster = Cluster::start("faults").await;
    let Some(server) = &cluster.server else {
        eprintln!("skipped on a real cluster: faults are injected by the loopback server");
        return;
    };
    // The user's own apply goes in before the faults (a 500 there would fail the test, not
    // the operator); the operator then starts, lists and reconciles under them.
    let yaml = cr_with_apps("demo", &["chat", "embed"], None);
    cluster.apply_cr(&yaml).await;
    server.set_faults(Faults { error_rate: 0.3, latency_ms: 5, drop_watches_after_ms: Some(1500) });
    let _op = Operator::start(&cluster, OperatorOptions::default());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let failures = server.requests().iter().filter(|r| r.code == 500).count();
    assert!(failures > 0, "faults were injected");
    server.set_faults(Faults::default());
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    cluster.make_deployments_ready("demo").await;
    cluster.wait_reason("demo", "Ready").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_cr_costs_no_writes_on_resync() {
    let cluster = Cluster::start("no-writes").await;
    let Some(server) = &cluster.server else {
        eprintln!("skipped on a real cluster: counting writes needs the loopback server's request log");
        return;
    };
    let op = Operator::start(&cluster, OperatorOptions { resync_seconds: 1, ..Default::default() });
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    cluster.make_deployments_ready("demo").await;
    cluster.wait_reason("demo", "Ready").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mark = server.requests().len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let writes = writes_by(&server.requests(), &op.identity, mark);
    assert!(writes.is_empty(), "no-op resyncs wrote: {writes:?}");
    let metrics = fetch_metrics(&op.metrics_addr().await).await;
    let reconciles = metric(&metrics, "model_orchestra_reconciles_total{result=\"success\"}");
    assert!(reconciles >= 4.0, "resyncs happened ({reconciles}):\n{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_with_different_routing_values_each_write_only_their_own_crs() {
    let cluster = Cluster::start("routing").await;
    let v0 = Operator::start(&cluster, OperatorOptions { routing: "v0", claim_unlabeled: false, identity: "op-v0", ..Default::default() });
    let v1 = Operator::start(&cluster, OperatorOptions { routing: "v1", claim_unlabeled: false, identity: "op-v1", ..Default::default() });
    let a = cr_with_apps("alpha", &["chat"], Some("v0"));
    let b = cr_with_apps("beta", &["chat"], Some("v1"));
    cluster.apply_cr(&a).await;
    cluster.apply_cr(&b).await;
    cluster.wait_children("alpha", &cluster.expected(&a)).await;
    cluster.wait_children("beta", &cluster.expected(&b)).await;
    cluster.wait_reason("alpha", "ApplicationsNotReady").await;
    cluster.wait_reason("beta", "ApplicationsNotReady").await;
    if let Some(requests) = cluster.requests() {
        let touches = |w: &kube_testserver::RequestRecord, cr: &str| w.path.contains(&format!("/{cr}-")) || w.path.ends_with(&format!("/{cr}")) || w.path.contains(&format!("/{cr}/"));
        assert!(writes_by(&requests, &v0.identity, 0).iter().all(|w| !touches(w, "beta")), "v0 wrote beta's objects");
        assert!(writes_by(&requests, &v1.identity, 0).iter().all(|w| !touches(w, "alpha")), "v1 wrote alpha's objects");
        assert!(!writes_by(&requests, &v0.identity, 0).is_empty() && !writes_by(&requests, &v1.identity, 0).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_relabelled_from_v0_to_v1_is_taken_over_without_recreating_its_children() {
    let cluster = Cluster::start("takeover").await;
    let _v0 = Operator::start(&cluster, OperatorOptions { routing: "v0", claim_unlabeled: false, identity: "op-v0", ..Default::default() });
    let v1 = Operator::start(&cluster, OperatorOptions { routing: "v1", claim_unlabeled: false, identity: "op-v1", ..Default::default() });
    let on_v0 = cr_with_apps("demo", &["chat"], Some("v0"));
    cluster.apply_cr(&on_v0).await;
    cluster.wait_children("demo", &cluster.expected(&on_v0)).await;
    cluster.wait_reason("demo", "ApplicationsNotReady").await;
    let uids = |c: Vec<(Kind, kube::api::DynamicObject)>| -> BTreeSet<String> { c.into_iter().filter_map(|(_, o)| o.uid()).collect() };
    let before = uids(cluster.children("demo").await);
    let mark = cluster.requests().map_or(0, |r| r.len());

    // The v1 line adds an application; only the v1 operator may apply it.
    let on_v1 = cr_with_apps("demo", &["chat", "embed"], Some("v1"));
    cluster.apply_cr(&on_v1).await;
    cluster.wait_children("demo", &cluster.expected(&on_v1)).await;
    let after = uids(cluster.children("demo").await);
    assert!(before.is_subset(&after), "existing children kept their identity");
    if let Some(requests) = cluster.requests() {
        assert!(!writes_by(&requests, &v1.identity, mark).is_empty(), "the v1 operator wrote");
        assert!(writes_by(&requests, "op-v0", mark).is_empty(), "the v0 operator stopped writing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_with_the_same_routing_value_never_both_write() {
    let cluster = Cluster::start("leader").await;
    let mut first = Operator::start(&cluster, OperatorOptions { identity: "op-a", ..Default::default() });
    first.wait_logged("leading").await;
    let second = Operator::start(&cluster, OperatorOptions { identity: "op-b", ..Default::default() });
    second.wait_logged("waiting for leadership").await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    cluster.wait_reason("demo", "ApplicationsNotReady").await;
    assert!(second.logged("leading").is_empty(), "the standby does not lead");
    if let Some(requests) = cluster.requests() {
        assert!(writes_by(&requests, "op-b", 0).is_empty(), "the standby wrote");
    }

    // The leader steps down on SIGTERM; the standby takes over and reconciles a change.
    assert!(first.terminate(), "graceful exit on SIGTERM");
    second.wait_logged("leading").await;
    let changed = cr_with_apps("demo", &["chat", "embed"], None);
    cluster.apply_cr(&changed).await;
    cluster.wait_children("demo", &cluster.expected(&changed)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operations_endpoint_serves_health_readiness_and_metrics() {
    let cluster = Cluster::start("ops").await;
    let op = Operator::start(&cluster, OperatorOptions::default());
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    let addr = op.metrics_addr().await;
    assert_eq!(http_get(&addr, "/healthz").await.0, 200);
    eventually("readyz is ok", || async { (http_get(&addr, "/readyz").await.0 == 200).then_some(()) }).await;
    let metrics = fetch_metrics(&addr).await;
    assert!(metric(&metrics, "model_orchestra_objects_applied_total") >= 4.0, "{metrics}");
    assert_eq!(metric(&metrics, "model_orchestra_leader"), 1.0, "{metrics}");
}

/// A tiny HTTP/1.0 GET (the endpoint is plain text on loopback).
async fn http_get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    let code = buf.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

async fn fetch_metrics(addr: &str) -> String {
    http_get(addr, "/metrics").await.1
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok())).unwrap_or(0.0)
}
