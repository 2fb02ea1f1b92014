//! The model gateway's requests: each routed by its `model` to the application serving it
//! and streamed through as the engine writes it; a request for an application that does
//! not serve (asleep, or waking) is held until it does or its deadline passes, and wakes
//! it — one scale-up however many requests wait. A request the engine fails before its
//! answer begins (the connection closed or reset, a 503) is sent again, a bounded number of
//! times; once the first byte of an answer is on its way to the client, never.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use super::activity::{publish_every, Activity};
use super::metrics::Metrics;
use super::routes::{normalise, App, Table};
use super::scale::{Scaled, Scaler};

/// The largest request body read (a chat's whole context fits).
pub const MAX_BODY: usize = 16 * 1024 * 1024;
/// How long a request for an application that sleeps not is held while no replica serves
/// (a rollout's gap, a restart).
const HOLD_AWAKE: Duration = Duration::from_secs(30);
/// Between two attempts to reach an application that does not serve yet.
const RETRY: Duration = Duration::from_millis(100);
/// The longest an engine may take to start answering (a long prompt on a CPU).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);
/// How many more times a request the engine failed before its answer began is sent. Each
/// try opens its connection through the application's Service anew, so kube-proxy picks the
/// replica again: a replica that is terminating has left the Service's endpoints, or soon
/// will. Nothing reached the client yet, and an inference request changes nothing it could
/// repeat.
const RETRIES: u32 = 2;
/// Between two such tries.
const RETRY_BEFORE_ANSWER: Duration = Duration::from_millis(50);
/// How often idle applications are looked for (and activity in flight published).
pub const IDLE_CHECK: Duration = Duration::from_secs(1);
/// The longest a call to the API server for sleep is waited for: a slow one must not hold
/// up the next check.
const API_CALL: Duration = Duration::from_secs(5);

pub type GatewayBody = BoxBody<Bytes, hyper::Error>;

/// Where one application stands, as this gateway saw it.
#[derive(Default)]
struct AppState {
    /// Requests being answered (their response bodies included).
    in_flight: AtomicUsize,
    held: AtomicUsize,
    last_activity: Mutex<Option<Instant>>,
    /// When the last request here ended (or, in flight, was last seen), for the stack.
    last_request: Mutex<Option<SystemTime>>,
    /// The last request time this gateway published for the stack ([`Activity`]).
    published: Mutex<Option<SystemTime>>,
    /// Before when the stack cannot be idle, from what the other gateways published.
    busy_elsewhere_until: Mutex<Option<Instant>>,
    /// A scale-up this gateway made and no request has reached the application since: when.
    waking_since: Mutex<Option<Instant>>,
    /// Scaled to zero (by this gateway, or found so) and not woken since.
    asleep: AtomicBool,
    /// Scaled up by a request, and not put to sleep since: idle, it sleeps again even if it
    /// never served (a wake-up that fails does not keep its pods).
    woken: AtomicBool,
    /// Serialises scale-ups and scale-downs of the application.
    scaling: tokio::sync::Mutex<()>,
}

/// The gateway: routes, per-application state, the upstream client, the scaler.
pub struct Gateway {
    routes: watch::Receiver<Arc<Table>>,
    /// Notified whenever the routes (the CR, its status) change.
    changed: Arc<Notify>,
    apps: Mutex<HashMap<String, Arc<AppState>>>,
    client: Client<HttpConnector, Full<Bytes>>,
    scaler: Arc<dyn Scaler>,
    activity: Arc<dyn Activity>,
    pub metrics: Metrics,
    started: Instant,
    /// Told to stop: not ready any more (see `super::run`).
    leaving: AtomicBool,
    /// Its connections are to close once their answers end.
    closing: watch::Sender<bool>,
}

