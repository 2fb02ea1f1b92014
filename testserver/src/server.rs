//! HTTP: routes Kubernetes API paths to the store, streams watches, injects faults and
//! keeps a log of every request (the tests' view of who wrote what).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::error::ApiError;
use crate::resources::{self, ResourceType};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Change, ChangeType, Propagation, Store};
use crate::{table, time};

pub type Body = BoxBody<Bytes, Infallible>;

/// Faults to inject, changeable while running (`PUT /testserver/faults`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Faults {
    /// Fraction (0–1) of API requests answered with 500 InternalError before being handled.
    pub error_rate: f64,
    /// Delay added to every API request.
    pub latency_ms: u64,
    /// Watches end after this long (clients must re-watch from their last resourceVersion).
    pub drop_watches_after_ms: Option<u64>,
}

/// One handled request, as `GET /testserver/requests` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    /// get, list, watch, create, update, patch, apply, delete, deletecollection, discovery.
    pub verb: String,
    pub user_agent: String,
    pub field_manager: Option<String>,
    pub code: u16,
}

impl RequestRecord {
    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "apply" | "delete" | "deletecollection")
    }
}

pub struct Shared {
    pub store: Mutex<Store>,
    pub faults: Mutex<Faults>,
    pub log: Mutex<Vec<RequestRecord>>,
    rng: AtomicU64,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl Shared {
    pub fn new(shutdown: tokio::sync::watch::Receiver<bool>, faults: Faults) -> Self {
        Shared {
            store: Mutex::new(Store::new()),
            faults: Mutex::new(faults),
            log: Mutex::new(Vec::new()),
            rng: AtomicU64::new((time::unix_nanos() as u64) | 1),
            shutdown,
        }
    }

    /// xorshift64: fault decisions need no cryptographic randomness.
    fn random(&self) -> f64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The parsed query string.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(q: Option<&str>) -> Self {
        Query(
            q.unwrap_or_default()
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a resource request points.
struct Target {
    rt: ResourceType,
    /// `None`: cluster-scoped, or a list/watch across all namespaces.
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn json_response(code: u16, v: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(v).expect("JSON"))).boxed())
        .expect("valid response")
}

fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.status())
}

pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = Query::parse(req.uri().query());
    let user_agent = req.headers().get("user-agent").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let accept = req.headers().get("accept").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let content_type = req.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();

    if let Some(rest) = path.strip_prefix("/testserver/") {
        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        return Ok(control(&shared, &method, rest, &body));
    }

    let faults = shared.faults.lock().expect("faults lock").clone();
    if faults.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(faults.latency_ms)).await;
    }
    let mut verb = classify(&method, &path, &query);
    let response = if faults.error_rate > 0.0 && shared.random() < faults.error_rate {
        error_response(&ApiError::injected())
    } else {
        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        if verb == "patch" && content_type.starts_with("application/apply-patch") {
            verb = "apply";
        }
        let req =
            ApiRequest { method: &method, path: &path, query: &query, accept: &accept, content_type: &content_type, user_agent: &user_agent, body: &body };
        match route(&shared, &req, &faults) {
            Ok(r) => r,
            Err(e) => error_response(&e),
        }
    };
    shared.log.lock().expect("log lock").push(RequestRecord {
        method: method.to_string(),
        path,
        verb: verb.into(),
        user_agent,
        field_manager: query.get("fieldManager").map(String::from),
        code: response.status().as_u16(),
    });
    Ok(response)
}

fn classify(method: &Method, path: &str, query: &Query) -> &'static str {
    let segments = path.trim_matches('/').split('/').count();
    let is_api = path.starts_with("/api/") && segments > 2 || path.starts_with("/apis/") && segments > 3;
    if !is_api {
        return "discovery";
    }
    match *method {
        Method::GET if query.flag("watch") => "watch",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    }
}

