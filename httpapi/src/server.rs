//! The server: TLS on a TCP listener, one hyper connection per client, the axum router with
//! its layers (request log, panic guard, security headers, key check and rate limit,
//! timeout), and the per-key Kubernetes clients that act for each key by impersonation.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use kube::Client;
use model_orchestra_api::InputError;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::error::ApiError;
use crate::keys::{KeyRecord, KeyStore};
use crate::ratelimit::RateLimiter;

/// Checks a ModelOrchestra (as JSON) the way the operator will before it applies anything:
/// its warnings, or every error with its field. The operator binary passes its render.
pub type Validator = Arc<dyn Fn(&Value, &str) -> Result<Vec<String>, Vec<InputError>> + Send + Sync>;

/// The cookie the status page keeps the key in (HttpOnly, SameSite=Strict).
pub(crate) const COOKIE: &str = "mo_api_key";

/// TLS material: PEM files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Required unless `insecure_listen`.
    pub tls: Option<TlsFiles>,
    /// Plain HTTP, loopback only, for development.
    pub insecure_listen: bool,
    /// Where the key Secrets are.
    pub keys_namespace: String,
    /// Per key: requests per second on average, and the burst.
    pub rate_per_second: f64,
    pub burst: u32,
    pub max_body_bytes: usize,
    /// For every request but the watch.
    pub request_timeout: Duration,
    /// How long a list made for a key's user is served to its reads (0: every read asks the
    /// API server).
    pub read_cache: Duration,
}

/// One Kubernetes client per key user, each sending `Impersonate-User`.
pub(crate) struct Clients {
    base: kube::Config,
    by_user: Mutex<HashMap<String, Client>>,
}

impl Clients {
    pub(crate) fn new(base: kube::Config) -> Clients {
        Clients { base, by_user: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn for_user(&self, user: &str) -> Result<Client, ApiError> {
        let mut by_user = self.by_user.lock().expect("not poisoned");
        if let Some(client) = by_user.get(user) {
            return Ok(client.clone());
        }
        let mut config = self.base.clone();
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = None;
        let client = Client::try_from(config).map_err(ApiError::from)?;
        by_user.insert(user.to_string(), client.clone());
        Ok(client)
    }

    pub(crate) fn forget_all_but(&self, users: &[String]) {
        self.by_user.lock().expect("not poisoned").retain(|u, _| users.contains(u));
    }
}

pub(crate) struct AppState {
    pub(crate) keys: KeyStore,
    pub(crate) limiter: RateLimiter,
    pub(crate) clients: Clients,
    pub(crate) validator: Validator,
    pub(crate) max_body: usize,
    pub(crate) timeout: Duration,
    pub(crate) secure_cookie: bool,
    pub(crate) cache: crate::cache::ReadCache,
}

impl AppState {
    fn new(keys: KeyStore, config: kube::Config, validator: Validator, options: &ServeOptions) -> AppState {
        AppState {
            keys,
            limiter: RateLimiter::new(options.rate_per_second, options.burst),
            clients: Clients::new(config),
            validator,
            max_body: options.max_body_bytes,
            timeout: options.request_timeout,
            secure_cookie: !options.insecure_listen,
            cache: crate::cache::ReadCache::new(options.read_cache),
        }
    }
}

pub(crate) type Shared = Arc<AppState>;

/// The key's record and a client acting as its user: present on requests with a valid key.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) record: KeyRecord,
    pub(crate) client: Client,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(ApiError::unauthorized)
    }
}

/// The key's name, for the request log (never the key).
#[derive(Clone)]
struct KeyName(String);

/// The key a request presents: `Authorization: Bearer`, `X-API-Key`, or — for reads only,
/// so no other site can make a browser write with it — the status page's cookie.
fn presented_key<'a>(headers: &'a HeaderMap, method: &Method) -> Option<Presented<'a>> {
    if let Some(auth) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let (scheme, token) = auth.trim().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| Presented::Header(token.trim()));
    }
    if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(Presented::Header(key.trim()));
    }
    if method == Method::GET || method == Method::HEAD {
        return cookie(headers, COOKIE).map(Presented::Cookie);
    }
    None
}

/// Where a key came from: a stale cookie (a revoked key) leaves the request unauthenticated,
/// so the page shows its sign-in form rather than an error.
enum Presented<'a> {
    Header(&'a str),
    Cookie(&'a str),
}

pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|c| {
        let (k, v) = c.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// Checks the key (when one is presented) and the key's rate; puts a [`Caller`] in the
/// request for the handlers. Requests without a key go on: each handler that needs one
/// answers 401 (the page shows its sign-in form instead).
async fn authenticate(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    let (presented, from_cookie) = match presented_key(request.headers(), request.method()) {
        None => return next.run(request).await,
        Some(Presented::Header(key)) => (key.to_string(), false),
        Some(Presented::Cookie(key)) => (key.to_string(), true),
    };
    let Some(record) = state.keys.verify(&presented) else {
        if from_cookie {
            return next.run(request).await;
        }
        return ApiError::unauthorized().into_response();
    };
    let name = record.name.clone();
    if let Err(wait) = state.limiter.take(&name, Instant::now()) {
        let mut response = ApiError::rate_limited(wait.as_secs_f64().ceil().max(1.0) as u64).into_response();
        response.extensions_mut().insert(KeyName(name));
        return response;
    }
    let client = match state.clients.for_user(&record.user()) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    request.extensions_mut().insert(Caller { record, client });
    let mut response = next.run(request).await;
    response.extensions_mut().insert(KeyName(name));
    response
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
            axum::http::StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("the Kubernetes API server did not answer within {:?}; try again", state.timeout),
        )
        .into_response(),
    }
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        "the server failed on this request (a bug: please report it with the request)",
    )
    .into_response()
}