/// Counts a request in flight until dropped (with the response body it travels in).
struct InFlight(Arc<AppState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.last_activity.lock().expect("not poisoned") = Some(Instant::now());
        *self.0.last_request.lock().expect("not poisoned") = Some(SystemTime::now());
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An engine's response body, streamed frame by frame, holding its request in flight.
struct Streamed {
    inner: Incoming,
    _in_flight: InFlight,
}

impl Body for Streamed {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

pub fn full_body(body: impl Into<Bytes>) -> GatewayBody {
    full(body)
}

fn full(body: impl Into<Bytes>) -> GatewayBody {
    Full::new(body.into()).map_err(|never: Infallible| match never {}).boxed()
}

fn json_response(code: StatusCode, body: &Value) -> Response<GatewayBody> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(serde_json::to_vec(body).expect("JSON values serialise")))
        .expect("a valid response")
}

/// An error in the API's own shape: OpenAI's under `/v1`, Ollama's elsewhere.
fn error(openai: bool, code: StatusCode, message: &str, extra: Option<(&str, Value)>) -> Response<GatewayBody> {
    let mut body = if openai {
        let kind = if code.is_server_error() { "server_error" } else { "invalid_request_error" };
        json!({"error": {"message": message, "type": kind, "code": code.as_u16()}})
    } else {
        json!({"error": message})
    };
    if let Some((key, value)) = extra {
        body[key] = value;
    }
    json_response(code, &body)
}

/// Headers that belong to one connection, not to the request or response (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn end_to_end(headers: &HeaderMap) -> impl Iterator<Item = (&header::HeaderName, &header::HeaderValue)> {
    headers.iter().filter(|(name, _)| !HOP_BY_HOP.contains(&name.as_str()) && *name != header::HOST)
}

/// The paths whose JSON body names the model to route by.
fn routed(path: &str) -> bool {
    matches!(
        path,
        "/v1/chat/completions"
            | "/v1/completions"
            | "/v1/embeddings"
            | "/api/generate"
            | "/api/chat"
            | "/api/embed"
            | "/api/embeddings"
            | "/api/show"
    )
}

/// Why a forward did not produce a response.
enum Failed {
    /// Nothing accepted the connection: no replica serves.
    NotServing,
    /// The engine took the connection but failed the request before its answer began (it
    /// closed or reset the connection, or sent something that is not HTTP): nothing reached
    /// the client, so the request may be sent again.
    BeforeAnswer(String),
    /// The engine did not start answering within [`ANSWER_TIMEOUT`].
    Upstream(String),
}

