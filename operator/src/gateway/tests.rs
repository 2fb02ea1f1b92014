//! The gateway in-process: its real server and proxy in front of a stand-in engine on
//! 127.0.0.1 (a small HTTP server that streams, started only once "scaled up") and a
//! stand-in scaler. The real node, engine and API server are the e2e tier's
//! (`tests/e2e/gateway.rs`); these pin the gateway's own decisions quickly.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use super::proxy::Gateway;
use super::routes::Table;
use super::scale::Scaler;

/// A Deployment's replicas; scaling it above zero starts the engine (after `start`).
struct FakeScaler {
    replicas: AtomicI32,
    scales: AtomicUsize,
    engine: SocketAddr,
    start: Duration,
    /// Whether a scale-up starts an engine at all (a wake that fails when not).
    starts: bool,
    running: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Scaler for FakeScaler {
    fn replicas<'a>(
        &'a self,
        _: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<i32, String>> + Send + 'a>> {
        Box::pin(async move { Ok(self.replicas.load(Ordering::SeqCst)) })
    }

    fn scale<'a>(
        &'a self,
        _: &'a str,
        replicas: i32,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async move {
            self.scales.fetch_add(1, Ordering::SeqCst);
            self.replicas.store(replicas, Ordering::SeqCst);
            let mut running = self.running.lock().unwrap();
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
            Ok(())
        })
    }
}

/// The stand-in engine: `/api/generate` streams ten NDJSON lines 50 ms apart.
async fn engine(listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        tokio::spawn(async move {
            let service = hyper::service::service_fn(|_req| async {
                let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
                tokio::spawn(async move {
                    for i in 0..10 {
                        let line = format!("{{\"response\":\"t{i}\",\"done\":{}}}\n", i == 9);
                        let _ = tx.send(Ok(Frame::data(Bytes::from(line)))).await;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                });
                let body = StreamBody::new(tokio_stream_of(rx));
                Ok::<_, std::convert::Infallible>(hyper::Response::new(body))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
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
    routes: watch::Sender<Arc<Table>>,
    changed: Arc<Notify>,
}

/// A gateway routing `smollm2:135m` to application `chat` (sleeping after `idle` s, holding
/// requests `hold` s) whose engine answers at `engine` once scaled up; `replicas` now.
async fn setup(idle: i32, hold: i32, replicas: i32, starts: bool) -> Setup {
    let cr = json!({
        "apiVersion": "models.titanml.co/v1alpha2", "kind": "ModelOrchestra",
        "metadata": {"name": "demo", "namespace": "models"},
        "spec": {"applications": {"chat": {
            "engine": {"ollama": {"models": [{"name": "smollm2:135m"}]}},
            "sleep": {"enabled": true, "idleSeconds": idle, "holdSeconds": hold, "maxHeldRequests": 32}}}},
        "status": {"applications": {"chat": {"readyReplicas": 0, "desiredReplicas": 1, "ready": false,
            "message": "pod chat-1: container ollama: ImagePullBackOff: the image does not exist"}}}
    });
    let mut table = Table::of(&cr).unwrap();
    let engine = free_addr();
    table.apps.get_mut("chat").unwrap().upstream = engine.to_string();
    let scaler = Arc::new(FakeScaler {
        replicas: AtomicI32::new(0),
        scales: AtomicUsize::new(0),
        engine,
        start: Duration::from_millis(300),
        starts,
        running: Mutex::new(None),
    });
    if replicas > 0 {
        scaler.scale("chat", replicas).await.unwrap();
        scaler.scales.store(0, Ordering::SeqCst);
    }
    let (routes, rx) = watch::channel(Arc::new(table));
    let changed = Arc::new(Notify::new());
    let gateway = Arc::new(Gateway::new(rx, changed.clone(), scaler.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let idle_gateway = gateway.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            idle_gateway.sleep_idle().await;
        }
    });
    tokio::spawn(super::serve(listener, gateway, Arc::new(AtomicBool::new(true))));
    Setup { gateway: addr, scaler, routes, changed }
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
    let s = setup(1, 10, 1, true).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (code, _) = ask(&client(), s.gateway, &generate()).await;
    assert_eq!(code, 200);
    assert_eq!(s.scaler.replicas.load(Ordering::SeqCst), 1, "busy just now");
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.scaler.replicas.load(Ordering::SeqCst) != 0 {
        assert!(Instant::now() < deadline, "not put to sleep");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_streams_through_as_the_engine_writes_it() {
    let s = setup(3600, 10, 1, true).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let start = Instant::now();
    let response = client().request(post(s.gateway, "/api/generate", generate().to_string().as_bytes())).await.unwrap();
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
async fn an_unknown_model_is_404_listing_the_served_ones_and_bad_bodies_are_refused() {
    let s = setup(3600, 10, 1, true).await;
    let c = client();
    let (code, body) = ask(&c, s.gateway, &json!({"model": "llama3"})).await;
    assert_eq!((code, serde_json::from_str::<Value>(&body).unwrap()["models"].clone()), (404, json!(["smollm2:135m"])));
    let response = c.request(post(s.gateway, "/v1/chat/completions", b"{not json")).await.unwrap();
    assert_eq!(response.status(), 400);
    let response = c.request(post(s.gateway, "/v1/completions", b"{\"prompt\": \"no model\"}")).await.unwrap();
    assert_eq!(response.status(), 400);
    let huge = vec![b' '; super::proxy::MAX_BODY + 1];
    let response = c.request(post(s.gateway, "/api/chat", &huge)).await.unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(s.scaler.scales.load(Ordering::SeqCst), 0, "nothing woken for them");
}