/// The whole application: routes and layers.
pub(crate) fn router(state: Shared) -> Router {
    let timed = crate::routes::timed().route_layer(middleware::from_fn_with_state(state.clone(), timeout));
    Router::new()
        .merge(timed)
        .merge(crate::routes::streaming())
        .fallback(crate::routes::no_route)
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

fn tls_acceptor(files: &TlsFiles) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .with_context(|| format!("--tls-cert {}: cannot read", files.cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("--tls-cert {}: not PEM certificates", files.cert.display()))?;
    anyhow::ensure!(!certs.is_empty(), "--tls-cert {}: no certificate in it", files.cert.display());
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("--tls-key {}: no PEM private key in it", files.key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("--tls-cert and --tls-key do not form a usable pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Why the server will not start.
pub fn check_options(o: &ServeOptions) -> anyhow::Result<()> {
    match (&o.tls, o.insecure_listen) {
        (Some(_), true) => anyhow::bail!("--insecure-listen and --tls-cert/--tls-key exclude each other"),
        (None, false) => anyhow::bail!(
            "no TLS material: give --tls-cert and --tls-key (PEM files), or --insecure-listen for plain HTTP on loopback during development"
        ),
        (None, true) if !o.listen.ip().is_loopback() => {
            anyhow::bail!("--insecure-listen serves plain HTTP: only on a loopback address (e.g. 127.0.0.1:8443), not {}", o.listen)
        }
        _ => Ok(()),
    }
}

/// Runs the server until SIGTERM or Ctrl-C. `config` is the server's own identity: it reads
/// the key Secrets with it and impersonates each key's user.
pub async fn serve(options: ServeOptions, config: kube::Config, validator: Validator) -> anyhow::Result<()> {
    check_options(&options)?;
    let acceptor = options.tls.as_ref().map(tls_acceptor).transpose()?;
    if options.insecure_listen {
        tracing::warn!(
            address = %options.listen,
            "--insecure-listen: serving PLAIN HTTP without TLS; keys cross the wire in clear. For development on loopback only"
        );
    }
    let own = Client::try_from(config.clone()).context("a Kubernetes client for the server's own identity")?;
    let keys = KeyStore::default();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(keys.clone().follow(own, options.keys_namespace.clone(), ready_tx));
    tokio::time::timeout(Duration::from_secs(30), ready_rx)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "could not list the API key Secrets in namespace {} within 30 s (does the server's identity have get/list/watch on secrets there?)",
                options.keys_namespace
            )
        })?
        .ok();
    if keys.is_empty() {
        // Serving anyway: in a pod, exiting would crash-loop, and the backoff would keep the
        // server down for minutes after the first key is made. Keys are followed by a watch.
        tracing::warn!(
            namespace = %options.keys_namespace,
            "no API key yet: every request is refused (401) until one is made with `model-orchestra-operator api-key create --name NAME --namespace TEAM_NAMESPACE --api-namespace {}`",
            options.keys_namespace
        );
    }
    let state = Arc::new(AppState::new(keys.clone(), config, validator, &options));
    tokio::spawn(forget_revoked(state.clone()));
    let app = router(state);
    let listener =
        TcpListener::bind(options.listen).await.with_context(|| format!("listening on {}", options.listen))?;
    let address = listener.local_addr()?;
    tracing::info!(address = %address, tls = acceptor.is_some(), keys = keys.len(), "listening");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => {
                tracing::info!("shutting down");
                return Ok(());
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                Some(acceptor) => match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => serve_connection(tls, app).await,
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                },
                None => serve_connection(stream, app).await,
            }
        });
    }
}

async fn serve_connection<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: I, app: Router) {
    let service = hyper_util::service::TowerToHyperService::new(app);
    let result = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .serve_connection(TokioIo::new(io), service)
        .await;
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection");
    }
}

/// Drops the clients and rate buckets of keys that are gone.
async fn forget_revoked(state: Shared) {
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let names = state.keys.names();
        let users: Vec<String> = names.iter().map(|n| crate::keys::user(n)).collect();
        state.clients.forget_all_but(&users);
        state.cache.retain_users(&users);
        state.limiter.retain(&names);
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// The router on a listener without the Kubernetes side: for tests of the HTTP layer.
#[doc(hidden)]
pub fn test_router(keys: KeyStore, config: kube::Config, validator: Validator, options: &ServeOptions) -> Router {
    router(Arc::new(AppState::new(keys, config, validator, options)))
}
