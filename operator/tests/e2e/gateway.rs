//! The model gateway on the real node: the operator's own image (`gateway`) in front of
//! Ollama applications serving real models, reached from the test through a forwarder to
//! its Service's cluster address (as a client in the cluster reaches it). Sleep and wake:
//! the gateway scales an idle application to zero and a request back up, holding the
//! request until a replica serves.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams};
use local_cluster::forward::Forwarder;
use serde_json::{json, Value};

use crate::ollama::{apply, cr, setup, wait_ready, wait_status, FAULTS};
use crate::support::*;
use crate::whole_answer::{ask_whole, json_post};

/// Long enough for a wake-up: a pod's start, the model's pull and first load.
const WAKE: Duration = Duration::from_secs(180);

/// The application sleeps after `idle` seconds and holds requests `hold` seconds.
fn sleeping(idle: u32, hold: u32) -> String {
    format!("      sleep: {{enabled: true, idleSeconds: {idle}, holdSeconds: {hold}}}\n")
}

/// The gateway of the CR `name`, reached from the test.
struct Gateway {
    _forwarder: Forwarder,
    addr: SocketAddr,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl Gateway {
    /// Once the gateway serves (its routes loaded).
    async fn of(cluster: &Cluster, name: &str) -> Gateway {
        let local = cluster.local.expect("a local cluster");
        let gateway = format!("{name}-model-orchestra-gateway");
        let services: Api<Service> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
        let ip = eventually_within(WAKE, "the gateway's Service", || async {
            services.get(&gateway).await.ok()?.spec?.cluster_ip.filter(|ip| ip != "None")
        })
        .await;
        let target: SocketAddr = format!("{ip}:80").parse().unwrap();
        let forwarder = Forwarder::start("127.0.0.1:0".parse().unwrap(), target, local.isolation().clone()).unwrap();
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        let g = Gateway { addr: forwarder.listen, _forwarder: forwarder, client };
        eventually_within(WAKE, "the gateway serves", || async {
            let (code, _) = g.get("/readyz").await.ok()?;
            (code == 200).then_some(())
        })
        .await;
        g
    }

    async fn send(&self, req: http::Request<Full<Bytes>>) -> Result<(u16, String), String> {
        let response = self.client.request(req).await.map_err(|e| e.to_string())?;
        let code = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((code, String::from_utf8_lossy(&body).into_owned()))
    }

    async fn get(&self, path: &str) -> Result<(u16, String), String> {
        let uri = format!("http://{}{path}", self.addr);
        self.send(http::Request::get(uri).body(Full::default()).unwrap()).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<(u16, String), String> {
        let req = json_post(self.addr, path, body);
        self.send(req).await
    }

    /// `n` requests for Paris at once; each one's status code and body.
    async fn paris_at_once(&self, n: usize) -> Vec<(u16, String)> {
        let asked = paris();
        let answers = futures::future::join_all((0..n).map(|_| self.post("/api/generate", &asked))).await;
        answers.into_iter().map(|a| a.unwrap()).collect()
    }

    /// The chunks of a streamed answer, each with when it arrived (since the request).
    async fn stream(&self, path: &str, body: &Value) -> Vec<(Duration, Bytes)> {
        let req = json_post(self.addr, path, body);
        let start = Instant::now();
        let response = self.client.request(req).await.unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let mut chunks = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                chunks.push((start.elapsed(), data));
            }
        }
        chunks
    }

