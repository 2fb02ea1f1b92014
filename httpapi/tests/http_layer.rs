//! The HTTP layer in process, where no Kubernetes call is needed: sign-in, cookies, key
//! checks, body limits and error bodies. (The e2e tests in operator/tests/http_api*.rs run
//! the same against the real control plane.)

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use model_orchestra_api::InputError;
use model_orchestra_http::keys::{self, KeyRecord, KeyStore};
use model_orchestra_http::Validator;
use model_orchestra_http::{test_router, ServeOptions};
use serde_json::Value;
use tower::ServiceExt;

fn router() -> (axum::Router, String) {
    let key = keys::generate("team-a").unwrap();
    let store = KeyStore::new([KeyRecord {
        name: "team-a".into(),
        sha256: keys::hash(&key),
        namespaces: vec!["team-a".into()],
        access: "edit".into(),
        created: String::new(),
    }]);
    // Nothing here reaches it: every request below is answered before a Kubernetes call.
    let config = kube::Config::new("https://127.0.0.1:9".parse().unwrap());
    let validator: Validator = Arc::new(|v: &Value, _: &str| {
        if v["spec"]["bad"].is_null() {
            Ok(vec![])
        } else {
            Err(vec![InputError::new("spec.bad", "not a field")])
        }
    });
    let options = ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        tls: None,
        insecure_listen: true,
        keys_namespace: "ops".into(),
        rate_per_second: 100.0,
        burst: 100,
        max_body_bytes: 1024,
        request_timeout: Duration::from_secs(5),
        read_cache: Duration::from_secs(1),
    };
    (test_router(store, config, validator, &options), key)
}

async fn call(router: &axum::Router, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn get(path: &str) -> axum::http::request::Builder {
    Request::builder().method("GET").uri(path)
}

#[tokio::test]
async fn the_page_without_a_key_is_the_sign_in_form() {
    let (router, _) = router();
    let (status, headers, body) = call(&router, get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("<form method=\"post\" action=\"/login\">"), "{body}");
    assert!(headers["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
}

#[tokio::test]
async fn signing_in_with_a_valid_key_sets_an_http_only_strict_cookie() {
    let (router, key) = router();
    let form = format!("key={key}");
    let request = Request::post("/login")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(form))
        .unwrap();
    let (status, headers, _) = call(&router, request).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with(&format!("mo_api_key={key};"))
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
    );
}

#[tokio::test]
async fn signing_in_with_a_wrong_key_is_refused_on_the_form() {
    let (router, key) = router();
    let request = Request::post("/login")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(format!("key={key}x")))
        .unwrap();
    let (status, headers, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.get("set-cookie").is_none());
    assert!(body.contains("not valid"), "{body}");
}

#[tokio::test]
async fn a_stale_cookie_shows_the_sign_in_form_not_an_error() {
    let (router, _) = router();
    let request = get("/").header("cookie", "mo_api_key=mo_team-a.revoked").body(Body::empty()).unwrap();
    let (status, _, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Sign in"), "{body}");
}

#[tokio::test]
async fn the_cookie_does_not_authorise_a_write() {
    let (router, key) = router();
    let request = Request::post("/api/v1/namespaces/team-a/modelorchestras")
        .header("cookie", format!("mo_api_key={key}"))
        .body(Body::from("{}"))
        .unwrap();
    let (status, _, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}

#[tokio::test]
async fn a_wrong_bearer_key_is_401_with_a_json_reason() {
    let (router, key) = router();
    let request = get("/api/v1/namespaces/team-a/modelorchestras")
        .header("authorization", format!("Bearer {key}x"))
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["www-authenticate"], "Bearer");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["reason"], "Unauthorized");
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_before_anything_else() {
    let (router, key) = router();
    let request = Request::post("/api/v1/namespaces/team-a/modelorchestras")
        .header("x-api-key", &key)
        .body(Body::from(vec![b' '; 2048]))
        .unwrap();
    let (status, _, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
}

#[tokio::test]
async fn an_invalid_cr_is_422_with_every_field_before_any_kubernetes_call() {
    let (router, key) = router();
    let body = r#"{"apiVersion": "models.titanml.co/v1alpha1", "kind": "ModelOrchestra", "metadata": {"namespace": "team-b"}, "spec": {"bad": 1}}"#;
    let request = Request::post("/api/v1/namespaces/team-a/modelorchestras")
        .header("x-api-key", &key)
        .body(Body::from(body))
        .unwrap();
    let (status, _, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let fields: Vec<String> = serde_json::from_str::<Value>(&body).unwrap()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(fields, ["metadata.name", "metadata.namespace", "spec.bad"]);
}

#[tokio::test]
async fn unknown_paths_and_methods_are_json_404_and_405() {
    let (router, key) = router();
    let (status, _, body) = call(&router, get("/nope").header("x-api-key", &key).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["reason"], "NotFound");
    let request = Request::patch("/api/v1/namespaces/team-a/modelorchestras")
        .header("x-api-key", &key)
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["reason"], "MethodNotAllowed");
}

#[tokio::test]
async fn a_path_that_is_no_namespace_name_is_400() {
    let (router, key) = router();
    let request =
        get("/api/v1/namespaces/Team_A/modelorchestras").header("x-api-key", &key).body(Body::empty()).unwrap();
    let (status, _, body) = call(&router, request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}
