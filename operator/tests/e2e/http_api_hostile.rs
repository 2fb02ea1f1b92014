//! Hostile requests — methods, paths, headers and bodies made up by proptest, written as raw
//! bytes over TLS — never get a 5xx from the HTTP API, nor crash it (a panic would be a 500:
//! the server turns them into one).
//!
//! A 502, 503 or 504 says the Kubernetes API server failed or was slow, which a loaded machine
//! can cause for any request: such an answer is the input's fault only if the same request,
//! sent again, gets it again. A 500 is always a failure.

use std::time::Duration;

use crate::http_support::*;
use crate::support::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone)]
struct Hostile {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
        Just(json!("40gb")),
        Just(json!("../../etc/passwd")),
        Just(json!("<script>alert(1)</script>")),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z.$-]{0,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![]),
        prop::collection::vec(any::<u8>(), 0..512),
        json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        // A valid CR with something made up at a random place.
        ("[a-z]{1,8}", "[a-zA-Z]{1,12}", json_value()).prop_map(|(name, field, v)| {
            let mut cr = cr(&name, "chat");
            cr["spec"]["applications"]["chat"][field] = v;
            serde_json::to_vec(&cr).unwrap()
        }),
        ("[a-z]{1,8}", json_value()).prop_map(|(name, v)| {
            let mut cr = cr(&name, "chat");
            cr["metadata"] = json!({"name": name, "labels": v.clone(), "annotations": v});
            serde_json::to_vec(&cr).unwrap()
        }),
        (1usize..3000).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes()),
        Just(b"{\"apiVersion\": \"models.titanml.co/v1alpha2\", \"kind\": \"ModelOrchestra\", \"metadata\": {\"name\": \"x\"}, \"spec\": 1e999}".to_vec()),
    ]
}

fn hostile(namespace: String, key: String) -> impl Strategy<Value = Hostile> {
    let method = prop_oneof![
        Just("GET".to_string()),
        Just("POST".to_string()),
        Just("PUT".to_string()),
        Just("DELETE".to_string()),
        Just("PATCH".to_string()),
        Just("HEAD".to_string()),
        Just("OPTIONS".to_string()),
        "[A-Z]{1,10}",
    ];
    let base = prop_oneof![
        Just("/".to_string()),
        Just("/login".to_string()),
        Just("/logout".to_string()),
        Just("/api/v1/openapi.json".to_string()),
        Just(format!("/api/v1/namespaces/{namespace}/modelorchestras")),
        Just(format!("/api/v1/namespaces/{namespace}/modelorchestras/chat")),
        Just(format!("/api/v1/namespaces/{namespace}/modelorchestras/chat/status")),
        Just(format!("/api/v1/namespaces/{namespace}/modelorchestras/chat/refresh")),
        Just(format!("/api/v1/namespaces/{namespace}/modelorchestras/chat/retry-promotion")),
        Just("/api/v1/namespaces/kube-system/modelorchestras".to_string()),
        Just("/api/v1/namespaces/".to_string()),
    ];
    let suffix = prop_oneof![
        Just(String::new()),
        "[a-zA-Z0-9%./_~:@!$&'()*+,;=?#\\[\\]-]{0,40}",
        Just("/..".to_string()),
        Just("/%2e%2e/%2e%2e/secrets".to_string()),
        Just("%00".to_string()),
        Just("/%ff%fe".to_string()),
        Just("?name=%00".to_string()),
        Just("//x".to_string()),
        Just("/".to_string() + &"a".repeat(5000)),
    ];
    let auth = prop_oneof![
        Just(None),
        Just(Some(("authorization".to_string(), format!("Bearer {key}")))),
        Just(Some(("x-api-key".to_string(), key.clone()))),
        Just(Some(("cookie".to_string(), format!("mo_api_key={key}")))),
        Just(Some(("authorization".to_string(), format!("Bearer {key}x")))),
        Just(Some(("authorization".to_string(), "Basic YTpi".to_string()))),
        Just(Some(("authorization".to_string(), "Bearer".to_string()))),
        "[ -~]{0,200}".prop_map(|v| Some(("authorization".to_string(), v))),
        "[ -~]{0,200}".prop_map(|v| Some(("x-api-key".to_string(), v))),
    ];
    let extra = prop::collection::vec(("[A-Za-z-]{1,20}", "[ -~]{0,100}"), 0..4);
    let content_type = prop_oneof![
        Just("application/json".to_string()),
        Just("application/x-www-form-urlencoded".to_string()),
        Just("text/plain".to_string()),
        "[ -~]{0,40}",
    ];
    (method, base, suffix, auth, extra, content_type, body()).prop_map(
        move |(method, base, suffix, auth, extra, content_type, body)| {
            let mut headers: Vec<(String, String)> = auth.into_iter().collect();
            headers.push(("content-type".into(), content_type));
            headers.extend(extra.into_iter().filter(|(k, _)| {
                !["content-length", "transfer-encoding", "host", "connection"]
                    .contains(&k.to_ascii_lowercase().as_str())
            }));
            Hostile { method, path: base + &suffix, headers, body }
        },
    )
}