    /// One of the gateway's metrics (summed over its labels matching `labels`).
    async fn metric(&self, name: &str, labels: &str) -> f64 {
        let (_, text) = self.get("/metrics").await.unwrap();
        text.lines()
            .filter(|l| l.starts_with(name) && l.contains(labels))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Each replica of the gateway of the CR `name`, reached at its pod's address.
    async fn replicas(cluster: &Cluster, name: &str) -> Vec<Gateway> {
        let local = cluster.local.expect("a local cluster");
        let mut replicas = Vec::new();
        for pod in cluster.component_pods(name, "gateway").await {
            let Some(ip) = pod.status.and_then(|s| s.pod_ip) else { continue };
            let target: SocketAddr = format!("{ip}:8080").parse().unwrap();
            let forwarder =
                Forwarder::start("127.0.0.1:0".parse().unwrap(), target, local.isolation().clone()).unwrap();
            let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
            replicas.push(Gateway { addr: forwarder.listen, _forwarder: forwarder, client });
        }
        replicas
    }

    /// One of the gateway's metrics summed over every replica of the gateway of `name`.
    async fn metric_everywhere(cluster: &Cluster, name: &str, metric: &str, labels: &str) -> f64 {
        let mut sum = 0.0;
        for replica in Gateway::replicas(cluster, name).await {
            sum += replica.metric(metric, labels).await;
        }
        sum
    }
}

/// A stack `name` serving SmolLM2 in the namespace of `test`, ready, and its gateway.
async fn serving(test: &str, name: &str) -> (Cluster, Operator, Gateway) {
    let (cluster, operator) = setup(test).await;
    apply(&cluster, &cr(name, &["smollm2:135m"], "")).await;
    wait_ready(&cluster, name).await;
    let gateway = Gateway::of(&cluster, name).await;
    (cluster, operator, gateway)
}

/// Deterministic, short: SmolLM2 completes the capital of France.
fn paris() -> Value {
    json!({"model": "smollm2:135m", "prompt": "The capital of France is", "raw": true, "stream": false,
        "options": {"temperature": 0, "seed": 0, "num_predict": 8}})
}

async fn wait_asleep(cluster: &Cluster, name: &str) {
    wait_status(cluster, name, &format!("{name} asleep"), |cr| (cr.data["status"]["asleep"] == "chat").then_some(()))
        .await;
}

async fn replicas(cluster: &Cluster, name: &str) -> i32 {
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let d = deployments.get(&format!("{name}-model-orchestra-chat")).await.unwrap();
    d.spec.and_then(|s| s.replicas).unwrap_or(1)
}

/// The CR's Events with `reason`: their notes.
async fn events(cluster: &Cluster, name: &str, reason: &str) -> Vec<String> {
    typed_events(cluster, name, reason).await.into_iter().map(|(_, note)| note).collect()
}

/// The CR's Events with `reason`: their types and notes.
async fn typed_events(cluster: &Cluster, name: &str, reason: &str) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_application_sleeps_and_twenty_requests_wake_it_with_one_scale_up_and_are_all_answered() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("gateway_wake").await;
    apply(&cluster, &cr("wake", &["smollm2:135m"], &sleeping(4, 150))).await;
    let gateway = Gateway::of(&cluster, "wake").await;

    wait_asleep(&cluster, "wake").await;
    let asleep = wait_ready(&cluster, "wake").await;
    assert_eq!(asleep.data["status"]["applications"]["chat"]["sleep"], "Sleeping");
    assert_eq!(replicas(&cluster, "wake").await, 0);
    let notes = eventually_within(WAKE, "the Sleeping Event", || async {
        Some(events(&cluster, "wake", "Sleeping").await).filter(|e| !e.is_empty())
    })
    .await;
    assert!(notes[0].contains("chat"), "{notes:?}");