impl Gateway {
    pub fn new(
        routes: watch::Receiver<Arc<Table>>,
        changed: Arc<Notify>,
        scaler: Arc<dyn Scaler>,
        activity: Arc<dyn Activity>,
    ) -> Gateway {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        connector.set_nodelay(true);
        // No connection is kept for another request: each opens its own through the
        // application's Service, so kube-proxy chooses the replica for every request. A
        // kept one would stay with its replica after the replica left the Service (while it
        // drains, see `crate::drain`) and carry a new request there until
        // Ollama stops and cuts it. An in-cluster connect costs well under a millisecond.
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).pool_max_idle_per_host(0).build(connector);
        Gateway {
            routes,
            changed,
            apps: Mutex::new(HashMap::new()),
            client,
            scaler,
            activity,
            metrics: Metrics::new(),
            started: Instant::now(),
            leaving: AtomicBool::new(false),
            closing: watch::Sender::new(false),
        }
    }

    /// Told to stop: readiness fails from now on.
    pub fn leaving(&self) {
        self.leaving.store(true, Ordering::SeqCst);
    }

    pub fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::SeqCst)
    }

    /// Closes every connection once the answer it carries has ended.
    pub fn close_connections(&self) {
        self.closing.send_replace(true);
    }

    /// Whether the connections are to close.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    fn state(&self, app: &str) -> Arc<AppState> {
        self.apps.lock().expect("not poisoned").entry(app.to_string()).or_default().clone()
    }

    /// Requests being answered or held, over every application.
    pub fn in_flight(&self) -> usize {
        self.apps.lock().expect("not poisoned").values().map(|a| a.in_flight.load(Ordering::SeqCst)).sum()
    }

    /// Whether any application is routed (the ModelOrchestra was read).
    pub fn has_routes(&self) -> bool {
        !self.routes.borrow().apps.is_empty()
    }

    fn table(&self) -> Arc<Table> {
        self.routes.borrow().clone()
    }

    /// Answers one request.
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<GatewayBody> {
        let path = req.uri().path().to_string();
        let openai = path.starts_with("/v1/");
        match (req.method(), path.as_str()) {
            (&Method::GET, "/v1/models") => return self.list_openai(),
            (&Method::GET, "/api/tags") => return self.list_ollama(),
            (&Method::GET, p) if p.starts_with("/v1/models/") => return self.one_openai(&p["/v1/models/".len()..]),
            (&Method::GET, "/") => return text(StatusCode::OK, "model-orchestra model gateway is running\n"),
            (&Method::POST, p) if routed(p) => {}
            _ => return error(openai, StatusCode::NOT_FOUND, &format!("no route for {} {path}", req.method()), None),
        }
        let (parts, body) = req.into_parts();
        let body = match Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                let m = format!("the request body is larger than {MAX_BODY} bytes");
                return error(openai, StatusCode::PAYLOAD_TOO_LARGE, &m, None);
            }
            Err(e) => return error(openai, StatusCode::BAD_REQUEST, &format!("reading the request body: {e}"), None),
        };
        let model = match serde_json::from_slice::<Value>(&body) {
            Ok(v) => match v.get("model").and_then(Value::as_str) {
                Some(m) if !m.is_empty() => m.to_string(),
                _ => return error(openai, StatusCode::BAD_REQUEST, "the request names no `model`", None),
            },
            Err(e) => {
                return error(openai, StatusCode::BAD_REQUEST, &format!("the request body is not JSON: {e}"), None)
            }
        };
        let table = self.table();
        let Some(app) = table.route(&model).cloned() else {
            self.metrics.request("", 404);
            let served: Vec<&str> = table.models().into_iter().map(|(m, _)| m).collect();
            let m = format!("model `{model}` is not served here; served: {}", served.join(", "));
            return error(openai, StatusCode::NOT_FOUND, &m, Some(("models", json!(served))));
        };
        if let Some(why) = app.absent.get(&normalise(&model)) {
            self.metrics.request(&app.name, 404);
            let m = format!(
                "model `{model}` is listed for application `{0}` but the models registry does not have it ({why}); \
                 the application serves its other models: correct the name in spec.applications.{0}.engine.ollama.models",
                app.name
            );
            return error(openai, StatusCode::NOT_FOUND, &m, None);
        }
        let state = self.state(&app.name);
        state.in_flight.fetch_add(1, Ordering::SeqCst);
        let in_flight = InFlight(state.clone());
        self.publish_if_due(&app, &state, SystemTime::now());
        let response = self.forward_or_hold(&app, &state, &parts, body, in_flight, openai).await;
        self.metrics.request(&app.name, response.status().as_u16());
        response
    }

    /// Forwards the request; while the application does not serve, holds it (waking the
    /// application when it sleeps) until it does or the deadline passes.
    async fn forward_or_hold(
        &self,
        app: &App,
        state: &Arc<AppState>,
        parts: &http::request::Parts,
        body: Bytes,
        in_flight: InFlight,
        openai: bool,
    ) -> Response<GatewayBody> {
        // An application known asleep is not tried first: its Service has no endpoint.
        let in_flight = if state.asleep.load(Ordering::SeqCst) {
            in_flight
        } else {
            match self.attempt(app, state, parts, body.clone(), in_flight, openai).await {
                Ok(response) => return response,
                Err(in_flight) => in_flight,
            }
        };
        let hold = app.sleep.map_or(HOLD_AWAKE, |s| Duration::from_secs(s.hold_seconds as u64));
        let max_held = app.sleep.map_or(64, |s| s.max_held_requests as usize);
        if state.held.fetch_add(1, Ordering::SeqCst) >= max_held {
            state.held.fetch_sub(1, Ordering::SeqCst);
            let m = format!("{} requests already wait for `{}` to serve; try again later", max_held, app.name);
            return error(openai, StatusCode::SERVICE_UNAVAILABLE, &m, None);
        }
        self.metrics.held(&app.name, 1);
        let response = self.hold(app, state, parts, body, hold, in_flight, openai).await;
        state.held.fetch_sub(1, Ordering::SeqCst);
        self.metrics.held(&app.name, -1);
        response
    }

    /// One forward, sent again up to [`RETRIES`] times while the engine fails it before its
    /// answer begins: the answer to give (the engine's; 502 when every try failed), or the
    /// request back when no replica serves.
    async fn attempt(
        &self,
        app: &App,
        state: &Arc<AppState>,
        parts: &http::request::Parts,
        body: Bytes,
        in_flight: InFlight,
        openai: bool,
    ) -> Result<Response<GatewayBody>, InFlight> {
        let mut tries = 0;
        loop {
            tries += 1;
            let last = tries > RETRIES;
            let why = match self.forward(app, parts, body.clone()).await {
                // An engine that cannot take the request now (Ollama: its queue is full).
                Ok(response) if response.status() == StatusCode::SERVICE_UNAVAILABLE && !last => {
                    "answered 503".to_string()
                }
                Ok(response) => return Ok(self.streamed(app, state, response, in_flight)),
                Err(Failed::BeforeAnswer(m)) if !last => m,
                Err(Failed::BeforeAnswer(m)) => {
                    let m = format!("{m} (tried {tries} times)");
                    return Ok(error(openai, StatusCode::BAD_GATEWAY, &m, None));
                }
                Err(Failed::Upstream(m)) => return Ok(error(openai, StatusCode::BAD_GATEWAY, &m, None)),
                Err(Failed::NotServing) => return Err(in_flight),
            };
            self.metrics.retried(&app.name);
            tracing::debug!(application = %app.name, try_ = tries, why = %why, "sending the request again");
            tokio::time::sleep(RETRY_BEFORE_ANSWER).await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn hold(
        &self,
        app: &App,
        state: &Arc<AppState>,
        parts: &http::request::Parts,
        body: Bytes,
        hold: Duration,
        mut in_flight: InFlight,
        openai: bool,
    ) -> Response<GatewayBody> {
        let deadline = tokio::time::Instant::now() + hold;
        if app.sleep.is_some() {
            if let Err(e) = self.wake(app, state).await {
                let m = format!("`{}` sleeps and could not be woken: {e}", app.name);
                return error(openai, StatusCode::SERVICE_UNAVAILABLE, &m, None);
            }
        }
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            let _ = tokio::time::timeout_at(deadline.min(tokio::time::Instant::now() + RETRY), &mut changed).await;
            in_flight = match self.attempt(app, state, parts, body.clone(), in_flight, openai).await {
                Ok(response) => return response,
                Err(in_flight) => in_flight,
            };
            if tokio::time::Instant::now() >= deadline {
                let latest = self.table().apps.get(&app.name).map(|a| a.message.clone()).unwrap_or_default();
                let why = if latest.is_empty() { "no replica serves yet".to_string() } else { latest };
                let m = format!("`{}` did not serve within {} s: {why}", app.name, hold.as_secs());
                return error(openai, StatusCode::SERVICE_UNAVAILABLE, &m, None);
            }
        }
    }

    /// Scales a sleeping application up (once, however many requests wait).
    async fn wake(&self, app: &App, state: &Arc<AppState>) -> Result<(), String> {
        let _scaling = state.scaling.lock().await;
        if state.waking_since.lock().expect("not poisoned").is_some() {
            return Ok(());
        }
        // Scaled up already (by a user, or another gateway first): its replicas are starting.
        if self.scaler.scale(&app.deployment, app.wake_replicas).await? == Scaled::Done {
            self.metrics.wakeup(&app.name);
            tracing::info!(application = %app.name, replicas = app.wake_replicas, "waking");
            *state.waking_since.lock().expect("not poisoned") = Some(Instant::now());
            state.woken.store(true, Ordering::SeqCst);
        }
        state.asleep.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// The engine's response, streamed; the end of a wake-up when it is the first.
    fn streamed(
        &self,
        app: &App,
        state: &Arc<AppState>,
        response: Response<Incoming>,
        in_flight: InFlight,
    ) -> Response<GatewayBody> {
        if let Some(since) = state.waking_since.lock().expect("not poisoned").take() {
            self.metrics.woke(&app.name, since.elapsed());
            tracing::info!(application = %app.name, seconds = since.elapsed().as_secs_f64(), "woke");
        }
        let (parts, body) = response.into_parts();
        let mut out = Response::builder().status(parts.status);
        for (name, value) in end_to_end(&parts.headers) {
            out = out.header(name, value);
        }
        out.body(Streamed { inner: body, _in_flight: in_flight }.boxed()).expect("a valid response")
    }

    async fn forward(
        &self,
        app: &App,
        parts: &http::request::Parts,
        body: Bytes,
    ) -> Result<Response<Incoming>, Failed> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri = format!("http://{}{path}", app.upstream);
        let mut req = Request::builder().method(parts.method.clone()).uri(uri);
        for (name, value) in end_to_end(&parts.headers).filter(|(n, _)| *n != header::CONTENT_LENGTH) {
            req = req.header(name, value);
        }
        let req = req.body(Full::new(body)).map_err(|e| Failed::Upstream(e.to_string()))?;
        match tokio::time::timeout(ANSWER_TIMEOUT, self.client.request(req)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) if e.is_connect() => Err(Failed::NotServing),
            // The client returns an error only when no response head came: a failure later,
            // in the body, reaches the client as a cut stream.
            Ok(Err(e)) => Err(Failed::BeforeAnswer(format!("`{}` failed the request: {}", app.name, causes(&e)))),
            Err(_) => {
                Err(Failed::Upstream(format!("`{}` did not answer within {} s", app.name, ANSWER_TIMEOUT.as_secs())))
            }
        }
    }

    /// Publishes the request at `at` for the stack when the last publication is
    /// [`publish_every`] old (without holding the request up).
    fn publish_if_due(&self, app: &App, state: &Arc<AppState>, at: SystemTime) {
        let Some(sleep) = app.sleep else { return };
        {
            let mut published = state.published.lock().expect("not poisoned");
            let due =
                published.is_none_or(|p| at.duration_since(p).unwrap_or_default() >= publish_every(sleep.idle_seconds));
            if !due {
                return;
            }
            *published = Some(at);
        }
        let (activity, deployment, name) = (self.activity.clone(), app.deployment.clone(), app.name.clone());
        let state = state.clone();
        tokio::spawn(async move {
            let published = tokio::time::timeout(API_CALL, activity.publish(&deployment, at)).await;
            if let Err(e) = published.unwrap_or_else(|_| Err(format!("no answer within {API_CALL:?}"))) {
                tracing::warn!(application = %name, error = %e, "cannot publish the application's last request");
                // Not published: the next request or check publishes again.
                let mut published = state.published.lock().expect("not poisoned");
                if *published == Some(at) {
                    *published = None;
                }
            }
        });
    }

    /// Puts to sleep each sleep-enabled application idle for its `idleSeconds` at every
    /// gateway of the stack: at this one, and in what the others published
    /// ([`super::activity`]).
    pub async fn sleep_idle(&self) {
        let table = self.table();
        // First, before anything waits on the API server: a long answer is activity for as
        // long as it streams, and a request not published yet (its publication failed, or
        // it ended after the last one) is published once due.
        for app in table.apps.values() {
            let state = self.state(&app.name);
            if state.in_flight.load(Ordering::SeqCst) > 0 {
                self.publish_if_due(app, &state, SystemTime::now());
                continue;
            }
            let last = *state.last_request.lock().expect("not poisoned");
            let published = *state.published.lock().expect("not poisoned");
            if let Some(last) = last.filter(|l| published.is_none_or(|p| p < *l)) {
                self.publish_if_due(app, &state, last);
            }
        }
        for app in table.apps.values() {
            let Some(sleep) = app.sleep else { continue };
            let state = self.state(&app.name);
            if state.in_flight.load(Ordering::SeqCst) > 0 || state.asleep.load(Ordering::SeqCst) {
                continue;
            }
            // An application coming up (created, rolled, its models pulling) is not idle: its
            // idle time counts from when it serves. One a request woke is, served or not.
            if !app.ready && !state.woken.load(Ordering::SeqCst) {
                *state.last_activity.lock().expect("not poisoned") = Some(Instant::now());
                continue;
            }
            let idle = Duration::from_secs(sleep.idle_seconds as u64);
            let local = *state.last_activity.lock().expect("not poisoned");
            if local.unwrap_or(self.started).elapsed() < idle {
                continue;
            }
            let until = *state.busy_elsewhere_until.lock().expect("not poisoned");
            if until.is_some_and(|u| Instant::now() < u) {
                continue;
            }
            // What the gateways published lags their last request by up to the publication
            // interval, one check and the write's own time (an API server under load takes
            // seconds): idle for that much longer, the stack surely is.
            let margin = publish_every(sleep.idle_seconds) + IDLE_CHECK + API_CALL;
            let shared = tokio::time::timeout(API_CALL, self.activity.last(&app.deployment)).await;
            match shared.unwrap_or_else(|_| Err(format!("no answer within {API_CALL:?}"))) {
                Ok(Some(shared)) => {
                    let since = SystemTime::now().duration_since(shared).unwrap_or_default();
                    if since < idle + margin {
                        let wait = idle + margin - since;
                        *state.busy_elsewhere_until.lock().expect("not poisoned") = Some(Instant::now() + wait);
                        continue;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(application = %app.name, error = %e, "cannot read the stack's last request");
                    continue;
                }
            }
            let _scaling = state.scaling.lock().await;
            // A request may have come while the lock was awaited.
            if state.in_flight.load(Ordering::SeqCst) > 0 {
                continue;
            }
            let scaled = tokio::time::timeout(API_CALL, self.scaler.scale(&app.deployment, 0)).await;
            match scaled.unwrap_or_else(|_| Err(format!("no answer within {API_CALL:?}"))) {
                Ok(scaled) => {
                    if scaled == Scaled::Done {
                        self.metrics.idle_scale_down(&app.name);
                        tracing::info!(application = %app.name, idle_seconds = sleep.idle_seconds, "asleep");
                    }
                    state.asleep.store(true, Ordering::SeqCst);
                    state.woken.store(false, Ordering::SeqCst);
                    *state.waking_since.lock().expect("not poisoned") = None;
                }
                Err(e) => tracing::warn!(application = %app.name, error = %e, "cannot put to sleep"),
            }
        }
    }

    fn list_openai(&self) -> Response<GatewayBody> {
        let table = self.table();
        let data: Vec<Value> = table
            .models()
            .into_iter()
            .map(|(m, app)| json!({"id": m, "object": "model", "created": 0, "owned_by": app}))
            .collect();
        json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
    }

    fn one_openai(&self, model: &str) -> Response<GatewayBody> {
        let table = self.table();
        match table.route(model) {
            Some(app) => json_response(
                StatusCode::OK,
                &json!({"id": model, "object": "model", "created": 0, "owned_by": app.name}),
            ),
            None => {
                let served: Vec<&str> = table.models().into_iter().map(|(m, _)| m).collect();
                let m = format!("model `{model}` is not served here; served: {}", served.join(", "));
                error(true, StatusCode::NOT_FOUND, &m, Some(("models", json!(served))))
            }
        }
    }

    fn list_ollama(&self) -> Response<GatewayBody> {
        let table = self.table();
        let models: Vec<Value> = table.models().into_iter().map(|(m, _)| json!({"name": m, "model": m})).collect();
        json_response(StatusCode::OK, &json!({"models": models}))
    }
}

/// An error and its causes, `: `-separated (hyper's own says only "client error (SendRequest)").
fn causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out = format!("{out}: {s}");
        source = s.source();
    }
    out
}

pub fn text(code: StatusCode, body: &'static str) -> Response<GatewayBody> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(full(body))
        .expect("a valid response")
}