/// Writes the request as raw bytes and reads the answer: its status and, for a 5xx, its
/// body; `None` when the server closed the connection without one.
async fn answer_to(client: &HttpsClient, h: &Hostile) -> Option<(u16, String)> {
    let mut tls = client.tls().await;
    let mut raw = format!("{} {} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n", h.method, h.path).into_bytes();
    for (k, v) in &h.headers {
        raw.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    raw.extend_from_slice(format!("content-length: {}\r\n\r\n", h.body.len()).as_bytes());
    raw.extend_from_slice(&h.body);
    if tls.write_all(&raw).await.is_err() {
        return None;
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // A watch never ends: the head is enough, but for an error, whose body says why.
    loop {
        let head_read = answer.windows(4).any(|w| w == b"\r\n\r\n");
        if head_read && !answer.starts_with(b"HTTP/1.1 5") {
            break;
        }
        match tokio::time::timeout(Duration::from_secs(20), tls.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) if head_read => break,
            Err(_) => panic!("no answer within 20 s to {h:?}"),
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    let code = text.strip_prefix("HTTP/1.1 ").and_then(|s| s.get(..3)).and_then(|s| s.parse().ok())?;
    Some((code, text))
}

/// Whether a 5xx answer is the upstream's passing failure: a 502, 503 or 504 that the same
/// request, asked again a second later, does not get.
async fn upstream_blip(client: &HttpsClient, h: &Hostile, code: u16) -> bool {
    if !matches!(code, 502..=504) {
        return false;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    answer_to(client, h).await.is_none_or(|(again, _)| again < 500)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_headers_and_bodies_never_get_a_5xx_or_crash_the_server() {
    let cluster = Cluster::start("api_hostile").await;
    install_api_rbac(&cluster).await;
    let key = create_key(&cluster, &key_name(&cluster, "a"), &[&cluster.namespace], "edit");
    let mut server =
        ApiServer::start(&cluster, &["--rate-limit", "10000", "--rate-burst", "10000", "--max-body-bytes", "65536"])
            .await;
    let client = server.client();
    // The set-up serves: a key's own list answers (the made-up requests reach it ~1% of the
    // time, too rarely to count on in 300).
    let list = client.get(&format!("/api/v1/namespaces/{}/modelorchestras", cluster.namespace), &key).await;
    assert_eq!(list.status, 200, "{list:?}");
    let cases: u32 = std::env::var("API_HOSTILE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let handle = tokio::runtime::Handle::current();
    let answered = std::sync::Mutex::new(std::collections::BTreeMap::<u16, u32>::new());
    let blips = std::sync::Mutex::new(0usize);
    let result = tokio::task::block_in_place(|| {
        runner.run(&hostile(cluster.namespace.clone(), key.clone()), |h| {
            let Some((code, answer)) = handle.block_on(answer_to(&client, &h)) else { return Ok(()) };
            *answered.lock().unwrap().entry(code).or_default() += 1;
            if code >= 500 && handle.block_on(upstream_blip(&client, &h, code)) {
                eprintln!("the upstream failed once (not again a second later) on {h:?}:\n{answer}");
                *blips.lock().unwrap() += 1;
                return Ok(());
            }
            prop_assert!(code < 500, "{code} for {h:?}, and again a second later:\n{answer}");
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let answered = answered.into_inner().unwrap();
    eprintln!("answers by status: {answered:?}");
    assert!(server.is_running(), "the server is still up");
    assert!(answered.contains_key(&401), "some were refused: {answered:?}");
    let errors: Vec<Value> =
        server.logs().into_iter().filter(|l| l["status"].as_u64().is_some_and(|s| s >= 500)).collect();
    let blips = blips.into_inner().unwrap();
    assert!(
        errors.len() == blips && errors.iter().all(|l| l["status"] != 500),
        "{blips} upstream failures seen by the client, the server logged: {errors:#?}"
    );
}
