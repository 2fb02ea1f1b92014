//! The HTTP API on the real control plane: keys made by `api-key create`, the `serve-api`
//! process with TLS on 127.0.0.1 acting for each key by impersonation, the API server's
//! RBAC deciding and its audit log witnessing.

use std::time::Duration;

use crate::http_support::*;
use crate::support::*;
use kube::api::DynamicObject;
use kube::ResourceExt;
use serde_json::json;

const MO: &str = "/api/v1/namespaces";

fn mo_path(ns: &str) -> String {
    format!("{MO}/{ns}/modelorchestras")
}

/// A test's cluster namespace, a key for it (`edit`), and the server.
async fn setup(test: &str, server_args: &[&str]) -> (Cluster, String, ApiServer) {
    let cluster = Cluster::start(test).await;
    install_api_rbac(&cluster).await;
    let key = create_key(&cluster, &key_name(&cluster, "a"), &[&cluster.namespace], "edit");
    let server = ApiServer::start(&cluster, server_args).await;
    (cluster, key, server)
}

#[tokio::test]
async fn a_request_without_a_key_is_401() {
    let (cluster, _key, server) = setup("api_no_key", &[]).await;
    let answer = server.client().request("GET", &mo_path(&cluster.namespace), &[], None).await;
    assert_eq!(answer.status, 401, "{}", answer.text());
    assert_eq!(answer.json()["reason"], "Unauthorized");
    let wrong = server.client().get(&mo_path(&cluster.namespace), "mo_nobody.AAAA").await;
    assert_eq!(wrong.status, 401);
}

#[tokio::test]
async fn a_key_for_one_namespace_reading_another_is_403() {
    let (cluster, key, server) = setup("api_other_team", &[]).await;
    let other = other_namespace(&cluster).await;
    let answer = server.client().get(&mo_path(&other), &key).await;
    assert_eq!(answer.status, 403, "{}", answer.text());
    let body = answer.json();
    assert_eq!(body["reason"], "Forbidden");
    let user = format!("model-orchestra-api:{}", key_name(&cluster, "a"));
    assert!(body["message"].as_str().unwrap().contains(&user), "the message names the key's user: {body}");
}

#[tokio::test]
async fn create_get_list_replace_delete_answer_201_200_200_200_200_and_the_audit_log_names_the_key_on_each_write() {
    let (cluster, key, server) = setup("api_crud", &[]).await;
    let client = server.client();
    let ns = &cluster.namespace;
    let mark = cluster.audit_mark();

    let created = client.send_json("POST", &mo_path(ns), &key, &cr("chat", "chat")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.json()["metadata"]["name"], "chat");

    let read = client.get(&format!("{}/chat", mo_path(ns)), &key).await;
    assert_eq!(read.status, 200, "{}", read.text());
    let list = client.get(&mo_path(ns), &key).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.json()["items"].as_array().unwrap().len(), 1);

    let mut body = cr("chat", "chat");
    body["metadata"]["resourceVersion"] = read.json()["metadata"]["resourceVersion"].clone();
    body["spec"]["applications"]["chat"]["readerConfig"]["modelName"] = json!("org/other");
    let replaced = client.send_json("PUT", &format!("{}/chat", mo_path(ns)), &key, &body).await;
    assert_eq!(replaced.status, 200, "{}", replaced.text());
    assert_eq!(replaced.json()["spec"]["applications"]["chat"]["readerConfig"]["modelName"], "org/other");

    let deleted = client.request("DELETE", &format!("{}/chat", mo_path(ns)), &[("x-api-key", &key)], None).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());

    let Some(audit) = cluster.audit() else { return };
    let user = format!("model-orchestra-api:{}", key_name(&cluster, "a"));
    let writes = eventually("the three writes are in the audit log", || async {
        let writes: Vec<_> = audit
            .since(mark)
            .into_iter()
            .filter(|e| {
                e.is_write()
                    && e.resource() == "modelorchestras"
                    && e.namespace() == *ns
                    && e.stage == "ResponseComplete"
            })
            .collect();
        (writes.len() >= 3).then_some(writes)
    })
    .await;
    let verbs: Vec<&str> = writes.iter().map(|e| e.verb.as_str()).collect();
    assert_eq!(verbs, ["create", "update", "delete"]);
    for e in &writes {
        assert_eq!(e.acting_user(), user, "{e:?}");
        assert_eq!(e.user.username, "system:serviceaccount:model-orchestra-system:model-orchestra-api");
    }
}