    let mark = cluster.audit_mark();
    for (code, body) in gateway.paris_at_once(20).await {
        assert_eq!(code, 200, "{body}");
        let text: Value = serde_json::from_str(&body).unwrap();
        assert!(text["response"].as_str().unwrap().contains("Paris"), "{body}");
    }
    // One scale-up for the twenty: the gateway's one write to the Deployment's scale.
    let scale_writes: Vec<_> = cluster
        .audit()
        .unwrap()
        .since(mark)
        .into_iter()
        .filter(|e| e.is_write() && e.resource() == "deployments" && e.subresource() == "scale")
        .filter(|e| e.name() == "wake-model-orchestra-chat" && e.code() < 300)
        .collect();
    assert_eq!(
        scale_writes.len(),
        1,
        "one write however many of the gateway's replicas held requests: {scale_writes:?}"
    );
    let chat = "application=\"chat\"";
    assert_eq!(Gateway::metric_everywhere(&cluster, "wake", "model_gateway_wakeups_total", chat).await, 1.0);
    let woke = Gateway::metric_everywhere(&cluster, "wake", "model_gateway_wakeup_duration_seconds_count", chat).await;
    assert_eq!(woke, 1.0);
    // The requests were published for the stack, on a Lease the application's Deployment owns.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let lease = leases.get("wake-model-orchestra-chat-activity").await.unwrap();
    let owner = &lease.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Deployment", "wake-model-orchestra-chat"));
    let spec = lease.spec.unwrap();
    assert!(spec.holder_identity.unwrap().starts_with("wake-model-orchestra-gateway-"), "a gateway pod published");
    assert!(spec.renew_time.is_some());
    let awake = wait_status(&cluster, "wake", "awake", |cr| {
        (cr.data["status"]["applications"]["chat"]["sleep"] == "Awake").then(|| cr.clone())
    })
    .await;
    assert_eq!(awake.data["status"]["asleep"], Value::Null);
    eventually_within(WAKE, "the Woke Event", || async {
        Some(events(&cluster, "wake", "Woke").await).filter(|e| !e.is_empty())
    })
    .await;
    // Ready is news of the Normal kind, though the spec's warning (an insecure registry)
    // keeps Degraded.
    let ready = typed_events(&cluster, "wake", "Ready").await;
    assert!(!ready.is_empty() && ready.iter().all(|(t, _)| t == "Normal"), "{ready:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_busy_at_one_gateway_replica_is_not_put_to_sleep_by_the_other() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("gateway_shared_idle").await;
    apply(&cluster, &cr("shared", &["smollm2:135m"], &sleeping(3, 150))).await;
    wait_ready(&cluster, "shared").await;
    let replicas = eventually_within(WAKE, "both gateway replicas", || async {
        let replicas = Gateway::replicas(&cluster, "shared").await;
        (replicas.len() == 2).then_some(replicas)
    })
    .await;
    // The application sleeps after 3 s without a request; only one gateway gets any, for
    // five times as long.
    let mark = cluster.audit_mark();
    let busy_until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < busy_until {
        let (code, body) = replicas[0].post("/api/generate", &paris()).await.unwrap();
        assert_eq!(code, 200, "{body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let scale_writes: Vec<_> = cluster
        .audit()
        .unwrap()
        .since(mark)
        .into_iter()
        .filter(|e| e.is_write() && e.resource() == "deployments" && e.subresource() == "scale")
        .filter(|e| e.name() == "shared-model-orchestra-chat")
        .collect();
    assert!(scale_writes.is_empty(), "put to sleep while busy at the other gateway: {scale_writes:?}");
    wait_asleep(&cluster, "shared").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_a_model_nobody_serves_is_answered_404_listing_the_served_models() {
    let (cluster, _operator) = setup("gateway_404").await;
    apply(&cluster, &cr("unknown", &["smollm2:135m"], "")).await;
    let gateway = Gateway::of(&cluster, "unknown").await;

    let asked = json!({"model": "llama3:70b", "messages": [{"role": "user", "content": "hi"}]});
    let (code, body) = gateway.post("/v1/chat/completions", &asked).await.unwrap();
    assert_eq!(code, 404, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("llama3:70b"), "{body}");
    assert_eq!(body["models"], json!(["smollm2:135m"]), "{body}");
    let (code, body) = gateway.post("/api/generate", &json!({"model": "qwen2", "prompt": "hi"})).await.unwrap();
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("smollm2:135m"), "{body}");

    // The lists are the gateway's own: no application is asked (or woken) for them.
    let (code, body) = gateway.get("/v1/models").await.unwrap();
    assert_eq!(code, 200);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["data"][0]["id"], "smollm2:135m");
    let (_, body) = gateway.get("/api/tags").await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["models"][0]["name"], "smollm2:135m");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_that_cannot_succeed_answers_the_held_requests_503_with_the_reason_by_their_deadline() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("gateway_fail").await;
    apply(&cluster, &cr("fail", &["smollm2:135m"], &sleeping(2, 20))).await;
    let gateway = Gateway::of(&cluster, "fail").await;
    wait_asleep(&cluster, "fail").await;
    // While it sleeps, its image becomes one the registry does not have.
    let missing = "docker.io/ollama/ollama:0.0.0-absent";
    let yaml = cr("fail", &["smollm2:135m"], &sleeping(2, 20)).replace(
        "          stallSeconds: 5\n",
        &format!("          stallSeconds: 5\n          image: \"{missing}\"\n"),
    );
    apply(&cluster, &yaml).await;
    wait_asleep(&cluster, "fail").await;
    // Its last replica gone: a replica put to sleep serves on, out of its Service, for its
    // drain, and kube-proxy sends a Service's traffic to such a replica when it has no other.
    eventually_within(WAKE, "the sleeping replica gone", || async {
        cluster.component_pods("fail", "application-chat").await.is_empty().then_some(())
    })
    .await;

    let start = Instant::now();
    let answers = gateway.paris_at_once(3).await;
    let took = start.elapsed();
    for (code, body) in &answers {
        assert_eq!(*code, 503, "{body}");
        assert!(body.contains("did not serve within 20 s"), "{body}");
        assert!(body.contains(missing) || body.to_lowercase().contains("image"), "the reason: {body}");
    }
    assert!(took >= Duration::from_secs(20) && took < Duration::from_secs(40), "answered after {took:?}");
    let cr = cluster.mo_api_at(model_orchestra_api::ApiVersion::V1alpha2).get("fail").await.unwrap();
    let message = cr.data["status"]["applications"]["chat"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains(missing) || message.to_lowercase().contains("image"), "status: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_restarted_while_an_application_sleeps_still_wakes_it_on_the_next_request() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("gateway_restart").await;
    apply(&cluster, &cr("restart", &["smollm2:135m"], &sleeping(3, 150))).await;
    wait_asleep(&cluster, "restart").await;

    let old = cluster.component_pods("restart", "gateway").await;
    assert_eq!(old.len(), 2, "the gateway's two replicas");
    let pods = cluster.pods();
    for pod in &old {
        pods.delete(&pod.metadata.name.clone().unwrap(), &DeleteParams::default()).await.unwrap();
    }
    // Restarted: the old pods gone (each stops on SIGTERM once nothing is in flight), new
    // ones in their place.
    eventually_within(WAKE, "only new gateway pods", || async {
        let now = cluster.component_pods("restart", "gateway").await;
        let renewed = now.iter().all(|p| old.iter().all(|o| o.metadata.uid != p.metadata.uid));
        (now.len() == 2 && renewed).then_some(())
    })
    .await;
    let gateway = Gateway::of(&cluster, "restart").await;
    assert_eq!(replicas(&cluster, "restart").await, 0, "still asleep");

    let (code, body) = gateway.post("/api/generate", &paris()).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("Paris"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_typo_leaves_the_present_model_answering_through_the_gateway_and_the_typo_is_refused_naming_why() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("gateway_typo").await;
    apply(&cluster, &cr("typo", &["smollm2:135m", "smolm2:135m"], "")).await;
    wait_status(&cluster, "typo", "the typo is Failed as missing", |cr| {
        let models = cr.data["status"]["applications"]["chat"]["models"].as_array()?.clone();
        let typo = models.iter().find(|m| m["name"] == "smolm2:135m")?;
        (typo["phase"] == "Failed" && typo["message"].as_str()?.contains("does not exist")).then_some(())
    })
    .await;
    let gateway = Gateway::of(&cluster, "typo").await;

    let (code, body) = gateway.post("/api/generate", &paris()).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("Paris"), "{body}");
    let typo = json!({"model": "smolm2:135m", "messages": [{"role": "user", "content": "Hi"}]});
    let said = eventually("the gateway names why the typo is not served", || async {
        let (code, body) = gateway.post("/v1/chat/completions", &typo).await.ok()?;
        let error: Value = serde_json::from_str(&body).ok()?;
        let message = error["error"]["message"].as_str()?.to_string();
        (code == 404 && message.contains("models registry does not have it")).then_some(message)
    })
    .await;
    assert!(said.contains("spec.applications.chat.engine.ollama.models"), "{said}");
    let (_, models) = gateway.get("/v1/models").await.unwrap();
    assert!(models.contains("smollm2:135m") && !models.contains("smolm2"), "{models}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_stream_through_the_gateway_as_the_engine_writes_them_ndjson_and_sse() {
    let _pulls = FAULTS.read().await;
    let (_cluster, _operator, gateway) = serving("gateway_stream", "stream").await;

    let ollama = json!({"model": "smollm2:135m", "prompt": "Once upon a time", "raw": true, "stream": true,
        "options": {"temperature": 0, "seed": 0, "num_predict": 128}});
    let chunks = gateway.stream("/api/generate", &ollama).await;
    let lines: usize = chunks.iter().map(|(_, c)| c.iter().filter(|b| **b == b'\n').count()).sum();
    assert!(lines >= 100, "{lines} NDJSON lines in {} chunks", chunks.len());
    // The engine's own generation time (its last line's `eval_duration`): the chunks came
    // over (most of) it, not at its end.
    let last: Value = serde_json::from_slice(chunks.last().unwrap().1.trim_ascii()).unwrap();
    let generating = Duration::from_nanos(last["eval_duration"].as_u64().unwrap());
    assert_streamed(&chunks, generating / 2);

    let openai = json!({"model": "smollm2:135m", "stream": true, "max_tokens": 128, "temperature": 0,
        "messages": [{"role": "user", "content": "Tell me a long story."}]});
    let chunks = gateway.stream("/v1/chat/completions", &openai).await;
    let events = chunks.iter().map(|(_, c)| String::from_utf8_lossy(c).matches("data: ").count()).sum::<usize>();
    assert!(events >= 50, "{events} server-sent events");
    // OpenAI's events carry no generation time; this answer's own length stands for it (the
    // machine's load changes between two answers: the first one's would not do).
    assert_streamed(&chunks, chunks.last().unwrap().0 / 2);
}

/// The first bytes came at least `spread` before the last: the gateway forwarded them as
/// the engine wrote them (buffered, they would all come at once).
fn assert_streamed(chunks: &[(Duration, Bytes)], spread: Duration) {
    assert!(chunks.len() >= 10, "{} chunks: buffered?", chunks.len());
    let (first, last) = (chunks[0].0, chunks[chunks.len() - 1].0);
    assert!(
        last - first >= spread,
        "first chunk at {first:?}, last at {last:?}, less than {spread:?} apart: buffered?"
    );
}

/// How a client of the load fared: answers whole, and every failure with what it was.
#[derive(Default)]
struct Tally {
    answered: usize,
    failed: Vec<String>,
}

/// A client that asks without a pause, streamed answers and whole ones in turn, until told
/// to stop: what it got.
fn load(
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    addr: SocketAddr,
) -> (std::sync::Arc<std::sync::atomic::AtomicBool>, tokio::task::JoinHandle<Tally>) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let load = tokio::spawn(async move {
        let mut tally = Tally::default();
        let mut streamed = true;
        // Told to stop, a load has still asked at least `AT_LEAST_ASKED`: a fault that passes
        // quickly on a slow machine (a drain of seconds, answers of ~20 s) is still met by a load.
        while !stopped.load(std::sync::atomic::Ordering::SeqCst) || tally.answered + tally.failed.len() < AT_LEAST_ASKED
        {
            match ask_whole(&client, addr, "smollm2:135m", streamed).await {
                Ok(()) => tally.answered += 1,
                Err(e) => tally.failed.push(if e.unsent { format!("never sent: {}", e.said) } else { e.said }),
            }
            streamed = !streamed;
        }
        tally
    });
    (stop, load)
}

impl Tally {
    fn assert_nothing_lost(&self, what: &str) {
        eprintln!("{what}: {} answered whole, {} failed", self.answered, self.failed.len());
        let asked = self.answered + self.failed.len();
        assert!(self.failed.is_empty(), "{} of {asked} lost: {:#?}", self.failed.len(), self.failed);
    }
}

/// The fewest requests a load asks, however soon it is told to stop.
const AT_LEAST_ASKED: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_replica_deleted_under_load_loses_no_request() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator, gateway) = serving("gateway_failover", "failover").await;
    let replicas = cluster.component_pods("failover", "gateway").await;
    assert_eq!(replicas.len(), 2, "the gateway's two replicas");

