//! The watch: status changes as Server-Sent Events, a stream without an end.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::IntoParams;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{check_name, name_parameter, Namespace};
use crate::handlers::stored;
use crate::schema::ListErrors;
use crate::state::Shared;
use crate::status::StatusSummary;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WatchQuery {
    /// Only this ModelOrchestra.
    name: Option<String>,
}

impl IntoParams for WatchQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let mut name = name_parameter(ParameterIn::Query);
        name.description = Some("Only this ModelOrchestra.".into());
        vec![name]
    }
}

/// One event of the stream as the document describes it (each event on its own, as an
/// OpenAPI 3.1 `text/event-stream` schema does): its name, and its data as JSON of the
/// schema named.
pub(crate) fn event_schema() -> Value {
    let event = |name: &str, data: &str, description: &str| {
        json!({
            "type": "object",
            "description": description,
            "required": ["event", "data"],
            "properties": {
                "event": {"const": name},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": format!("#/components/schemas/{data}")}
                }
            }
        })
    };
    json!({"anyOf": [
        event("status", "StatusSummary", "once for each ModelOrchestra, then whenever its status changes"),
        event("deleted", "WatchDeleted", "a ModelOrchestra was deleted"),
        event("error", "ErrorBody", "the last event: the watch failed, or the key was revoked"),
    ]})
}

/// Status changes as Server-Sent Events: `status` (data: a StatusSummary) once for each
/// ModelOrchestra, then whenever its status changes; `deleted` (data: `{name}`); `error`
/// (data: an ErrorBody) before the stream ends.
#[utoipa::path(get, path = "/api/v1/namespaces/{namespace}/watch", tag = "status",
    params(Namespace, WatchQuery),
    responses((status = 200, content_type = "text/event-stream", description = "the events, as they happen"), ListErrors))]
pub(crate) async fn watch(
    caller: Caller,
    State(state): State<Shared>,
    Namespace(namespace): Namespace,
    query: Result<Query<WatchQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
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