#[tokio::test]
async fn a_stale_resource_version_is_409() {
    let (cluster, key, server) = setup("api_stale", &[]).await;
    let client = server.client();
    let path = format!("{}/chat", mo_path(&cluster.namespace));
    let created = client.send_json("POST", &mo_path(&cluster.namespace), &key, &cr("chat", "chat")).await;
    assert_eq!(created.status, 201);
    let stale = created.json()["metadata"]["resourceVersion"].clone();
    let mut body = cr("chat", "chat");
    body["metadata"]["resourceVersion"] = stale.clone();
    body["spec"]["applications"]["chat"]["readerConfig"]["modelName"] = json!("org/first");
    assert_eq!(
        client.send_json("PUT", &path, &key, &body).await.status,
        200,
        "a change at the current resourceVersion"
    );
    body["spec"]["applications"]["chat"]["readerConfig"]["modelName"] = json!("org/late");
    let conflict = client.send_json("PUT", &path, &key, &body).await;
    assert_eq!(conflict.status, 409, "{}", conflict.text());
    assert_eq!(conflict.json()["reason"], "Conflict");
}

#[tokio::test]
async fn an_invalid_cr_is_422_naming_the_field_and_nothing_is_written() {
    let (cluster, key, server) = setup("api_invalid", &[]).await;
    let mark = cluster.audit_mark();
    let mut body = cr("bad", "chat");
    body["spec"]["applications"]["chat"]["readerConfig"]["device"] = json!("tpu");
    body["spec"]["applications"]["chat"]["env"] = json!([{"name": "A=B", "value": "x"}]);
    let answer = server.client().send_json("POST", &mo_path(&cluster.namespace), &key, &body).await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    let fields: Vec<String> =
        answer.json()["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap().to_string()).collect();
    assert!(fields.contains(&"spec.applications.chat.readerConfig.device".to_string()), "{fields:?}");
    let get = server.client().get(&format!("{}/bad", mo_path(&cluster.namespace)), &key).await;
    assert_eq!(get.status, 404);
    if let Some(audit) = cluster.audit() {
        assert!(
            !audit
                .since(mark)
                .iter()
                .any(|e| e.is_write() && e.resource() == "modelorchestras" && e.namespace() == cluster.namespace),
            "nothing is written"
        );
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let (cluster, key, server) = setup("api_too_large", &["--max-body-bytes", "4096"]).await;
    let mut body = cr("big", "chat");
    body["metadata"]["annotations"] = json!({"padding": "x".repeat(8192)});
    let answer = server.client().send_json("POST", &mo_path(&cluster.namespace), &key, &body).await;
    assert_eq!(answer.status, 413, "{}", answer.text());
    assert_eq!(answer.json()["reason"], "PayloadTooLarge");
}

#[tokio::test]
async fn malformed_json_is_400() {
    let (cluster, key, server) = setup("api_malformed", &[]).await;
    let auth = format!("Bearer {key}");
    let answer = server
        .client()
        .request("POST", &mo_path(&cluster.namespace), &[("authorization", &auth)], Some(b"{\"apiVersion\": "))
        .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(answer.json()["reason"], "MalformedJson");
}

#[tokio::test]
async fn a_key_over_its_rate_is_429() {
    let (cluster, key, server) = setup("api_rate", &["--rate-limit", "0.2", "--rate-burst", "3"]).await;
    let client = server.client();
    let mut statuses = vec![];
    for _ in 0..5 {
        statuses.push(client.get(&mo_path(&cluster.namespace), &key).await);
    }
    let codes: Vec<u16> = statuses.iter().map(|a| a.status).collect();
    assert_eq!(codes, [200, 200, 200, 429, 429]);
    assert!(statuses[3].headers.contains_key("retry-after"));
    assert_eq!(statuses[3].json()["reason"], "TooManyRequests");
}

#[tokio::test]
async fn a_revoked_key_is_refused_within_5_seconds() {
    let (cluster, key, server) = setup("api_revoked", &[]).await;
    let path = mo_path(&cluster.namespace);
    assert_eq!(server.client().get(&path, &key).await.status, 200);
    api_key(&cluster, &["revoke", "--name", &key_name(&cluster, "a")]);
    eventually_within(Duration::from_secs(5), "the revoked key is refused", || async {
        (server.client().get(&path, &key).await.status == 401).then_some(())
    })
    .await;
    let listed = api_key(&cluster, &["list"]);
    assert!(!listed.contains(&key_name(&cluster, "a")), "{listed}");
}

#[tokio::test]
async fn api_key_list_shows_the_key_and_no_secret_holds_it() {
    let (cluster, key, _server) = setup("api_key_list", &[]).await;
    let listed = api_key(&cluster, &["list"]);
    let line = listed.lines().find(|l| l.starts_with(&key_name(&cluster, "a"))).expect("listed");
    assert!(line.contains("edit") && line.contains(&cluster.namespace), "{line}");
    let secrets = cluster.kubectl(&["get", "secrets", "-n", OPERATOR_NAMESPACE, "-o", "json"]);
    assert!(!secrets.contains(&key), "no Secret holds the key");
}

#[tokio::test]
async fn refresh_sets_the_annotation_naming_the_applications_and_repeats_with_a_new_value() {
    let (cluster, key, server) = setup("api_refresh_annotation", &[]).await;
    let client = server.client();
    assert_eq!(client.send_json("POST", &mo_path(&cluster.namespace), &key, &cr("chat", "chat")).await.status, 201);
    let path = format!("{}/chat/refresh", mo_path(&cluster.namespace));
    let first = client.send_json("POST", &path, &key, &json!({"applications": ["chat"]})).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.json(), json!({"annotation": "models.titanml.co/refresh", "value": "chat"}));
    let again = client.send_json("POST", &path, &key, &json!({"applications": ["chat"]})).await.json();
    assert_ne!(again["value"], "chat", "the same value twice would download nothing");
    let stored = cluster.cr("chat").await;
    assert_eq!(stored.annotations()["models.titanml.co/refresh"], again["value"].as_str().unwrap());
    let unknown = client.send_json("POST", &path, &key, &json!({"applications": ["nope"]})).await;
    assert_eq!(unknown.status, 422);
    assert_eq!(unknown.json()["errors"][0]["field"], "applications[0]");
}

#[tokio::test]
async fn retry_promotion_sets_its_annotation() {
    let (cluster, key, server) = setup("api_retry", &[]).await;
    let client = server.client();
    assert_eq!(client.send_json("POST", &mo_path(&cluster.namespace), &key, &cr("chat", "chat")).await.status, 201);
    let answer = client
        .request(
            "POST",
            &format!("{}/chat/retry-promotion", mo_path(&cluster.namespace)),
            &[("authorization", &format!("Bearer {key}"))],
            None,
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let value = answer.json()["value"].as_str().unwrap().to_string();
    assert_eq!(cluster.cr("chat").await.annotations()["models.titanml.co/retry-promotion"], value);
}

#[tokio::test]
async fn the_model_cache_downloads_again_after_a_refresh_through_the_api() {
    let (cluster, key, server) = setup("api_refresh_cache", &[]).await;
    let options = OperatorOptions {
        api_version: "v1alpha2",
        routing: "v1",
        claim_unlabeled: true,
        identity: "op-api-cache",
        ..Default::default()
    };
    let _operator = Operator::start(&cluster, options).await;
    let body = json!({
        "apiVersion": "models.titanml.co/v1alpha2",
        "kind": "ModelOrchestra",
        "metadata": {"name": "cached"},
        "spec": {
            "applicationTemplate": {"modelCache": {"enabled": true, "size": "1Gi"}},
            "applications": {"chat": {"readerConfig": {"modelName": "org/chat", "device": "cpu"}}}
        }
    });
    let client = server.client();
    assert_eq!(client.send_json("POST", &mo_path(&cluster.namespace), &key, &body).await.status, 201);
    let model = |cr: &DynamicObject| cr.data["status"]["applications"]["chat"]["model"].clone();
    eventually_within(Duration::from_secs(90), "the first download is Ready", || async {
        (model(&cluster.mo_api_at(model_orchestra_api::ApiVersion::V1alpha2).get("cached").await.ok()?)["phase"]
            == "Ready")
            .then_some(())
    })
    .await;
    let answer =
        client.send_json("POST", &format!("{}/cached/refresh", mo_path(&cluster.namespace)), &key, &json!({})).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let value = answer.json()["value"].as_str().unwrap().to_string();
    let done = eventually_within(Duration::from_secs(90), "the refresh's download is Ready", || async {
        let cr = cluster.mo_api_at(model_orchestra_api::ApiVersion::V1alpha2).get("cached").await.ok()?;
        (model(&cr)["refresh"] == value.as_str() && model(&cr)["phase"] == "Ready").then_some(cr)
    })
    .await;
    assert_eq!(done.data["status"]["modelRefresh"]["value"], value.as_str());
}

#[tokio::test]
async fn the_watch_delivers_a_status_change_within_2_seconds() {
    let (cluster, key, server) = setup("api_watch", &[]).await;
    let client = server.client();
    assert_eq!(client.send_json("POST", &mo_path(&cluster.namespace), &key, &cr("chat", "chat")).await.status, 201);
    let (status, mut body) = client.stream(&format!("{MO}/{}/watch?name=chat", cluster.namespace), &key).await;
    assert_eq!(status, 200);
    let mut buffer = String::new();
    next_event(&mut body, &mut buffer, "status", Duration::from_secs(10), |s| s["name"] == "chat")
        .await
        .expect("the current status first");
    let condition = json!({"type": "Ready", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes are available",
        "lastTransitionTime": "2030-01-01T00:00:00Z"});
    set_status(&cluster, "chat", json!({"conditions": [condition]})).await;
    let changed =
        next_event(&mut body, &mut buffer, "status", Duration::from_secs(2), |s| s["reason"] == "Unschedulable")
            .await
            .expect("the change within 2 s");
    assert_eq!(changed["message"], "0/4 nodes are available");
}

#[tokio::test]
async fn the_openapi_document_is_served_as_checked_in() {
    let (_cluster, _key, server) = setup("api_openapi", &[]).await;
    let answer = server.client().request("GET", "/api/v1/openapi.json", &[], None).await;
    assert_eq!(answer.status, 200);
    let checked_in = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../httpapi/openapi.json")).unwrap();
    assert!(answer.text() == checked_in);
}

#[tokio::test]
async fn the_server_refuses_to_start_without_tls_or_on_a_public_address_in_plain_http() {
    let out = std::process::Command::new(OPERATOR).args(["serve-api", "--listen", "127.0.0.1:0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no TLS material"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(OPERATOR)
        .args(["serve-api", "--listen", "0.0.0.0:0", "--insecure-listen"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("only on a loopback address"));
}

#[tokio::test]
async fn a_server_without_any_key_yet_serves_refusing_every_request_and_says_how_to_make_one() {
    use std::io::BufRead;
    let cluster = Cluster::start("api_no_keys").await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = std::process::Command::new(OPERATOR)
        .args([
            "serve-api",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--insecure-listen",
            "--keys-namespace",
            &cluster.namespace,
        ])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read until it listens; kept open until it is killed (it logs each request).
    let mut lines = std::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let mut said = String::new();
    for line in lines.by_ref().map_while(Result::ok) {
        said.push_str(&line);
        said.push('\n');
        if line.contains("listening") {
            break;
        }
    }
    assert!(said.contains("no API key yet") && said.contains("api-key create"), "{said}");
    let (code, _) =
        http_get(&format!("127.0.0.1:{port}"), &format!("/api/v1/namespaces/{}/modelorchestras", cluster.namespace))
            .await;
    let _ = server.kill();
    let _ = server.wait();
    drop(lines);
    assert_eq!(code, 401, "no key is valid while none exists");
}
