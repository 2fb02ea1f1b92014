//! A fault-injecting HTTP proxy between a client (the operator) and the API server: added
//! latency, `500 InternalError` answers, connections reset before any answer, and watches
//! cut off after a while. The client speaks plain HTTP to the proxy on 127.0.0.1; the proxy
//! forwards every request over TLS (trusting the cluster's CA), headers included, so the
//! API server still authenticates and authorizes the client's own token.
//!
//! The proxy runs on a thread and runtime of its own, so it outlives any test's runtime.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = BoxBody<Bytes, BoxError>;
type Upstream = HttpClient<hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>, Incoming>;

/// The faults to inject; the default injects none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Added before forwarding each request.
    pub latency: Duration,
    /// Share of requests answered `500 InternalError` without being forwarded.
    pub error_rate: f64,
    /// Share of connections reset (closed with no answer) instead of forwarding a request.
    pub reset_rate: f64,
    /// Watches are cut off (the stream breaks mid-body) after this long.
    pub drop_watches_after: Option<Duration>,
}

/// How many faults were injected so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injected {
    pub forwarded: u64,
    pub errors: u64,
    pub resets: u64,
    pub dropped_watches: u64,
}

#[derive(Default)]
struct Counters {
    forwarded: AtomicU64,
    errors: AtomicU64,
    resets: AtomicU64,
    dropped_watches: AtomicU64,
}

struct Shared {
    upstream: Upstream,
    authority: http::uri::Authority,
    faults: Mutex<Faults>,
    counters: Counters,
    rng: AtomicU64,
}

/// A running proxy; stopped on drop.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Listens on 127.0.0.1 (ephemeral port) and forwards to `upstream`
    /// (`https://127.0.0.1:<port>`), trusting the CA certificates in `ca_pem`.
    pub fn start(upstream: &str, ca_pem: &str) -> std::io::Result<FaultProxy> {
        let uri: http::Uri = upstream.parse().map_err(std::io::Error::other)?;
        let authority = uri.authority().cloned().ok_or_else(|| std::io::Error::other("upstream has no host:port"))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.map_err(std::io::Error::other)?).map_err(std::io::Error::other)?;
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(std::io::Error::other)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_only().enable_http1().build();
        let upstream = HttpClient::builder(TokioExecutor::new()).build(https);
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
        let shared = Arc::new(Shared {
            upstream,
            authority,
            faults: Mutex::new(Faults::default()),
            counters: Counters::default(),
            rng: AtomicU64::new(seed),
        });

        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let serve = shared.clone();
        let thread = std::thread::Builder::new().name("fault-proxy".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("proxy runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("proxy listener");
                tokio::select! {
                    _ = accept_loop(listener, serve) => {}
                    _ = stopped => {}
                }
            });
            // Cut every open connection (watches included).
            runtime.shutdown_timeout(Duration::from_millis(100));
        })?;
        Ok(FaultProxy { addr, shared, stop: Some(stop), thread: Some(thread) })
    }

    /// `http://127.0.0.1:<port>`, for the client's kubeconfig.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().expect("faults lock") = faults;
    }

    pub fn injected(&self) -> Injected {
        let c = &self.shared.counters;
        Injected {
            forwarded: c.forwarded.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            resets: c.resets.load(Ordering::Relaxed),
            dropped_watches: c.dropped_watches.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(shared.clone(), req));
            // An error here is a connection we reset on purpose, or a client that went away.
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// The reason a request was not forwarded: the connection is reset.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by the fault proxy")]
struct Reset;

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<ProxyBody>, Reset> {
    let faults = shared.faults.lock().expect("faults lock").clone();
    if !faults.latency.is_zero() {
        tokio::time::sleep(faults.latency).await;
    }
    if faults.reset_rate > 0.0 && shared.unit_random() < faults.reset_rate {
        shared.counters.resets.fetch_add(1, Ordering::Relaxed);
        return Err(Reset);
    }
    if faults.error_rate > 0.0 && shared.unit_random() < faults.error_rate {
        shared.counters.errors.fetch_add(1, Ordering::Relaxed);
        return Ok(internal_error());
    }
    let is_watch = req.uri().query().is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let (mut parts, body) = req.into_parts();
    let path_and_query =
        parts.uri.path_and_query().cloned().unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    parts.uri = http::Uri::builder()
        .scheme("https")
        .authority(shared.authority.clone())
        .path_and_query(path_and_query)
        .build()
        .expect("a valid URI");
    parts.headers.remove(http::header::HOST);
    shared.counters.forwarded.fetch_add(1, Ordering::Relaxed);
    let response = match shared.upstream.request(Request::from_parts(parts, body)).await {
        Ok(r) => r,
        Err(e) => return Ok(text_response(StatusCode::BAD_GATEWAY, &format!("fault proxy: upstream: {e}"))),
    };
    let (parts, body) = response.into_parts();
    let body: ProxyBody = match faults.drop_watches_after.filter(|_| is_watch) {
        Some(after) => {
            shared.counters.dropped_watches.fetch_add(1, Ordering::Relaxed);
            CutOff { inner: body, deadline: Box::pin(tokio::time::sleep(after)) }.boxed()
        }
        None => body.map_err(|e| Box::new(e) as BoxError).boxed(),
    };
    Ok(Response::from_parts(parts, body))
}

impl Shared {
    fn unit_random(&self) -> f64 {
        // xorshift64: faults need spread, not secrecy.
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn internal_error() -> Response<ProxyBody> {
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "injected by the fault proxy", "reason": "InternalError", "code": 500
    });
    let mut r = Response::new(Full::new(Bytes::from(status.to_string())).map_err(|e: Infallible| match e {}).boxed());
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

fn text_response(code: StatusCode, text: &str) -> Response<ProxyBody> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_string())).map_err(|e: Infallible| match e {}).boxed());
    *r.status_mut() = code;
    r
}

/// A response body that breaks (an error mid-stream, which aborts the connection) at a
/// deadline: a watch dropped by the network.
struct CutOff {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Body for CutOff {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err("watch cut off by the fault proxy".into())));
        }
        Pin::new(&mut self.inner).poll_frame(cx).map_err(|e| Box::new(e) as BoxError)
    }
}