fn control(shared: &Shared, method: &Method, rest: &str, body: &[u8]) -> Response<Body> {
    match (method, rest) {
        (&Method::GET, "requests") => json_response(200, &json!(*shared.log.lock().expect("log lock"))),
        (&Method::GET, "faults") => json_response(200, &json!(*shared.faults.lock().expect("faults lock"))),
        (&Method::PUT, "faults") => match serde_json::from_slice::<Faults>(body) {
            Ok(f) => {
                *shared.faults.lock().expect("faults lock") = f.clone();
                json_response(200, &json!(f))
            }
            Err(e) => error_response(&ApiError::bad_request(&format!("faults: {e}"))),
        },
        _ => error_response(&ApiError::path_not_found(rest)),
    }
}

/// The facts of one API request the handlers need.
struct ApiRequest<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a Query,
    accept: &'a str,
    content_type: &'a str,
    user_agent: &'a str,
    body: &'a [u8],
}

fn route(shared: &Arc<Shared>, req: &ApiRequest, faults: &Faults) -> Result<Response<Body>, ApiError> {
    let path = req.path;
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let store = shared.store.lock().expect("store lock");
    let discovery = match segs.as_slice() {
        ["version"] => Some(json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-kube-testserver", "platform": "linux/amd64"})),
        ["healthz"] | ["readyz"] | ["livez"] => {
            return Ok(Response::builder().status(200).body(Full::new(Bytes::from_static(b"ok")).boxed()).expect("valid"));
        }
        ["api"] => Some(resources::core_versions()),
        ["apis"] => Some(resources::group_list(store.types())),
        ["api", v] => resources::resource_list(store.types(), "", v),
        ["apis", g] => resources::group(store.types(), g),
        ["apis", g, v] => resources::resource_list(store.types(), g, v),
        _ => None,
    };
    if let Some(doc) = discovery {
        return Ok(json_response(200, &doc));
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Err(ApiError::path_not_found(path)),
    };
    let find = |plural: &str| store.find_type(group, version, plural).cloned();
    let not_found = || ApiError::path_not_found(path);
    let target = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|t| t.namespaced) && tail.len() <= 2 => Target {
            rt: find(plural).expect("checked"),
            namespace: Some(ns.to_string()),
            name: tail.first().map(|s| s.to_string()),
            subresource: tail.get(1).map(|s| s.to_string()),
        },
        [plural, tail @ ..] if tail.len() <= 2 => {
            let rt = find(plural).ok_or_else(not_found)?;
            if rt.namespaced && !tail.is_empty() {
                return Err(not_found());
            }
            Target { rt, namespace: None, name: tail.first().map(|s| s.to_string()), subresource: tail.get(1).map(|s| s.to_string()) }
        }
        _ => return Err(not_found()),
    };
    if let Some(sub) = &target.subresource {
        if sub != "status" || !target.rt.status {
            return Err(not_found());
        }
    }
    drop(store);
    resource_request(shared, req, target, faults)
}

