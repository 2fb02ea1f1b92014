//! The JSON endpoints on ModelOrchestras. Every call to Kubernetes goes through the
//! caller's client, which acts as the key's user (impersonation): the API server's RBAC
//! decides, and its audit log names the key's user on every write.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use model_orchestra_api::ApiVersion;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::cache::clean;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{JsonBody, Namespace, Object};
use crate::schema::{
    AnnotationSet, Deleted, ListErrors, ModelOrchestraList, ModelOrchestraRef, ObjectErrors, RefreshErrors,
    RefreshRequest, Replacement, StoredModelOrchestra, WriteErrors,
};
use crate::state::Shared;
use crate::status::StatusSummary;

/// The field manager of the API's writes (the audit log names the key's user).
const FIELD_MANAGER: &str = "model-orchestra-api";
use model_orchestra_api::keys::REFRESH_ANNOTATION;
use model_orchestra_api::keys::RETRY_PROMOTION_ANNOTATION as RETRY_ANNOTATION;

pub(crate) fn stored(caller: &Caller, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(caller.client.clone(), namespace, &ApiVersion::STORAGE.resource())
}

fn json_bytes(body: bytes::Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// List the ModelOrchestras in a namespace.
#[utoipa::path(get, path = "/api/v1/namespaces/{namespace}/modelorchestras", tag = "modelorchestras",
    params(Namespace),
    responses((status = 200, body = ModelOrchestraList, description = "every ModelOrchestra in the namespace"), ListErrors))]
pub(crate) async fn list(
    caller: Caller,
    State(state): State<Shared>,
    Namespace(namespace): Namespace,
) -> ApiResult<Response> {
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
    params(Object),
    responses((status = 200, body = StoredModelOrchestra, description = "the ModelOrchestra, at the storage version"), ObjectErrors))]
pub(crate) async fn read(
    caller: Caller,
    State(state): State<Shared>,
    Object { namespace, name }: Object,
) -> ApiResult<Response> {
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
    params(Namespace),
    request_body = ModelOrchestraRef,
    responses((status = 201, body = ModelOrchestraRef, description = "created, at the version sent"), WriteErrors))]
pub(crate) async fn create(
    caller: Caller,
    State(state): State<Shared>,
    Namespace(namespace): Namespace,
    body: JsonBody,
) -> ApiResult<Response> {
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
    params(Object),
    request_body = Replacement,
    responses((status = 200, body = ModelOrchestraRef, description = "replaced, at the version sent"), WriteErrors))]
pub(crate) async fn replace(
    caller: Caller,
    State(state): State<Shared>,
    Object { namespace, name }: Object,
    body: JsonBody,
) -> ApiResult<Response> {
    let (version, object, warnings) = checked_body(&state, body.required()?, &namespace, Some(&name))?;
    let api: Api<DynamicObject> = Api::namespaced_with(caller.client.clone(), &namespace, &version.resource());
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    let replaced = api.replace(&name, &params, &object).await;
    state.cache.invalidate(&namespace);
    let replaced = replaced?;
    Ok(with_warnings(Json(clean(replaced)).into_response(), &warnings))
}

/// Delete a ModelOrchestra (its objects go with it, by the garbage collector).
#[utoipa::path(delete, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}", tag = "modelorchestras",
    params(Object),
    responses((status = 200, body = Deleted, description = "deleted, or being deleted"), ObjectErrors))]
pub(crate) async fn remove(
    caller: Caller,
    State(state): State<Shared>,
    Object { namespace, name }: Object,
) -> ApiResult<Json<Deleted>> {
    let result = stored(&caller, &namespace).delete(&name, &DeleteParams::default()).await;
    state.cache.invalidate(&namespace);
    let status = if result?.is_left() { "Deleting" } else { "Deleted" };
    Ok(Json(Deleted { name, namespace, status: status.into() }))
}

/// A ModelOrchestra's status: ready or not and why, each application's replicas, model and
/// promotion.
#[utoipa::path(get, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}/status", tag = "status",
    params(Object),
    responses((status = 200, body = StatusSummary, description = "its status"), ObjectErrors))]
pub(crate) async fn status(caller: Caller, Object { namespace, name }: Object) -> ApiResult<Json<StatusSummary>> {
    Ok(Json(StatusSummary::of(&stored(&caller, &namespace).get(&name).await?)))
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

async fn annotate(state: &Shared, caller: &Caller, object: &Object, annotation: &str, value: &str) -> ApiResult<()> {
    let patch = json!({"metadata": {"annotations": {annotation: value}}});
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    let result = stored(caller, &object.namespace).patch(&object.name, &params, &Patch::Merge(&patch)).await;
    state.cache.invalidate(&object.namespace);
    result?;
    Ok(())
}

/// Download the models again (`models.titanml.co/refresh`): every cached application's, or
/// those named. The applications keep serving on their current download until the new one
/// is ready.
#[utoipa::path(post, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}/refresh", tag = "actions",
    params(Object),
    request_body(content = Option<RefreshRequest>, description = "optional: without it (or with `null`), every cached application"),
    responses((status = 200, body = AnnotationSet, description = "the annotation set: the operator downloads again"), RefreshErrors))]
pub(crate) async fn refresh(
    caller: Caller,
    State(state): State<Shared>,
    object: Object,
    body: JsonBody,
) -> ApiResult<Json<AnnotationSet>> {
    let request: RefreshRequest = match body.0 {
        None => RefreshRequest::default(),
        Some(v) => serde_json::from_value(v).map_err(|e| {
            ApiError::invalid(vec![FieldError {
                field: "(body)".into(),
                message: format!("{e}; expected {{\"applications\": [\"name\", …]}}"),
            }])
        })?,
    };
    let cr = stored(&caller, &object.namespace).get(&object.name).await?;
    let known: Vec<String> =
        cr.data["spec"]["applications"].as_object().map(|a| a.keys().cloned().collect()).unwrap_or_default();
    let unknown: Vec<FieldError> = request
        .applications
        .iter()
        .enumerate()
        .filter(|(_, a)| !known.contains(a))
        .map(|(i, a)| FieldError {
            field: format!("applications[{i}]"),
            message: format!("`{a}` is not an application of {} (it has: {})", object.name, known.join(", ")),
        })
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::invalid(unknown));
    }
    let current = cr.annotations().get(REFRESH_ANNOTATION).map(String::as_str);
    let value = refresh_value(&request.applications, current, &k8s_openapi::jiff::Timestamp::now().to_string());
    annotate(&state, &caller, &object, REFRESH_ANNOTATION, &value).await?;
    Ok(Json(AnnotationSet { annotation: REFRESH_ANNOTATION.into(), value }))
}

/// Verify a failed promotion again (`models.titanml.co/retry-promotion`).
#[utoipa::path(post, path = "/api/v1/namespaces/{namespace}/modelorchestras/{name}/retry-promotion", tag = "actions",
    params(Object),
    responses((status = 200, body = AnnotationSet, description = "the annotation set: the operator verifies again"), ObjectErrors))]
pub(crate) async fn retry_promotion(
    caller: Caller,
    State(state): State<Shared>,
    object: Object,
) -> ApiResult<Json<AnnotationSet>> {
    let value = format!("api-{}", k8s_openapi::jiff::Timestamp::now());
    annotate(&state, &caller, &object, RETRY_ANNOTATION, &value).await?;
    Ok(Json(AnnotationSet { annotation: RETRY_ANNOTATION.into(), value }))
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
