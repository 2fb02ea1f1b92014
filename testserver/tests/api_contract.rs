//! The API contract the test server keeps, over real HTTP: what an operator (and kubectl)
//! relies on from a Kubernetes API server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kube_testserver::{Faults, TestServer};
use serde_json::{json, Value};

struct Http<'a>(&'a TestServer);

impl Http<'_> {
    fn send(&self, method: &str, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
        let mut s = TcpStream::connect(self.0.addr()).unwrap();
        let body = if body.is_null() { String::new() } else { body.to_string() };
        write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nUser-Agent: contract-test/1\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let code = text.split_whitespace().nth(1).unwrap().parse().unwrap();
        let payload = text.split_once("\r\n\r\n").unwrap().1;
        (code, serde_json::from_str(payload).unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, "application/json", &Value::Null)
    }

    fn apply(&self, path: &str, manager: &str, force: bool, body: &Value) -> (u16, Value) {
        self.send("PATCH", &format!("{path}?fieldManager={manager}&force={force}"), "application/apply-patch+yaml", body)
    }

    /// Opens a watch and returns the first `n` event lines.
    fn watch(&self, path: &str, n: usize) -> Vec<Value> {
        let mut s = TcpStream::connect(self.0.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let mut events = vec![];
        let mut line = String::new();
        while events.len() < n {
            line.clear();
            if r.read_line(&mut line).unwrap() == 0 {
                break;
            }
            if let Ok(v) = serde_json::from_str::<Value>(line.trim()) {
                if v.get("type").is_some() {
                    events.push(v);
                }
            }
        }
        events
    }
}

const CM: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOY: &str = "/apis/apps/v1/namespaces/default/deployments";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn deployment(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}}}})
}

#[test]
fn server_side_apply_requires_a_field_manager() {
    let server = TestServer::start().unwrap();
    let (code, status) = Http(&server).send("PATCH", &format!("{CM}/x"), "application/apply-patch+yaml", &cm("x", json!({})));
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["kind"], "Status");
}

#[test]
fn apply_creates_then_a_second_manager_conflicts_unless_it_forces() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    assert_eq!(h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "1"}))).0, 201);
    let (code, status) = h.apply(&format!("{CM}/x"), "b", false, &cm("x", json!({"k": "2"})));
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], ".data.k");
    let (code, obj) = h.apply(&format!("{CM}/x"), "b", true, &cm("x", json!({"k": "2"})));
    assert_eq!(code, 200);
    let managers: Vec<&str> = obj["metadata"]["managedFields"].as_array().unwrap().iter().map(|m| m["manager"].as_str().unwrap()).collect();
    assert_eq!(managers, ["b"], "forcing took the field from a");
}

#[test]
fn a_no_op_apply_keeps_the_resource_version_and_a_change_increases_it() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let rv = |v: &Value| v["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap();
    let first = h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "1"}))).1;
    let again = h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "1"}))).1;
    assert_eq!(rv(&first), rv(&again));
    let changed = h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "2"}))).1;
    assert!(rv(&changed) > rv(&first));
}

#[test]
fn a_field_dropped_from_an_apply_is_removed() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "1", "gone": "2"})));
    let obj = h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "1"}))).1;
    assert_eq!(obj["data"], json!({"k": "1"}));
}

#[test]
fn an_update_with_a_stale_resource_version_conflicts() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let created = h.send("POST", CM, "application/json", &cm("x", json!({"k": "1"}))).1;
    let mut stale = created.clone();
    stale["data"]["k"] = json!("2");
    assert_eq!(h.send("PUT", &format!("{CM}/x"), "application/json", &stale).0, 200);
    stale["data"]["k"] = json!("3");
    assert_eq!(h.send("PUT", &format!("{CM}/x"), "application/json", &stale).0, 409);
}

#[test]
fn the_status_subresource_changes_only_status_and_the_main_resource_never_status() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let mut with_status = deployment(1);
    with_status["status"] = json!({"readyReplicas": 5});
    let created = h.apply(&format!("{DEPLOY}/d"), "a", false, &with_status).1;
    assert!(created.get("status").is_none(), "status ignored on the main resource: {created}");
    let patched =
        h.send("PATCH", &format!("{DEPLOY}/d/status"), "application/merge-patch+json", &json!({"spec": {"replicas": 9}, "status": {"readyReplicas": 1}})).1;
    assert_eq!(patched["status"]["readyReplicas"], 1);
    assert_eq!(patched["spec"]["replicas"], 1, "spec ignored on the status subresource");
    assert_eq!(patched["metadata"]["generation"], 1, "status changes do not bump generation");
    let scaled = h.apply(&format!("{DEPLOY}/d"), "a", false, &deployment(2)).1;
    assert_eq!(scaled["metadata"]["generation"], 2);
}

