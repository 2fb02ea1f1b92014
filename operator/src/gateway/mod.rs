//! The model gateway (`model-orchestra-operator gateway`): one per ModelOrchestra whose
//! applications are open engines, in the gateway's place. It routes OpenAI's API (`/v1`)
//! and Ollama's (`/api`) by the request's `model` to the application serving it, streams
//! answers through, holds requests while a sleeping application wakes, and puts idle ones
//! to sleep. Its routes come from its ModelOrchestra, watched: resolved and rendered by the
//! operator's own code, so they follow the spec without a restart.

pub mod activity;
pub mod metrics;
pub mod proxy;
pub mod routes;
pub mod scale;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::StatusCode;
use hyper::body::Incoming;
use hyper::Request;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use tokio::sync::{watch, Notify};

use proxy::{text, Gateway};
use routes::Table;

/// Where the gateway serves and what it routes.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    pub namespace: String,
    /// The ModelOrchestra whose applications it routes to.
    pub name: String,
    pub listen: SocketAddr,
}

/// Runs the gateway until the process is stopped.
pub async fn run(client: kube::Client, options: GatewayOptions) -> std::io::Result<()> {
    let (routes_tx, routes) = watch::channel(Arc::new(Table::default()));
    let changed = Arc::new(Notify::new());
    let scale = Arc::new(scale::KubeScale { api: Api::namespaced(client.clone(), &options.namespace) });
    let scaler = Arc::new(scale::Conditional(scale));
    let activity = Arc::new(activity::LeaseActivity {
        leases: Api::namespaced(client.clone(), &options.namespace),
        deployments: Api::namespaced(client.clone(), &options.namespace),
        // A pod's hostname is its name.
        identity: std::env::var("HOSTNAME").unwrap_or_else(|_| "model-gateway".into()),
    });
    let gateway = Arc::new(Gateway::new(routes, changed.clone(), scaler, activity));

    let ar = kube::core::ApiResource {
        group: model_orchestra_api::GROUP.into(),
        version: "v1alpha2".into(),
        api_version: format!("{}/v1alpha2", model_orchestra_api::GROUP),
        kind: "ModelOrchestra".into(),
        plural: "modelorchestras".into(),
    };
    let crs: Api<DynamicObject> = Api::namespaced_with(client, &options.namespace, &ar);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", options.name));
    let name = options.name.clone();
    tokio::spawn(async move {
        let mut events = watcher(crs, config).boxed();
        while let Some(event) = events.next().await {
            let cr = match event {
                Ok(watcher::Event::Apply(cr) | watcher::Event::InitApply(cr)) => cr,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "watching the ModelOrchestra");
                    continue;
                }
            };
            match serde_json::to_value(&cr).map_err(|e| e.to_string()).and_then(|v| Table::of(&v)) {
                Ok(table) => {
                    routes_tx.send_replace(Arc::new(table));
                    changed.notify_waiters();
                }
                // The last good routes keep serving; the operator's status says what is wrong.
                Err(e) => tracing::warn!(modelorchestra = %name, error = %e, "cannot route: keeping the last routes"),
            }
        }
    });

    let idle = gateway.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(proxy::IDLE_CHECK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if idle.has_routes() {
                idle.sleep_idle().await;
            }
        }
    });

    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    tracing::info!(address = %listener.local_addr()?, modelorchestra = %options.name, "model gateway serving");
    let serving = tokio::spawn(serve(listener, gateway.clone()));
    stopped().await;
    // The pod is terminating: its endpoints are being removed, and until every node's
    // kube-proxy has seen that, new connections may still come. They are served.
    gateway.leaving();
    tracing::info!(seconds = LEAVE_ENDPOINTS.as_secs(), "stopping: leaving the Service's endpoints");
    tokio::time::sleep(LEAVE_ENDPOINTS).await;
    // Then no new connection; each open one closes once the answer it carries ends (an idle
    // one at once), and the requests in flight (held ones included) are answered before
    // the process ends.
    serving.abort();
    gateway.close_connections();
    let drained = tokio::time::Instant::now() + DRAIN;
    while gateway.in_flight() > 0 && tokio::time::Instant::now() < drained {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::info!(unanswered = gateway.in_flight(), "stopping");
    Ok(())
}