    // A connection per request, so that each request is sent to a gateway the Service
    // chooses then. (A connection a client keeps stays with its pod; the gateway closes it
    // after the answer it carries, and an HTTP/1.1 client sending on it at that instant
    // must retry, as every keep-alive client must.)
    let client = Client::builder(hyper_util::rt::TokioExecutor::new()).pool_max_idle_per_host(0).build_http();
    let clients: Vec<_> = (0..4).map(|_| load(client.clone(), gateway.addr)).collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let deleted = replicas[0].metadata.name.clone().unwrap();
    cluster.pods().delete(&deleted, &DeleteParams::default()).await.unwrap();
    // Gone: it left the Service's endpoints, served what came meanwhile, closed its
    // connections after their answers and stopped.
    // Within its grace period (130 s: the answers it holds may take that long here).
    eventually_within(Duration::from_secs(140), "the deleted gateway pod is gone", || async {
        cluster.pods().get_opt(&deleted).await.ok()?.is_none().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut all = Tally::default();
    for (stop, load) in clients {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let tally = load.await.unwrap();
        all.answered += tally.answered;
        all.failed.extend(tally.failed);
    }
    all.assert_nothing_lost("a gateway replica deleted under the load of four clients");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_under_load_loses_no_request_through_the_gateway() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator, gateway) = serving("gateway_rollout", "rollout").await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let serving = ListParams::default().labels("app.kubernetes.io/component=application-chat");
    let before: Vec<String> =
        pods.list(&serving).await.unwrap().items.into_iter().filter_map(|p| p.metadata.name).collect();
    assert_eq!(before.len(), 1, "{before:?}");

    // With one replica, what the client has in flight when the old replica is told to stop
    // was sent to it: Ollama would cut it there, were the replica not drained first.
    let (stop, load) = load(gateway.client.clone(), gateway.addr);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // A change of the pods' template: the Deployment starts a new replica, and stops the old
    // one once the new one is ready.
    apply(&cluster, &cr("rollout", &["smollm2:135m"], "      podAnnotations: {rolled: \"1\"}\n")).await;
    // The new replica's start and pulls, then the old one's drain (up to 115 s).
    eventually_within(Duration::from_secs(420), "the replica before the change is gone", || async {
        let names: Vec<String> =
            pods.list(&serving).await.ok()?.items.into_iter().filter_map(|p| p.metadata.name).collect();
        (!names.iter().any(|n| before.contains(n))).then_some(())
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);

    let retries = Gateway::metric_everywhere(&cluster, "rollout", "model_gateway_retries_total", "").await;
    eprintln!("rollout under load: {retries} sent again");
    load.await.unwrap().assert_nothing_lost("rollout under load");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_told_to_stop_serves_the_connection_it_holds_past_any_fixed_drain_then_stops() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator, _gateway) = serving("gateway_drain", "drain").await;
    let local = cluster.local.expect("a local cluster");
    let replicas = cluster.component_pods("drain", "application-chat").await;
    assert_eq!(replicas.len(), 1);
    let name = replicas[0].metadata.name.clone().unwrap();
    let ip = replicas[0].status.as_ref().and_then(|s| s.pod_ip.clone()).expect("the replica's address");

    // A client's connection to the replica, open (idle) when the replica is told to stop.
    let stream = local.isolation().connect_async(format!("{ip}:11434").parse().unwrap(), WAKE).await.unwrap();
    let (mut held, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(connection);
    cluster.pods().delete(&name, &DeleteParams::default()).await.unwrap();

    // Longer than any fixed drain the chart had (20 s): the replica still serves, because
    // something is connected to it.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let stopping = cluster.pods().get(&name).await.expect("the replica is still there");
    assert!(stopping.metadata.deletion_timestamp.is_some(), "it was told to stop");
    let request = http::Request::post("/api/generate")
        .header(http::header::HOST, format!("{ip}:11434"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(paris().to_string())))
        .unwrap();
    let answer = held.send_request(request).await.expect("answered on the connection it holds");
    assert_eq!(answer.status(), 200);
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    let said: Value = serde_json::from_slice(&body).unwrap();
    assert!(said["response"].as_str().unwrap_or_default().contains("Paris"), "{said}");

    // Closed: the replica stops once no other connection carries an answer, within its
    // longest drain (115 s from the stop) and Ollama's exit. (Here the operator runs outside
    // the cluster and reaches Ollama through the API server's pod proxy, which keeps an idle
    // connection to the pod for up to 90 s after its last use: answered, it does not count.)
    drop(held);
    let _ = connection.await;
    eventually_within(Duration::from_secs(120), "the replica gone", || async {
        cluster.pods().get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
}