fn resource_request(shared: &Arc<Shared>, req: &ApiRequest, t: Target, faults: &Faults) -> Result<Response<Body>, ApiError> {
    let ApiRequest { method, query, accept, content_type, user_agent, body, .. } = *req;
    let ns = t.namespace.clone().unwrap_or_default();
    let sub = t.subresource.as_deref();
    let rt = &t.rt;
    // Updates without ?fieldManager are attributed like the real server does: by user agent.
    let manager =
        query.get("fieldManager").map(String::from).unwrap_or_else(|| user_agent.split('/').next().filter(|s| !s.is_empty()).unwrap_or("unknown").to_string());
    let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or_default()).map_err(|e| ApiError::bad_request(&e))?;
    let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or_default()).map_err(|e| ApiError::bad_request(&e))?;
    let wants_table = accept.contains("as=Table");
    let wants_metadata = accept.contains("as=PartialObjectMetadata");
    let mut store = shared.store.lock().expect("store lock");
    let ok = |code: u16, v: Value| Ok(json_response(code, &v));
    match (method, &t.name) {
        (&Method::GET, Some(name)) => {
            let obj = store.get(rt, &ns, name)?;
            if wants_table {
                return ok(200, table::table(rt, &[obj], store.resource_version()));
            }
            ok(200, if wants_metadata { partial_metadata(&obj) } else { obj })
        }
        (&Method::GET, None) if query.flag("watch") => {
            let since = match query.get("resourceVersion").filter(|s| !s.is_empty()) {
                Some(s) => Some(s.parse::<u64>().map_err(|_| ApiError::bad_request(&format!("invalid resourceVersion {s:?}")))?),
                None => None,
            };
            let start = store.watch(rt, t.namespace.as_deref(), &labels, &fields, since)?;
            drop(store);
            let timeout = query.get("timeoutSeconds").and_then(|s| s.parse::<u64>().ok()).map(Duration::from_secs).unwrap_or(Duration::from_secs(1800));
            let timeout = faults.drop_watches_after_ms.map(Duration::from_millis).map_or(timeout, |d| d.min(timeout));
            let spec = WatchSpec {
                rt: rt.clone(),
                namespace: t.namespace,
                labels,
                fields,
                bookmarks: query.flag("allowWatchBookmarks"),
                metadata_only: wants_metadata,
            };
            Ok(watch_response(shared.clone(), spec, start, timeout))
        }
        (&Method::GET, None) => {
            let (items, rv) = store.list(rt, t.namespace.as_deref(), &labels, &fields);
            if wants_table {
                return ok(200, table::table(rt, &items, rv));
            }
            if wants_metadata {
                let items: Vec<Value> = items.iter().map(partial_metadata).collect();
                return ok(
                    200,
                    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
                );
            }
            ok(
                200,
                json!({"apiVersion": rt.api_version(), "kind": format!("{}List", rt.kind), "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
            )
        }
        (&Method::POST, None) => {
            let body = decode(body, content_type)?;
            ok(201, store.create(rt, &ns, body, &manager)?)
        }
        (&Method::PUT, Some(name)) => {
            let body = decode(body, content_type)?;
            ok(200, store.replace(rt, &ns, name, body, &manager, sub)?)
        }
        (&Method::PATCH, Some(name)) => {
            let patch = decode(body, content_type)?;
            let kind = content_type.split(';').next().unwrap_or_default().trim();
            match kind {
                "application/apply-patch+yaml" => {
                    let manager = query
                        .get("fieldManager")
                        .filter(|m| !m.is_empty())
                        .ok_or_else(|| ApiError::bad_request("PATCH with application/apply-patch+yaml requires the fieldManager query parameter"))?;
                    let existed = store.get(rt, &ns, name).is_ok();
                    let obj = store.apply(rt, &ns, name, patch, manager, query.flag("force"), sub)?;
                    ok(if existed { 200 } else { 201 }, obj)
                }
                "application/merge-patch+json" => ok(200, store.merge_patch(rt, &ns, name, &patch, &manager, sub)?),
                // Built-in types only, as on a real server; treated as a merge patch here.
                "application/strategic-merge-patch+json" if rt.crd.is_none() => ok(200, store.merge_patch(rt, &ns, name, &patch, &manager, sub)?),
                "application/json-patch+json" => {
                    let mut patched = store.get(rt, &ns, name)?;
                    crate::jsonpatch::apply(&mut patched, &patch).map_err(|e| ApiError::invalid(rt, name, &e))?;
                    ok(200, store.replace(rt, &ns, name, without_rv(patched), &manager, sub)?)
                }
                other => Err(ApiError::unsupported_media_type(other)),
            }
        }
        (&Method::DELETE, Some(name)) => {
            let options: Value = if body.is_empty() { json!({}) } else { decode(body, "application/json").unwrap_or(json!({})) };
            let policy = query.get("propagationPolicy").or(options["propagationPolicy"].as_str()).unwrap_or("Background");
            let policy = match policy {
                "Orphan" => Propagation::Orphan,
                "Foreground" => Propagation::Foreground,
                _ => Propagation::Background,
            };
            let live = store.get(rt, &ns, name)?;
            for (field, key) in [("uid", "uid"), ("resourceVersion", "resourceVersion")] {
                if let Some(want) = options["preconditions"][field].as_str() {
                    if live["metadata"][key].as_str() != Some(want) {
                        return Err(ApiError::precondition_failed(rt, name, field, want));
                    }
                }
            }
            ok(200, store.delete(rt, &ns, name, policy)?)
        }
        (&Method::DELETE, None) => {
            let (items, _) = store.list(rt, t.namespace.as_deref(), &labels, &fields);
            for item in &items {
                let item_ns = item["metadata"]["namespace"].as_str().unwrap_or_default();
                let _ = store.delete(rt, item_ns, item["metadata"]["name"].as_str().unwrap_or_default(), Propagation::Background);
            }
            ok(200, json!({"apiVersion": rt.api_version(), "kind": format!("{}List", rt.kind), "metadata": {}, "items": items}))
        }
        _ => Err(ApiError::method_not_allowed(method.as_str())),
    }
}

/// The `as=PartialObjectMetadata` form of an object: its metadata only.
fn partial_metadata(obj: &Value) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]})
}