/// How long a gateway told to stop goes on accepting connections (see the chart's).
const LEAVE_ENDPOINTS: Duration = Duration::from_secs(crate::chart::model_gateway::LEAVE_ENDPOINTS_SECONDS);
/// The longest the requests in flight are then waited for: the answers' grace, which the
/// pod's grace period holds with a margin.
const DRAIN: Duration = Duration::from_secs(crate::chart::ANSWER_GRACE_SECONDS);

/// SIGTERM (Kubernetes stopping the pod) or Ctrl-C.
async fn stopped() {
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Serves the gateway's requests on `listener` (`/healthz`, `/readyz` once routes are loaded,
/// `/metrics`, and the routed APIs) until the process stops.
pub async fn serve(listener: tokio::net::TcpListener, gateway: Arc<Gateway>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let gateway = gateway.clone();
        let gateway_closing = gateway.closing();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let gateway = gateway.clone();
                async move {
                    let mut response = match req.uri().path() {
                        "/healthz" => text(StatusCode::OK, "ok\n"),
                        "/readyz" if gateway.is_leaving() => text(StatusCode::SERVICE_UNAVAILABLE, "stopping\n"),
                        "/readyz" if gateway.has_routes() => text(StatusCode::OK, "ok\n"),
                        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "no routes yet\n"),
                        "/metrics" => hyper::Response::builder()
                            .header("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
                            .body(proxy::full_body(gateway.metrics.encode()))
                            .expect("a valid response"),
                        _ => gateway.clone().handle(req).await,
                    };
                    // Stopping: the client's next request goes to a gateway that stays, over
                    // a new connection, rather than onto this one as it closes.
                    if gateway.is_leaving() {
                        response
                            .headers_mut()
                            .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            let mut closing = gateway_closing;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = closing.wait_for(|closing| *closing) => {}
            }
            // Closed once the answer it carries (if any) has ended, not in its middle.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    }
}

// The gateway in-process: its real server and proxy in front of a stand-in engine on
// 127.0.0.1 (a small HTTP server that streams, started only once "scaled up") and a
// stand-in scaler. The real node, engine and API server are the e2e tier's
// (`tests/e2e/gateway.rs`); these pin the gateway's own decisions quickly.
#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full, StreamBody};
    use hyper::body::Frame;
    use serde_json::{json, Value};
    use tokio::sync::{watch, Notify};

    use super::activity::Activity;
    use super::proxy::Gateway;
    use super::routes::Table;
    use super::scale::{Conditional, ScaleSubresource, Scaler, Versioned};

    /// A Deployment's `scale` subresource: its replicas at a version, written only at the
    /// version read, as the API server does; a read takes 5 ms, so gateways that read at
    /// once both see the old version. Scaling above zero starts the engine (after `start`).
    struct FakeScaler {
        replicas: AtomicI32,
        version: AtomicUsize,
        /// The writes that changed the replicas, and those refused for a stale version.
        scales: AtomicUsize,
        refused: AtomicUsize,
        engine: SocketAddr,
        start: Duration,
        /// Whether a scale-up starts an engine at all (a wake that fails when not).
        starts: bool,
        running: Mutex<Option<tokio::task::JoinHandle<()>>>,
    }

    impl ScaleSubresource for FakeScaler {
        fn read<'a>(
            &'a self,
            _: &'a str,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Versioned, String>> + Send + 'a>> {
            Box::pin(async move {
                let _running = self.running.lock().unwrap();
                let read = Versioned {
                    replicas: self.replicas.load(Ordering::SeqCst),
                    version: self.version.load(Ordering::SeqCst).to_string(),
                };
                drop(_running);
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok(read)
            })
        }

        fn write<'a>(
            &'a self,
            _: &'a str,
            replicas: i32,
            version: &'a str,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool, String>> + Send + 'a>> {
            Box::pin(async move {
                let mut running = self.running.lock().unwrap();
                if self.version.load(Ordering::SeqCst).to_string() != version {
                    self.refused.fetch_add(1, Ordering::SeqCst);
                    return Ok(false);
                }
                self.version.fetch_add(1, Ordering::SeqCst);
                self.scales.fetch_add(1, Ordering::SeqCst);
                self.replicas.store(replicas, Ordering::SeqCst);
                if let Some(engine) = running.take() {
                    engine.abort();
                }
                if replicas > 0 && self.starts {
                    let (addr, start) = (self.engine, self.start);
                    *running = Some(tokio::spawn(async move {
                        tokio::time::sleep(start).await;
                        engine(tokio::net::TcpListener::bind(addr).await.unwrap()).await;
                    }));
                }
                Ok(true)
            })
        }
    }

    /// The stack's last request, shared by the gateways of a test as the Lease is: it only
    /// moves forward; the first `failing` publications fail.
    #[derive(Default)]
    struct FakeActivity {
        last: Mutex<Option<std::time::SystemTime>>,
        publications: AtomicUsize,
        failing: AtomicUsize,
    }

    impl Activity for FakeActivity {
        fn last<'a>(
            &'a self,
            _: &'a str,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Option<std::time::SystemTime>, String>> + Send + 'a>,
        > {
            Box::pin(async move { Ok(*self.last.lock().unwrap()) })
        }

        fn publish<'a>(
            &'a self,
            _: &'a str,
            at: std::time::SystemTime,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 'a>> {
            Box::pin(async move {
                let failing = self.failing.load(Ordering::SeqCst);
                if failing > 0 {
                    self.failing.store(failing - 1, Ordering::SeqCst);
                    return Err("the API server answered 503".into());
                }
                self.publications.fetch_add(1, Ordering::SeqCst);
                let mut last = self.last.lock().unwrap();
                *last = (*last).max(Some(at));
                Ok(())
            })
        }
    }

    /// The stand-in engine: `/api/generate` streams ten NDJSON lines 50 ms apart.
    async fn engine(listener: tokio::net::TcpListener) {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            answer(stream, None);
        }
    }

    /// Serves one connection as the stand-in engine does; with `busy`, the requests it
    /// counts below its limit are answered 503 as Ollama does when its queue is full.
    fn answer(stream: tokio::net::TcpStream, busy: Option<(Arc<AtomicUsize>, usize)>) {
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_req| {
                let busy = busy.clone();
                async move {
                    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
                    if let Some((seen, failing)) = busy {
                        if seen.fetch_add(1, Ordering::SeqCst) < failing {
                            let line =
                                "{\"error\":\"server busy, please try again.  maximum pending requests exceeded\"}";
                            tx.send(Ok(Frame::data(Bytes::from(line)))).await.unwrap();
                            drop(tx);
                            let mut response = hyper::Response::new(StreamBody::new(tokio_stream_of(rx)));
                            *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                            return Ok::<_, std::convert::Infallible>(response);
                        }
                    }
                    tokio::spawn(async move {
                        for i in 0..10 {
                            let line = format!("{{\"response\":\"t{i}\",\"done\":{}}}\n", i == 9);
                            let _ = tx.send(Ok(Frame::data(Bytes::from(line)))).await;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    });
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(StreamBody::new(tokio_stream_of(rx))))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }

    /// How the flaky stand-in engine fails its first requests.
    #[derive(Clone, Copy, PartialEq)]
    enum Fault {
        /// Reads the request and closes the connection: no answer begins.
        Close,
        /// Answers 503 (Ollama's full queue).
        Busy,
        /// Begins a streamed answer, one line, then closes the connection.
        CutAfterFirstLine,
    }

    /// A stand-in engine on `addr` that fails its first `failing` requests with `fault`, then
    /// answers as [`engine`] does; counts the requests it got.
    async fn flaky_engine(addr: SocketAddr, fault: Fault, failing: usize) -> Arc<AtomicUsize> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { continue };
                if fault == Fault::Busy {
                    answer(stream, Some((counted.clone(), failing)));
                    continue;
                }
                if counted.fetch_add(1, Ordering::SeqCst) >= failing {
                    answer(stream, None);
                    continue;
                }
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                if fault == Fault::CutAfterFirstLine {
                    let head =
                        "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n";
                    let line = "{\"response\":\"t0\",\"done\":false}\n";
                    let chunk = format!("{head}{:x}\r\n{line}\r\n", line.len());
                    stream.write_all(chunk.as_bytes()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                drop(stream);
            }
        });
        seen
    }

    /// A ModelOrchestra whose application `chat` serves `smollm2:135m`, ready, not sleeping.
    fn serving() -> Value {
        json!({
            "apiVersion": "models.titanml.co/v1alpha2", "kind": "ModelOrchestra",
            "metadata": {"name": "demo", "namespace": "models"},
            "spec": {"applications": {"chat": {"engine": {"ollama": {"models": [{"name": "smollm2:135m"}]}}}}},
            "status": {"applications": {"chat": {"ready": true, "models": [
                {"name": "smollm2:135m", "phase": "Ready", "replicas": "1/1"}]}}}
        })
    }

    /// The gateway's `model_gateway_retries_total` for `chat`.
    async fn retries(c: &Client, at: SocketAddr) -> u64 {
        metric(c, at, "model_gateway_retries_total").await
    }

    /// One of the gateway's counters for `chat`.
    async fn metric(c: &Client, at: SocketAddr, name: &str) -> u64 {
        let response = c.request(http::Request::get(format!("http://{at}/metrics")).body(Full::default()).unwrap());
        let text = response.await.unwrap().into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&text).into_owned();
        let wanted = format!("{name}{{application=\"chat\"}}");
        text.lines().find(|l| l.starts_with(&wanted)).map_or(0, |l| l.rsplit(' ').next().unwrap().parse().unwrap())
    }

    fn tokio_stream_of<T: Send + 'static>(
        mut rx: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures::Stream<Item = T> + Send + 'static {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    /// A loopback port nothing listens on (yet).
    fn free_addr() -> SocketAddr {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
    }

    struct Setup {
        gateway: SocketAddr,
        scaler: Arc<FakeScaler>,
        activity: Arc<FakeActivity>,
        routes: watch::Sender<Arc<Table>>,
        changed: Arc<Notify>,
    }

    /// A gateway routing `smollm2:135m` to application `chat` (sleeping after `idle` s, holding
    /// requests `hold` s) whose engine answers at `engine` once scaled up; `replicas` now.
    async fn setup(idle: i32, hold: i32, replicas: i32, starts: bool) -> Setup {
        setup_ready(idle, hold, replicas, starts, false).await
    }

    /// As [`setup`], the status saying whether the application serves.
    async fn setup_ready(idle: i32, hold: i32, replicas: i32, starts: bool, ready: bool) -> Setup {
        let cr = json!({
            "apiVersion": "models.titanml.co/v1alpha2", "kind": "ModelOrchestra",
            "metadata": {"name": "demo", "namespace": "models"},
            "spec": {"applications": {"chat": {
                "engine": {"ollama": {"models": [{"name": "smollm2:135m"}]}},
                "sleep": {"enabled": true, "idleSeconds": idle, "holdSeconds": hold, "maxHeldRequests": 32}}}},
            "status": {"applications": {"chat": {"readyReplicas": 0, "desiredReplicas": 1, "ready": ready,
                "message": "pod chat-1: container ollama: ImagePullBackOff: the image does not exist"}}}
        });
        start(&cr, replicas, starts).await
    }

    /// A gateway routing the ModelOrchestra `cr`, whose application `chat`'s engine answers
    /// once scaled up; `replicas` now.
    async fn start(cr: &Value, replicas: i32, starts: bool) -> Setup {
        let mut table = Table::of(cr).unwrap();
        let engine = free_addr();
        table.apps.get_mut("chat").unwrap().upstream = engine.to_string();
        let scaler = Arc::new(FakeScaler {
            replicas: AtomicI32::new(0),
            version: AtomicUsize::new(0),
            scales: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            engine,
            start: Duration::from_millis(300),
            starts,
            running: Mutex::new(None),
        });
        if replicas > 0 {
            Conditional(scaler.clone()).scale("chat", replicas).await.unwrap();
            scaler.scales.store(0, Ordering::SeqCst);
        }
        let (routes, rx) = watch::channel(Arc::new(table));
        let changed = Arc::new(Notify::new());
        let activity = Arc::new(FakeActivity::default());
        let addr = another_gateway(rx, changed.clone(), scaler.clone(), activity.clone()).await;
        Setup { gateway: addr, scaler, activity, routes, changed }
    }

    /// A gateway replica of the stack: the same routes, Deployments and Lease as the others.
    async fn another_gateway(
        routes: watch::Receiver<Arc<Table>>,
        changed: Arc<Notify>,
        scaler: Arc<FakeScaler>,
        activity: Arc<FakeActivity>,
    ) -> SocketAddr {
        let gateway = Arc::new(Gateway::new(routes, changed, Arc::new(Conditional(scaler)), activity));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let idle_gateway = gateway.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                idle_gateway.sleep_idle().await;
            }
        });
        tokio::spawn(super::serve(listener, gateway));
        addr
    }

    impl Setup {
        /// Until the application is scaled to zero; fails with `why` after `within` (an idle
        /// application sleeps `proxy`'s margin, about 6 s, after its idle seconds).
        async fn asleep_within(&self, within: Duration, why: &str) {
            let deadline = Instant::now() + within;
            while self.scaler.replicas.load(Ordering::SeqCst) != 0 {
                assert!(Instant::now() < deadline, "{why}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }

        async fn second_gateway(&self) -> SocketAddr {
            another_gateway(self.routes.subscribe(), self.changed.clone(), self.scaler.clone(), self.activity.clone())
                .await
        }
    }

    type Client = hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

    fn client() -> Client {
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
    }

    fn post(at: SocketAddr, path: &str, body: &[u8]) -> http::Request<Full<Bytes>> {
        http::Request::post(format!("http://{at}{path}")).body(Full::new(Bytes::copy_from_slice(body))).unwrap()
    }

    async fn ask(client: &Client, at: SocketAddr, body: &Value) -> (u16, String) {
        let response = client.request(post(at, "/api/generate", body.to_string().as_bytes())).await.unwrap();
        let code = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    fn generate() -> Value {
        json!({"model": "smollm2:135m", "prompt": "Hi"})
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn twenty_requests_for_a_sleeping_application_wake_it_once_and_are_all_answered() {
        let s = setup(3600, 10, 0, true).await;
        let c = client();
        let asked = generate();
        let answers = futures::future::join_all((0..20).map(|_| ask(&c, s.gateway, &asked))).await;
        for (code, body) in &answers {
            assert_eq!(*code, 200, "{body}");
            assert!(body.contains("\"done\":true"), "{body}");
        }
        assert_eq!(s.scaler.scales.load(Ordering::SeqCst), 1, "one scale-up");
        assert_eq!(s.scaler.replicas.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_held_at_two_gateways_wake_the_application_with_one_scale_write() {
        let s = setup(3600, 10, 0, true).await;
        let other = s.second_gateway().await;
        let (c, asked) = (client(), generate());
        let answers =
            futures::future::join_all((0..20).map(|i| ask(&c, if i % 2 == 0 { s.gateway } else { other }, &asked)))
                .await;
        for (code, body) in &answers {
            assert_eq!(*code, 200, "{body}");
        }
        assert_eq!(s.scaler.scales.load(Ordering::SeqCst), 1, "one scale write for both gateways");
        let wakeups = metric(&c, s.gateway, "model_gateway_wakeups_total").await
            + metric(&c, other, "model_gateway_wakeups_total").await;
        assert_eq!(wakeups, 1, "the gateway whose write was refused found the application waking");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_application_busy_at_one_gateway_is_not_put_to_sleep_by_another() {
        let s = setup_ready(1, 10, 1, true, true).await;
        let _idle_here = s.second_gateway().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let c = client();
        // Busy at the first gateway for four idle periods; the second sees no request.
        let (busy_until, mut requests) = (Instant::now() + Duration::from_secs(4), 0);
        while Instant::now() < busy_until {
            let (code, _) = ask(&c, s.gateway, &generate()).await;
            assert_eq!(code, 200);
            assert_eq!(s.scaler.scales.load(Ordering::SeqCst), 0, "put to sleep while busy at the other gateway");
            requests += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let publications = s.activity.publications.load(Ordering::SeqCst);
        assert!(publications <= 6 && publications < requests, "{publications} for {requests} requests: once a second");
        s.asleep_within(Duration::from_secs(11), "not put to sleep once idle everywhere").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_whose_publication_failed_is_published_again_before_another_gateway_sleeps_the_application() {
        let s = setup_ready(1, 10, 1, true, true).await;
        let _idle_here = s.second_gateway().await;
        s.activity.failing.store(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (code, _) = ask(&client(), s.gateway, &generate()).await;
        assert_eq!(code, 200);
        let answered = Instant::now();
        // Idle here for 1 s at once; published, the request keeps the other gateway waiting
        // for 1 s + the publication's margin.
        tokio::time::sleep(Duration::from_millis(1800)).await;
        assert_eq!(s.scaler.replicas.load(Ordering::SeqCst), 1, "slept {:?} after the request", answered.elapsed());
        assert!(s.activity.publications.load(Ordering::SeqCst) >= 1, "published again after the failure");
        s.asleep_within(Duration::from_secs(10), "not put to sleep once idle everywhere").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wake_that_does_not_come_answers_503_with_the_status_reason_at_the_deadline() {
        let s = setup(3600, 1, 0, false).await;
        let start = Instant::now();
        let (code, body) = ask(&client(), s.gateway, &generate()).await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("did not serve within 1 s") && body.contains("ImagePullBackOff"), "{body}");
        let took = start.elapsed();
        assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(3), "{took:?}");
        drop((s.routes, s.changed));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_application_is_scaled_to_zero_once_idle_for_its_idle_seconds_after_its_last_request() {
        let s = setup_ready(1, 10, 1, true, true).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (code, _) = ask(&client(), s.gateway, &generate()).await;
        assert_eq!(code, 200);
        assert_eq!(s.scaler.replicas.load(Ordering::SeqCst), 1, "busy just now");
        s.asleep_within(Duration::from_secs(10), "not put to sleep").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_application_coming_up_is_not_put_to_sleep_before_it_serves() {
        let s = setup_ready(1, 10, 1, true, false).await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(s.scaler.replicas.load(Ordering::SeqCst), 1, "put to sleep while coming up");
        assert_eq!(s.scaler.scales.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wake_that_fails_goes_back_to_sleep_once_idle() {
        let s = setup(1, 1, 0, false).await;
        let (code, _) = ask(&client(), s.gateway, &generate()).await;
        assert_eq!(code, 503);
        s.asleep_within(Duration::from_secs(10), "a failed wake-up keeps its replica").await;
        assert_eq!(s.scaler.scales.load(Ordering::SeqCst), 2, "up, then down");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_streams_through_as_the_engine_writes_it() {
        let s = setup(3600, 10, 1, true).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let start = Instant::now();
        let response =
            client().request(post(s.gateway, "/api/generate", generate().to_string().as_bytes())).await.unwrap();
        let mut body = response.into_body();
        let mut arrivals = Vec::new();
        while let Some(frame) = body.frame().await {
            if frame.unwrap().is_data() {
                arrivals.push(start.elapsed());
            }
        }
        assert!(arrivals.len() >= 5, "{} chunks: buffered", arrivals.len());
        assert!(arrivals[arrivals.len() - 1] - arrivals[0] >= Duration::from_millis(300), "{arrivals:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_listed_model_the_registry_does_not_have_is_404_naming_why_and_the_others_answer() {
        let cr = json!({
            "apiVersion": "models.titanml.co/v1alpha2", "kind": "ModelOrchestra",
            "metadata": {"name": "demo", "namespace": "models"},
            "spec": {"applications": {"chat": {
                "engine": {"ollama": {"models": [{"name": "smollm2:135m"}, {"name": "smollm2:135n"}]}}}}},
            "status": {"applications": {"chat": {"ready": true, "models": [
                {"name": "smollm2:135m", "phase": "Ready", "replicas": "1/1"},
                {"name": "smollm2:135n", "phase": "Failed", "replicas": "0/1",
                 "message": "chat-1: pull model manifest: file does not exist; retried in 60s"}]}}}
        });
        let s = start(&cr, 1, true).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let c = client();
        let (code, body) = ask(&c, s.gateway, &generate()).await;
        assert_eq!(code, 200, "{body}");
        let (code, body) = ask(&c, s.gateway, &json!({"model": "smollm2:135n", "prompt": "Hi"})).await;
        assert_eq!(code, 404, "{body}");
        let said = serde_json::from_str::<Value>(&body).unwrap()["error"].as_str().unwrap().to_string();
        assert!(said.contains("models registry does not have it") && said.contains("file does not exist"), "{said}");
        assert!(said.contains("spec.applications.chat.engine.ollama.models"), "names the field to fix: {said}");
        let chat = json!({"model": "smollm2:135n", "messages": []}).to_string();
        let response = c.request(post(s.gateway, "/v1/chat/completions", chat.as_bytes())).await.unwrap();
        assert_eq!(response.status(), 404);
        let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(body["error"]["type"], "invalid_request_error", "OpenAI's shape: {body}");
        let listed =
            c.request(http::Request::get(format!("http://{}/v1/models", s.gateway)).body(Full::default()).unwrap());
        let listed: Value =
            serde_json::from_slice(&listed.await.unwrap().into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(listed["data"].as_array().unwrap().len(), 1, "only the model served is listed: {listed}");
        drop((s.routes, s.changed));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_model_is_404_listing_the_served_ones_and_bad_bodies_are_refused() {
        let s = setup(3600, 10, 1, true).await;
        let c = client();
        let (code, body) = ask(&c, s.gateway, &json!({"model": "llama3"})).await;
        assert_eq!(
            (code, serde_json::from_str::<Value>(&body).unwrap()["models"].clone()),
            (404, json!(["smollm2:135m"]))
        );
        let response = c.request(post(s.gateway, "/v1/chat/completions", b"{not json")).await.unwrap();
        assert_eq!(response.status(), 400);
        let response = c.request(post(s.gateway, "/v1/completions", b"{\"prompt\": \"no model\"}")).await.unwrap();
        assert_eq!(response.status(), 400);
        let huge = vec![b' '; super::proxy::MAX_BODY + 1];
        let response = c.request(post(s.gateway, "/api/chat", &huge)).await.unwrap();
        assert_eq!(response.status(), 413);
        assert_eq!(s.scaler.scales.load(Ordering::SeqCst), 0, "nothing woken for them");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_the_engine_drops_before_answering_is_sent_again_and_answered() {
        let s = start(&serving(), 0, false).await;
        let seen = flaky_engine(s.scaler.engine, Fault::Close, 1).await;
        let c = client();
        let (code, body) = ask(&c, s.gateway, &generate()).await;
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("\"done\":true"), "the whole answer: {body}");
        assert_eq!(seen.load(Ordering::SeqCst), 2, "sent twice");
        assert_eq!(retries(&c, s.gateway).await, 1);
        drop((s.routes, s.changed));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_engine_503_is_sent_again_and_the_next_answer_reaches_the_client() {
        let s = start(&serving(), 0, false).await;
        let seen = flaky_engine(s.scaler.engine, Fault::Busy, 2).await;
        let c = client();
        let (code, body) = ask(&c, s.gateway, &generate()).await;
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("\"done\":true"), "{body}");
        assert_eq!(seen.load(Ordering::SeqCst), 3);
        assert_eq!(retries(&c, s.gateway).await, 2);
        drop((s.routes, s.changed));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_the_engine_keeps_dropping_is_502_after_three_tries_naming_them() {
        let s = start(&serving(), 0, false).await;
        let seen = flaky_engine(s.scaler.engine, Fault::Close, usize::MAX).await;
        let c = client();
        let (code, body) = ask(&c, s.gateway, &generate()).await;
        assert_eq!(code, 502, "{body}");
        let said = serde_json::from_str::<Value>(&body).unwrap()["error"].as_str().unwrap().to_string();
        assert!(said.contains("`chat` failed the request") && said.contains("(tried 3 times)"), "{said}");
        assert_eq!(seen.load(Ordering::SeqCst), 3, "bounded");
        drop((s.routes, s.changed));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_cut_after_its_first_byte_reaches_the_client_cut_and_is_not_sent_again() {
        let s = start(&serving(), 0, false).await;
        let seen = flaky_engine(s.scaler.engine, Fault::CutAfterFirstLine, 1).await;
        let c = client();
        let response = c.request(post(s.gateway, "/api/generate", generate().to_string().as_bytes())).await.unwrap();
        assert_eq!(response.status(), 200, "the answer had begun");
        let collected = response.into_body().collect().await;
        assert!(collected.is_err(), "the client sees the stream cut, not a whole answer: {collected:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(seen.load(Ordering::SeqCst), 1, "never sent again after the first byte");
        assert_eq!(retries(&c, s.gateway).await, 0);
        drop((s.routes, s.changed));
    }
}
