//! The endpoints. Every call to Kubernetes goes through the caller's client, which acts as
//! the key's user (impersonation): the API server's RBAC decides, and its audit log names
//! the key's user on every write.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::Stream;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use model_orchestra_api::names::{is_dns_label, is_dns_subdomain};
use model_orchestra_api::ApiVersion;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult, ErrorBody, FieldError};
use crate::server::{Caller, Shared};
use crate::status::StatusSummary;

/// The field manager of the API's writes (the audit log names the key's user).
const FIELD_MANAGER: &str = "model-orchestra-api";
pub(crate) const REFRESH_ANNOTATION: &str = "models.titanml.co/refresh";
pub(crate) const RETRY_ANNOTATION: &str = "models.titanml.co/retry-promotion";

/// Routes that end within the request timeout.
pub(crate) fn timed() -> Router<Shared> {
    Router::new()
        .route("/", get(crate::page::index))
        .route("/login", post(crate::page::login))
        .route("/logout", post(crate::page::logout))
        .route("/style.css", get(crate::page::style))
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/namespaces/{namespace}/modelorchestras", get(list).post(create))
        .route("/api/v1/namespaces/{namespace}/modelorchestras/{name}", get(read).put(replace).delete(remove))
        .route("/api/v1/namespaces/{namespace}/modelorchestras/{name}/status", get(status))
        .route("/api/v1/namespaces/{namespace}/modelorchestras/{name}/refresh", post(refresh))
        .route("/api/v1/namespaces/{namespace}/modelorchestras/{name}/retry-promotion", post(retry_promotion))
        .method_not_allowed_fallback(method_not_allowed)
}

/// The watch: a stream without an end.
pub(crate) fn streaming() -> Router<Shared> {
    Router::new().route("/api/v1/namespaces/{namespace}/watch", get(watch))
}

pub(crate) async fn no_route() -> ApiError {
    ApiError::not_found("no such endpoint: the API is under /api/v1 (see /api/v1/openapi.json)")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        "this endpoint does not take that method (see /api/v1/openapi.json)",
    )
}

async fn openapi() -> Response {
    let mut r = crate::openapi::json().into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// Path parameters, a 400 naming what is wrong when they do not parse.
pub(crate) struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(t)) => Ok(Params(t)),
            Err(e) => Err(ApiError::bad_request("BadRequest", e.body_text())),
        }
    }
}

/// A JSON body within the size limit: 413 over it, 400 when it is not JSON.
pub(crate) struct JsonBody(pub Option<Value>);

impl FromRequest<Shared> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Shared) -> Result<Self, Self::Rejection> {
        let limit = state.max_body;
        let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
        if declared.and_then(|v| v.parse::<u64>().ok()).is_some_and(|n| n > limit as u64) {
            return Err(ApiError::too_large(limit));
        }
        let bytes = axum::body::to_bytes(request.into_body(), limit).await.map_err(|e| {
            let inner = e.into_inner();
            if inner.downcast_ref::<http_body_util::LengthLimitError>().is_some()
                || inner.source().is_some_and(|s| s.downcast_ref::<http_body_util::LengthLimitError>().is_some())
            {
                ApiError::too_large(limit)
            } else {
                ApiError::bad_request("BadRequest", format!("reading the request body: {inner}"))
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(None));
        }
        serde_json::from_slice(&bytes)
            .map(|v| JsonBody(Some(v)))
            .map_err(|e| ApiError::bad_request("MalformedJson", format!("the request body is not valid JSON: {e}")))
    }
}

impl JsonBody {
    fn required(self) -> ApiResult<Value> {
        self.0.ok_or_else(|| {
            ApiError::bad_request("BadRequest", "the request body is empty: send a ModelOrchestra as JSON")
        })
    }
}

fn check_namespace(namespace: &str) -> ApiResult<()> {
    if is_dns_label(namespace) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "BadRequest",
            format!("`{namespace}` is not a namespace name (a DNS label: lowercase letters, digits and `-`)"),
        ))
    }
}

fn check_name(name: &str) -> ApiResult<()> {
    if is_dns_subdomain(name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "BadRequest",
            format!("`{name}` is not a ModelOrchestra name (lowercase letters, digits, `-` and `.`)"),
        ))
    }
}