fn without_rv(mut obj: Value) -> Value {
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    obj
}

fn decode(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") || content_type.contains("cbor") {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let parsed = if content_type.contains("yaml") {
        serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| ApiError::bad_request(&format!("cannot decode the request body: {e}")))
}

struct WatchSpec {
    rt: ResourceType,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    bookmarks: bool,
    metadata_only: bool,
}

impl WatchSpec {
    /// The event this watch sends for `change`, if any. Label-selector watches see an object
    /// that starts or stops matching as ADDED or DELETED, as on a real server.
    fn event(&self, change: &Change) -> Option<Value> {
        if change.group != self.rt.group || change.plural != self.rt.plural {
            return None;
        }
        if self.namespace.as_deref().is_some_and(|ns| ns != change.namespace) {
            return None;
        }
        let matches = |o: &Value| self.labels.matches(o) && self.fields.matches(o);
        let now = matches(&change.object);
        let before = change.old.as_ref().map(matches);
        let kind = match (change.kind, before, now) {
            (ChangeType::Added, _, true) => "ADDED",
            (ChangeType::Modified, Some(true), true) => "MODIFIED",
            (ChangeType::Modified, Some(false), true) => "ADDED",
            (ChangeType::Modified, Some(true), false) => "DELETED",
            (ChangeType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        let mut object = change.object.clone();
        object["apiVersion"] = json!(self.rt.api_version());
        if self.metadata_only {
            object = partial_metadata(&object);
        }
        Some(json!({"type": kind, "object": object}))
    }
}

fn watch_response(shared: Arc<Shared>, spec: WatchSpec, start: crate::store::WatchStart, timeout: Duration) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        let mut shutdown = shared.shutdown.clone();
        let line = |v: Value| {
            let mut b = serde_json::to_vec(&v).expect("JSON");
            b.push(b'\n');
            Bytes::from(b)
        };
        let mut last_rv = 0;
        for change in &start.initial {
            last_rv = last_rv.max(change.rv);
            if let Some(ev) = spec.event(change) {
                if tx.send(line(ev)).await.is_err() {
                    return;
                }
            }
        }
        let mut feed = start.feed;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut bookmark = tokio::time::interval(Duration::from_secs(5));
        bookmark.tick().await;
        loop {
            tokio::select! {
                received = feed.recv() => match received {
                    Ok(change) => {
                        // The feed starts where the initial events end; this only guards it.
                        if change.rv <= last_rv {
                            continue;
                        }
                        last_rv = change.rv;
                        if let Some(ev) = spec.event(&change) {
                            if tx.send(line(ev)).await.is_err() {
                                return;
                            }
                        }
                    }
                    // A watcher that fell behind is closed, as a real server does.
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                },
                _ = bookmark.tick(), if spec.bookmarks && last_rv > 0 => {
                    let (api_version, kind) = if spec.metadata_only { ("meta.k8s.io/v1".to_string(), "PartialObjectMetadata".to_string()) } else { (spec.rt.api_version(), spec.rt.kind.clone()) };
                    let ev = json!({"type": "BOOKMARK", "object": {"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": last_rv.to_string()}}});
                    if tx.send(line(ev)).await.is_err() {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx)) });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("transfer-encoding", "chunked")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("valid response")
}