#[test]
fn a_watch_from_a_resource_version_replays_every_later_change_in_order() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let rv = h.get(CM).1["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "1"})));
    h.apply(&format!("{CM}/x"), "a", false, &cm("x", json!({"k": "2"})));
    h.send("DELETE", &format!("{CM}/x"), "application/json", &Value::Null);
    let events = h.watch(&format!("{CM}?watch=true&resourceVersion={rv}"), 3);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
}

#[test]
fn a_label_selector_watch_sees_an_object_that_stops_matching_as_deleted() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let rv = h.get(CM).1["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut labelled = cm("x", json!({}));
    labelled["metadata"]["labels"] = json!({"route": "v0"});
    h.apply(&format!("{CM}/x"), "a", false, &labelled);
    labelled["metadata"]["labels"] = json!({"route": "v1"});
    h.apply(&format!("{CM}/x"), "a", false, &labelled);
    let events = h.watch(&format!("{CM}?watch=1&labelSelector=route%3Dv0&resourceVersion={rv}"), 2);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "DELETED"]);
}

#[test]
fn delete_with_finalizers_only_marks_the_object_until_they_are_removed() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let mut obj = cm("x", json!({}));
    obj["metadata"]["finalizers"] = json!(["example.com/hold"]);
    h.send("POST", CM, "application/json", &obj);
    let marked = h.send("DELETE", &format!("{CM}/x"), "application/json", &Value::Null).1;
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(h.get(&format!("{CM}/x")).0, 200);
    h.send("PATCH", &format!("{CM}/x"), "application/merge-patch+json", &json!({"metadata": {"finalizers": null}}));
    assert_eq!(h.get(&format!("{CM}/x")).0, 404);
}

#[test]
fn deleting_an_owner_garbage_collects_dependents_unless_orphaned() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let owner = h.send("POST", CM, "application/json", &cm("owner", json!({}))).1;
    let uid = owner["metadata"]["uid"].clone();
    for name in ["child-1", "child-2"] {
        let mut c = cm(name, json!({}));
        c["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "controller": true}]);
        h.send("POST", CM, "application/json", &c);
    }
    h.send("DELETE", &format!("{CM}/owner"), "application/json", &Value::Null);
    assert_eq!(h.get(&format!("{CM}/child-1")).0, 404);
    assert_eq!(h.get(&format!("{CM}/child-2")).0, 404);

    let owner = h.send("POST", CM, "application/json", &cm("owner2", json!({}))).1;
    let mut c = cm("kept", json!({}));
    c["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner2", "uid": owner["metadata"]["uid"]}]);
    h.send("POST", CM, "application/json", &c);
    h.send("DELETE", &format!("{CM}/owner2?propagationPolicy=Orphan"), "application/json", &Value::Null);
    let kept = h.get(&format!("{CM}/kept"));
    assert_eq!(kept.0, 200);
    assert!(kept.1["metadata"].get("ownerReferences").is_none());
}

#[test]
fn a_crd_adds_its_resource_to_discovery_and_removing_it_removes_its_objects() {
    let server = TestServer::start().unwrap();
    let h = Http(&server);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}});
    assert_eq!(h.get("/apis/example.com/v1").0, 404);
    h.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", &crd);
    let resources = h.get("/apis/example.com/v1").1;
    let names: Vec<&str> = resources["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["widgets", "widgets/status"]);
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert_eq!(h.send("POST", "/apis/example.com/v1/namespaces/default/widgets", "application/json", &w).0, 201);
    h.send("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com", "application/json", &Value::Null);
    assert_eq!(h.get("/apis/example.com/v1/namespaces/default/widgets/w").0, 404);
}

#[test]
fn objects_in_a_missing_namespace_are_rejected() {
    let server = TestServer::start().unwrap();
    let (code, status) = Http(&server).send("POST", "/api/v1/namespaces/nope/configmaps", "application/json", &cm("x", json!({})));
    assert_eq!(code, 404);
    assert!(status["message"].as_str().unwrap().contains("namespaces \"nope\" not found"));
}

#[test]
fn injected_faults_fail_requests_and_are_logged() {
    let server = TestServer::start().unwrap();
    server.set_faults(Faults { error_rate: 1.0, ..Default::default() });
    assert_eq!(Http(&server).get(CM).0, 500);
    server.set_faults(Faults::default());
    assert_eq!(Http(&server).get(CM).0, 200);
    let codes: Vec<u16> = server.requests().iter().map(|r| r.code).collect();
    assert_eq!(codes, [500, 200]);
}