fn stored(caller: &Caller, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(caller.client.clone(), namespace, &ApiVersion::STORAGE.resource())
}

use crate::cache::clean;

fn json_bytes(body: bytes::Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelOrchestraList {
    /// `models.titanml.co/v1alpha2`: items are read at the storage version, which holds
    /// every version's fields.
    api_version: String,
    kind: String,
    resource_version: Option<String>,
    #[schema(value_type = Vec<crate::openapi::ModelOrchestraRef>)]
    items: Vec<Value>,
}

/// List the ModelOrchestras in a namespace.
#[utoipa::path(get, path = "/api/v1/namespaces/{namespace}/modelorchestras", tag = "modelorchestras",
    params(("namespace" = String, Path)),
    responses((status = 200, body = ModelOrchestraList), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn list(
    caller: Caller,
    State(state): State<Shared>,
    Params(namespace): Params<String>,
) -> ApiResult<Response> {
    check_namespace(&namespace)?;
    if state.cache.enabled() {
        let snapshot = state.cache.snapshot(&caller.record.user(), &caller.client, &namespace).await?;
        return Ok(json_bytes(snapshot.list.clone()));
    }
    let list = stored(&caller, &namespace).list(&ListParams::default()).await?;
    Ok(Json(ModelOrchestraList {
        api_version: ApiVersion::STORAGE.api_version(),
        kind: "ModelOrchestraList".into(),
        resource_version: list.metadata.resource_version,
        items: list.items.into_iter().map(clean).collect(),
    })
    .into_response())
}

/// Read a ModelOrchestra (at the storage version).
#[utoipa::path(get, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}", tag = "modelorchestras",
    params(("namespace" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = crate::openapi::ModelOrchestraRef), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn read(
    caller: Caller,
    State(state): State<Shared>,
    Params((namespace, name)): Params<(String, String)>,
) -> ApiResult<Response> {
    check_namespace(&namespace)?;
    check_name(&name)?;
    if state.cache.enabled() {
        let snapshot = state.cache.snapshot(&caller.record.user(), &caller.client, &namespace).await?;
        if let Some(item) = snapshot.items.get(&name) {
            return Ok(json_bytes(item.clone()));
        }
    }
    // Not in a recent list (or no cache): the API server says whether it exists.
    Ok(Json(clean(stored(&caller, &namespace).get(&name).await?)).into_response())
}

/// The body checked as the operator will check it: the envelope, the name and namespace
/// against the path, then the operator's own validation (parse and render). Every error
/// is returned at once, each with its field.
fn checked_body(
    state: &Shared,
    mut body: Value,
    namespace: &str,
    path_name: Option<&str>,
) -> ApiResult<(ApiVersion, DynamicObject, Vec<String>)> {
    let mut errors = Vec::new();
    if !body.is_object() {
        return Err(ApiError::invalid(vec![FieldError {
            field: "(document)".into(),
            message: "expected a ModelOrchestra object".into(),
        }]));
    }
    match body["metadata"]["name"].as_str() {
        None => errors.push(FieldError { field: "metadata.name".into(), message: "required".into() }),
        Some(name) if path_name.is_some_and(|p| p != name) => errors.push(FieldError {
            field: "metadata.name".into(),
            message: format!("is `{name}`, but the request is for `{}`", path_name.unwrap_or_default()),
        }),
        Some(_) => {}
    }
    match body["metadata"]["namespace"].as_str() {
        Some(ns) if ns != namespace => errors.push(FieldError {
            field: "metadata.namespace".into(),
            message: format!(
                "is `{ns}`, but the request is for namespace `{namespace}`: leave it out or make them equal"
            ),
        }),
        _ => {}
    }
    if path_name.is_some() && body["metadata"]["resourceVersion"].as_str().is_none_or(str::is_empty) {
        errors.push(FieldError {
            field: "metadata.resourceVersion".into(),
            message: "required: GET the object and send back its metadata.resourceVersion, so a change you have not seen is not overwritten".into(),
        });
    }
    let warnings = match (state.validator)(&body, namespace) {
        Ok(warnings) => warnings,
        Err(found) => {
            errors.extend(found.into_iter().map(|e| FieldError { field: e.field, message: e.message }));
            vec![]
        }
    };
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    let version = body["apiVersion"].as_str().and_then(ApiVersion::from_api_version).ok_or_else(|| {
        ApiError::invalid(vec![FieldError {
            field: "apiVersion".into(),
            message: "not a ModelOrchestra version".into(),
        }])
    })?;
    // The status is the operator's to write.
    body.as_object_mut().expect("checked").remove("status");
    body["metadata"]["namespace"] = json!(namespace);
    let object: DynamicObject = serde_json::from_value(body)
        .map_err(|e| ApiError::invalid(vec![FieldError { field: "metadata".into(), message: e.to_string() }]))?;
    Ok((version, object, warnings))
}

/// `Warning: 299 - "…"` headers, as the Kubernetes API sends them.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text: String = w.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
        let text = text.replace('"', "'");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

/// Create a ModelOrchestra (`v1alpha1` or `v1alpha2`; it keeps the contract of the version
/// it is created at). Validated first, as the operator will: an invalid one is refused
/// with every error and its field, and nothing is written.
#[utoipa::path(post, path = "/api/v1/namespaces/{namespace}/modelorchestras", tag = "modelorchestras",
    params(("namespace" = String, Path)),
    request_body = crate::openapi::ModelOrchestraRef,
    responses((status = 201, body = crate::openapi::ModelOrchestraRef), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody, description = "AlreadyExists"), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn create(
    caller: Caller,
    State(state): State<Shared>,
    Params(namespace): Params<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    check_namespace(&namespace)?;
    let (version, object, warnings) = checked_body(&state, body.required()?, &namespace, None)?;
    let api: Api<DynamicObject> = Api::namespaced_with(caller.client.clone(), &namespace, &version.resource());
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    let created = api.create(&params, &object).await;
    state.cache.invalidate(&namespace);
    let created = created?;
    Ok(with_warnings((StatusCode::CREATED, Json(clean(created))).into_response(), &warnings))
}

/// Replace a ModelOrchestra. `metadata.resourceVersion` is required: a stale one is a 409.
#[utoipa::path(put, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}", tag = "modelorchestras",
    params(("namespace" = String, Path), ("name" = String, Path)),
    request_body = crate::openapi::ModelOrchestraRef,
    responses((status = 200, body = crate::openapi::ModelOrchestraRef), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "a stale resourceVersion"),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn replace(
    caller: Caller,
    State(state): State<Shared>,
    Params((namespace, name)): Params<(String, String)>,
    body: JsonBody,
) -> ApiResult<Response> {
    check_namespace(&namespace)?;
    check_name(&name)?;
    let (version, object, warnings) = checked_body(&state, body.required()?, &namespace, Some(&name))?;
    let api: Api<DynamicObject> = Api::namespaced_with(caller.client.clone(), &namespace, &version.resource());
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    let replaced = api.replace(&name, &params, &object).await;
    state.cache.invalidate(&namespace);
    let replaced = replaced?;
    Ok(with_warnings(Json(clean(replaced)).into_response(), &warnings))
}

#[derive(Serialize, Deserialize, ToSchema)]
pub(crate) struct Deleted {
    name: String,
    namespace: String,
    /// `Deleted`, or `Deleting` while finalizers run.
    status: String,
}

/// Delete a ModelOrchestra (its objects go with it, by the garbage collector).
#[utoipa::path(delete, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}", tag = "modelorchestras",
    params(("namespace" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = Deleted), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn remove(
    caller: Caller,
    Params((namespace, name)): Params<(String, String)>,
) -> ApiResult<Json<Deleted>> {
    check_namespace(&namespace)?;
    check_name(&name)?;
    let result = stored(&caller, &namespace).delete(&name, &DeleteParams::default()).await?;
    let status = if result.is_left() { "Deleting" } else { "Deleted" };
    Ok(Json(Deleted { name, namespace, status: status.into() }))
}

/// A ModelOrchestra's status: ready or not and why, each application's replicas, model and
/// promotion.
#[utoipa::path(get, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}/status", tag = "status",
    params(("namespace" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = StatusSummary), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn status(
    caller: Caller,
    Params((namespace, name)): Params<(String, String)>,
) -> ApiResult<Json<StatusSummary>> {
    check_namespace(&namespace)?;
    check_name(&name)?;
    Ok(Json(StatusSummary::of(&stored(&caller, &namespace).get(&name).await?)))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefreshRequest {
    /// The applications whose models to download again; none: every cached application.
    #[serde(default)]
    applications: Vec<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub(crate) struct AnnotationSet {
    annotation: String,
    value: String,
}

/// The refresh value for `applications` (all when empty). A value that lists application
/// names selects them; the same value twice downloads nothing, so a repeated request for the
/// same applications alternates the list's form (`a,b` / `a,b,`), which selects the same.
fn refresh_value(applications: &[String], current: Option<&str>, now: &str) -> String {
    if applications.is_empty() {
        return format!("api-{now}");
    }
    let mut names: Vec<&str> = applications.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    let value = names.join(",");
    if current == Some(value.as_str()) {
        format!("{value},")
    } else {
        value
    }
}

async fn annotate(
    state: &Shared,
    caller: &Caller,
    namespace: &str,
    name: &str,
    annotation: &str,
    value: &str,
) -> ApiResult<()> {
    let patch = json!({"metadata": {"annotations": {annotation: value}}});
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    let result = stored(caller, namespace).patch(name, &params, &Patch::Merge(&patch)).await;
    state.cache.invalidate(namespace);
    result?;
    Ok(())
}

/// Download the models again (`models.titanml.co/refresh`): every cached application's, or
/// those named. The applications keep serving on their current download until the new one
/// is ready.
#[utoipa::path(post, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}/refresh", tag = "actions",
    params(("namespace" = String, Path), ("name" = String, Path)),
    request_body(content = Option<RefreshRequest>, description = "optional"),
    responses((status = 200, body = AnnotationSet), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn refresh(
    caller: Caller,
    State(state): State<Shared>,
    Params((namespace, name)): Params<(String, String)>,
    body: JsonBody,
) -> ApiResult<Json<AnnotationSet>> {
    check_namespace(&namespace)?;
    check_name(&name)?;
    let request: RefreshRequest = match body.0 {
        None => RefreshRequest::default(),
        Some(v) => serde_json::from_value(v).map_err(|e| {
            ApiError::invalid(vec![FieldError {
                field: "(body)".into(),
                message: format!("{e}; expected {{\"applications\": [\"name\", …]}}"),
            }])
        })?,
    };
    let cr = stored(&caller, &namespace).get(&name).await?;
    let known: Vec<String> =
        cr.data["spec"]["applications"].as_object().map(|a| a.keys().cloned().collect()).unwrap_or_default();
    let unknown: Vec<FieldError> = request
        .applications
        .iter()
        .enumerate()
        .filter(|(_, a)| !known.contains(a))
        .map(|(i, a)| FieldError {
            field: format!("applications[{i}]"),
            message: format!("`{a}` is not an application of {name} (it has: {})", known.join(", ")),
        })
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::invalid(unknown));
    }
    let current = cr.annotations().get(REFRESH_ANNOTATION).map(String::as_str);
    let value = refresh_value(&request.applications, current, &k8s_openapi::jiff::Timestamp::now().to_string());
    annotate(&state, &caller, &namespace, &name, REFRESH_ANNOTATION, &value).await?;
    Ok(Json(AnnotationSet { annotation: REFRESH_ANNOTATION.into(), value }))
}

/// Verify a failed promotion again (`models.titanml.co/retry-promotion`).
#[utoipa::path(post, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}/retry-promotion", tag = "actions",
    params(("namespace" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = AnnotationSet), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn retry_promotion(
    caller: Caller,
    State(state): State<Shared>,
    Params((namespace, name)): Params<(String, String)>,
) -> ApiResult<Json<AnnotationSet>> {
    check_namespace(&namespace)?;
    check_name(&name)?;
    let value = format!("api-{}", k8s_openapi::jiff::Timestamp::now());
    annotate(&state, &caller, &namespace, &name, RETRY_ANNOTATION, &value).await?;
    Ok(Json(AnnotationSet { annotation: RETRY_ANNOTATION.into(), value }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct WatchQuery {
    /// Only this ModelOrchestra.
    name: Option<String>,
}

/// Status changes as Server-Sent Events: `status` (data: a StatusSummary) once for each
/// ModelOrchestra, then whenever its status changes; `deleted` (data: `{name}`); `error`
/// (data: an ErrorBody) before the stream ends.
#[utoipa::path(get, path = "/api/v1/namespaces/{namespace}/watch", tag = "status",
    params(("namespace" = String, Path), WatchQuery),
    responses((status = 200, content_type = "text/event-stream", body = StatusSummary), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = []), ("apiKey" = [])))]
pub(crate) async fn watch(
    caller: Caller,
    State(state): State<Shared>,
    Params(namespace): Params<String>,
    query: Result<Query<WatchQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    check_namespace(&namespace)?;
    let Query(query) = query.map_err(|e| ApiError::bad_request("BadRequest", e.body_text()))?;
    if let Some(name) = &query.name {
        check_name(name)?;
    }
    let api = stored(&caller, &namespace);
    let mut config = watcher::Config::default();
    let mut probe = ListParams::default().limit(1);
    if let Some(name) = &query.name {
        config = config.fields(&format!("metadata.name={name}"));
        probe = probe.fields(&format!("metadata.name={name}"));
    }
    // Refusals (403) are answered as such, before the stream starts.
    tokio::time::timeout(Duration::from_secs(10), api.list(&probe)).await.map_err(|_| {
        ApiError::new(StatusCode::GATEWAY_TIMEOUT, "Timeout", "the Kubernetes API server did not answer")
    })??;
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(16);
    tokio::spawn(forward_status(api, config, tx, state, caller.record.name.clone()));
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Sends a `status` event whenever a summary changes, until the client goes away.
async fn forward_status(
    api: Api<DynamicObject>,
    config: watcher::Config,
    tx: tokio::sync::mpsc::Sender<Event>,
    state: Shared,
    key: String,
) {
    use futures::StreamExt;
    let mut last: HashMap<String, StatusSummary> = HashMap::new();
    let mut stream = watcher::watcher(api, config).boxed();
    // A revoked key's watch ends too.
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        let event = tokio::select! {
            e = stream.next() => e,
            _ = tx.closed() => return,
            _ = check.tick() => {
                if state.keys.names().contains(&key) {
                    continue;
                }
                let body = ApiError::unauthorized().body();
                let _ = tx.send(Event::default().event("error").json_data(&body).expect("serialises")).await;
                return;
            }
        };
        let Some(event) = event else { return };
        let out = match event {
            Ok(watcher::Event::Apply(cr)) | Ok(watcher::Event::InitApply(cr)) => {
                let summary = StatusSummary::of(&cr);
                if last.get(&summary.name) == Some(&summary) {
                    continue;
                }
                last.insert(summary.name.clone(), summary.clone());
                Event::default().event("status").json_data(&summary).expect("serialises")
            }
            Ok(watcher::Event::Delete(cr)) => {
                last.remove(&cr.name_any());
                Event::default().event("deleted").json_data(json!({"name": cr.name_any()})).expect("serialises")
            }
            Ok(_) => continue,
            Err(e) => {
                let body =
                    ApiError::new(StatusCode::BAD_GATEWAY, "WatchFailed", format!("the watch failed: {e}")).body();
                let _ = tx.send(Event::default().event("error").json_data(&body).expect("serialises")).await;
                return;
            }
        };
        if tx.send(out).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_without_applications_is_a_fresh_value_that_names_none() {
        assert_eq!(refresh_value(&[], None, "2030-01-01T00:00:00Z"), "api-2030-01-01T00:00:00Z");
    }

    #[test]
    fn a_repeated_refresh_of_the_same_applications_is_a_new_value_selecting_the_same() {
        let apps = vec!["embedder".to_string(), "chat".to_string()];
        let first = refresh_value(&apps, None, "t");
        assert_eq!(first, "chat,embedder");
        let second = refresh_value(&apps, Some(&first), "t");
        assert_eq!(second, "chat,embedder,");
        assert_eq!(refresh_value(&apps, Some(&second), "t"), first);
    }
}
