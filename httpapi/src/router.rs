//! The application: which path and method reach which handler — the JSON API, its watch,
//! the status page and the OpenAPI document — and the layers every request goes through
//! (request log, panic guard, security headers, key check and rate limit, timeout).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::auth::{authenticate, KeyName};
use crate::error::ApiError;
use crate::keys::KeyStore;
use crate::options::ServeOptions;
use crate::state::{AppState, Shared, Validator};
use crate::{handlers, openapi, page, watch};

/// Routes that end within the request timeout.
fn timed() -> Router<Shared> {
    Router::new()
        .route("/", get(page::index))
        .route("/login", post(page::login))
        .route("/logout", post(page::logout))
        .route("/style.css", get(page::style))
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/api/v1/namespaces/{namespace}/modelorchestras", get(handlers::list).post(handlers::create))
        .route(
            "/api/v1/namespaces/{namespace}/modelorchestras/{name}",
            get(handlers::read).put(handlers::replace).delete(handlers::remove),
        )
        .route("/api/v1/namespaces/{namespace}/modelorchestras/{name}/status", get(handlers::status))
        .route("/api/v1/namespaces/{namespace}/modelorchestras/{name}/refresh", post(handlers::refresh))
        .route("/api/v1/namespaces/{namespace}/modelorchestras/{name}/retry-promotion", post(handlers::retry_promotion))
        .method_not_allowed_fallback(method_not_allowed)
}

/// The watch: a stream without an end, so without the timeout.
fn streaming() -> Router<Shared> {
    Router::new().route("/api/v1/namespaces/{namespace}/watch", get(watch::watch))
}

async fn no_route() -> ApiError {
    ApiError::not_found("no such endpoint: the API is under /api/v1 (see /api/v1/openapi.json)")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        "this endpoint does not take that method (see /api/v1/openapi.json)",
    )
}

async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], openapi::json()).into_response()
}

/// One structured line per request: key name, method, path, status, duration.
async fn log_request(request: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let key = response.extensions().get::<KeyName>().map_or("-", |k| k.0.as_str()).to_string();
    tracing::info!(
        target: "model_orchestra_http::request",
        key = %key,
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        duration_ms = start.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    response
}

/// Every request but the watch ends within the timeout.
async fn timeout(State(state): State<Shared>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(state.timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("the Kubernetes API server did not answer within {:?}; try again", state.timeout),
        )
        .into_response(),
    }
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        "the server failed on this request (a bug: please report it with the request)",
    )
    .into_response()
}

/// The whole application: routes and layers.
pub(crate) fn router(state: Shared) -> Router {
    let timed = timed().route_layer(middleware::from_fn_with_state(state.clone(), timeout));
    Router::new()
        .merge(timed)
        .merge(streaming())
        .fallback(no_route)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(SetResponseHeaderLayer::overriding(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .layer(SetResponseHeaderLayer::if_not_present(header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'",
            ),
        ))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

/// The router without the Kubernetes side: for tests of the HTTP layer.
#[doc(hidden)]
pub fn test_router(keys: KeyStore, config: kube::Config, validator: Validator, options: &ServeOptions) -> Router {
    router(Arc::new(AppState::new(keys, config, validator, options)))
}
