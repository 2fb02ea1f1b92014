//! Verified promotion on the real control plane: a new revision of an application takes
//! traffic only after its candidate answers the success prompt through the gateway, and a
//! candidate that fails takes nothing down.
//!
//! Takeoff's gateway is not a public image, so its pods stay on kwok's nodes and run no
//! process: a stub stands in for the gateway's OpenAI-compatible API (what a real gateway
//! would answer for a consumer group). The operator reaches it the way it does outside a
//! cluster: the API server's real service proxy, through the gateway's real Service and
//! EndpointSlice, to the gateway pod's IP. The stub listens inside the cluster's network
//! namespace, with kwok's pod range on that namespace's loopback
//! (`serve_fake_pod_addresses`) — never an address of the host. One stub serves every test
//! of this binary: it answers per consumer group, and each test's groups are its own.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::support::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::api::DynamicObject;
use kube::ResourceExt;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::ApiVersion;
use serde_json::{json, Value};

/// What the stub gateway answers for a consumer group.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    Yes,
    No,
    Garbage,
    ServerError,
    Hang,
}

/// The stub gateway: answers `/v1/chat/completions` per consumer group (the request's
/// `model`), `Yes` for a group it was told nothing about, and logs every request.
#[derive(Clone, Default)]
struct Gateway {
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    log: Arc<Mutex<Vec<(SystemTime, String, Value)>>>,
}

impl Gateway {
    fn answer(&self, group: &str, answer: Answer) {
        self.answers.lock().unwrap().insert(group.to_string(), answer);
    }

    /// Requests received for `group`.
    fn requests(&self, group: &str) -> Vec<(SystemTime, Value)> {
        self.log.lock().unwrap().iter().filter(|(_, g, _)| g == group).map(|(t, _, b)| (*t, b.clone())).collect()
    }

    /// The stub of this test binary: it serves every fake gateway pod's address (kwok's
    /// pod range on the loopback of the cluster's namespace) at the port the gateway
    /// Service's `http` port targets (`openai`, 3003), on a thread and runtime of its own.
    fn shared() -> Gateway {
        static SHARED: std::sync::OnceLock<Gateway> = std::sync::OnceLock::new();
        SHARED
            .get_or_init(|| {
                let cluster = local_cluster::Cluster::shared();
                cluster.serve_fake_pod_addresses().expect("kwok's pod range on the namespace's loopback");
                let listener =
                    cluster.isolation().bind(SocketAddr::from(([0, 0, 0, 0], 3003))).expect("the stub's listener");
                listener.set_nonblocking(true).unwrap();
                let gateway = Gateway::default();
                let serving = gateway.clone();
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                    runtime.block_on(async move {
                        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                        loop {
                            let Ok((stream, _)) = listener.accept().await else { return };
                            let gateway = serving.clone();
                            tokio::spawn(async move {
                                let service = hyper::service::service_fn(move |req| gateway.clone().handle(req));
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                    .await;
                            });
                        }
                    });
                });
                gateway
            })
            .clone()
    }

    async fn handle(
        self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
        let path = req.uri().path().to_string();
        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let group = request["model"].as_str().unwrap_or_default().to_string();
        self.log.lock().unwrap().push((SystemTime::now(), group.clone(), request));
        let answer = self.answers.lock().unwrap().get(&group).copied().unwrap_or(Answer::Yes);
        let completion =
            |text: &str| json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]});
        let (code, body) = match (path.as_str(), answer) {
            ("/v1/chat/completions", Answer::Yes) => (200, completion("Yes.").to_string()),
            ("/v1/chat/completions", Answer::No) => (200, completion("No, I cannot.").to_string()),
            ("/v1/chat/completions", Answer::Garbage) => (200, "<html>upstream gone</html>".to_string()),
            ("/v1/chat/completions", Answer::ServerError) => (503, "no reader in this consumer group".to_string()),
            ("/v1/chat/completions", Answer::Hang) => {
                tokio::time::sleep(Duration::from_secs(600)).await;
                (200, String::new())
            }
            _ => (404, "not found".to_string()),
        };
        Ok(hyper::Response::builder().status(code).body(Full::new(Bytes::from(body))).unwrap())
    }
}

/// A v1alpha2 CR with one promoted application `chat` (one answer decides, a short deadline).
fn promoted_cr(namespace: &str, name: &str, model: &str, timeout_seconds: i32) -> Value {
    json!({
        "apiVersion": "models.titanml.co/v1alpha2",
        "kind": "ModelOrchestra",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"applications": {"chat": {
            "readerConfig": {"modelName": model, "device": "cpu"},
            "promotion": {"enabled": true, "periodSeconds": 1, "timeoutSeconds": timeout_seconds, "failureThreshold": 1, "deadlineSeconds": 120}
        }}}
    })
}

/// The candidate's consumer group for this CR, as the operator renders it.
fn candidate_group(cr: &Value) -> String {
    let objects = model_orchestra::render_value(cr, cr["metadata"]["namespace"].as_str().unwrap()).unwrap().objects;
    let candidate = objects.iter().find(|o| o.kind == Kind::ConfigMap && o.name.ends_with("-chat-candidate")).unwrap();
    let config: Value = serde_yaml::from_str(candidate.object["data"]["config.yaml"].as_str().unwrap()).unwrap();
    config["takeoff"]["readers_config"]["chat"]["consumer_group"].as_str().unwrap().to_string()
}

async fn apply(cluster: &Cluster, cr: &Value) {
    cluster.kubectl_with_input(&["apply", "-f", "-"], &serde_json::to_string(cr).unwrap());
}

async fn promotion(cluster: &Cluster, name: &str) -> Option<Value> {
    let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get(name).await.ok()?;
    Some(cr.data["status"]["applications"]["chat"]["promotion"].clone()).filter(|p| !p.is_null())
}

async fn wait_phase(cluster: &Cluster, name: &str, revision_group: &str, phase: &str) -> Value {
    let revision = revision_group.trim_start_matches("verify-").to_string();
    eventually_within(Duration::from_secs(90), &format!("{name}'s promotion of {revision} is {phase}"), || async {
        let p = promotion(cluster, name).await?;
        (p["revision"] == revision.as_str() && p["phase"] == phase).then_some(p)
    })
    .await
}

/// The test's namespace on the shared cluster, the v1alpha2 line, and the stub serving for every
/// gateway pod.
async fn setup(test: &str) -> (Cluster, Operator, Gateway) {
    let cluster = Cluster::start(test).await;
    let gateway = Gateway::shared();
    let v1 = OperatorOptions { routing: "v1", api_version: "v1alpha2", identity: "op-v1", ..Default::default() };
    let operator = Operator::start(&cluster, v1).await;
    (cluster, operator, gateway)
}

async fn deployment(cluster: &Cluster, name: &str) -> Option<DynamicObject> {
    cluster.api(Kind::Deployment).get(name).await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_candidate_says_yes_is_promoted_only_after_the_probe() {
    let (cluster, _operator, gateway) = setup("promote").await;
    let first = promoted_cr(&cluster.namespace, "stack", "org/first", 5);
    apply(&cluster, &first).await;
    // A first deployment is verified too: the application exists only once promoted.
    wait_phase(&cluster, "stack", &candidate_group(&first), "Promoted").await;
    cluster.wait_converged("stack").await;
    let production = "stack-model-orchestra-chat";
    let before = deployment(&cluster, production).await.unwrap();
    let mark = cluster.audit_mark();

    let second = promoted_cr(&cluster.namespace, "stack", "org/second", 5);
    let group = candidate_group(&second);
    let started = std::time::Instant::now();
    apply(&cluster, &second).await;
    let promoted = wait_phase(&cluster, "stack", &group, "Promoted").await;
    assert_eq!(promoted["answer"], "Yes.");
    let converged = cluster.wait_converged("stack").await;
    eprintln!("spec change → Promoted and Ready in {:?}", started.elapsed());
    assert_eq!(converged.data["status"]["conditions"][0]["type"], "Ready");

    // The production Deployment was rolled to the new revision only after the stub said
    // yes: every write to it since the change comes after the matching answer.
    let asked = gateway.requests(&group);
    let answered_at = asked.first().map(|(t, _)| *t).expect("the candidate was asked");
    assert_eq!(asked[0].1["temperature"], 0);
    let writes: Vec<_> = cluster
        .writes_by("op-v1", mark)
        .expect("the audit log")
        .into_iter()
        .filter(|e| e.resource() == "deployments" && e.name() == production)
        .collect();
    assert!(!writes.is_empty(), "the application was rolled to the promoted revision");
    for w in &writes {
        let at: SystemTime = w.at().expect("a timestamp").into();
        assert!(at > answered_at, "the application was written at {at:?}, before the answer at {answered_at:?}");
    }
    let after = deployment(&cluster, production).await.unwrap();
    assert!(after.metadata.generation > before.metadata.generation, "the application rolled");
    eventually("the candidate is gone", || async {
        deployment(&cluster, &format!("{production}-candidate")).await.is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_says_no_changes_nothing_and_the_retry_annotation_reruns_it_once() {
    let (cluster, _operator, gateway) = setup("refuse").await;
    let first = promoted_cr(&cluster.namespace, "stack", "org/first", 5);
    apply(&cluster, &first).await;
    wait_phase(&cluster, "stack", &candidate_group(&first), "Promoted").await;
    cluster.wait_converged("stack").await;
    let production = "stack-model-orchestra-chat";
    let before = deployment(&cluster, production).await.unwrap();
    let pods_before: Vec<String> =
        cluster.component_pods("stack", "application-chat").await.iter().filter_map(|p| p.uid()).collect();

    let second = promoted_cr(&cluster.namespace, "stack", "org/broken-weights", 5);
    let group = candidate_group(&second);
    gateway.answer(&group, Answer::No);
    apply(&cluster, &second).await;
    let failed = wait_phase(&cluster, "stack", &group, "Failed").await;
    assert_eq!(failed["answer"], "No, I cannot.");
    let cr = cluster.wait_reason("stack", "PromotionFailed").await;
    let degraded =
        cr.data["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Degraded").unwrap().clone();
    assert_eq!((degraded["status"].as_str(), degraded["reason"].as_str()), (Some("True"), Some("PromotionFailed")));
    assert!(degraded["message"].as_str().unwrap().contains("the previous revision keeps serving"), "{degraded}");

    // The application is untouched: same generation, same pods.
    let after = deployment(&cluster, production).await.unwrap();
    assert_eq!(after.metadata.generation, before.metadata.generation);
    let pods_after: Vec<String> =
        cluster.component_pods("stack", "application-chat").await.iter().filter_map(|p| p.uid()).collect();
    assert_eq!(pods_after, pods_before);
    let events = || async {
        let list = cluster.kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=stack,reason=PromotionFailed",
            "-o",
            "json",
        ]);
        serde_json::from_str::<Value>(&list).unwrap()["items"].as_array().cloned().unwrap_or_default()
    };
    let warning = eventually("a PromotionFailed Event", || async { events().await.into_iter().next() }).await;
    assert!(warning["message"].as_str().unwrap_or_default().contains("No, I cannot."), "{warning}");

    // The retry annotation runs it again, once per value.
    let asked = gateway.requests(&group).len();
    cluster.kubectl(&["annotate", "modelorchestra", "stack", "models.titanml.co/retry-promotion=try-2"]);
    eventually("the retry asked the candidate again", || async {
        (gateway.requests(&group).len() > asked).then_some(())
    })
    .await;
    let again = wait_phase(&cluster, "stack", &group, "Failed").await;
    assert_eq!(again["retry"], "try-2");
    let asked = gateway.requests(&group).len();
    cluster.kubectl(&["annotate", "--overwrite", "modelorchestra", "stack", "models.titanml.co/retry-promotion=try-2"]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(gateway.requests(&group).len(), asked, "the same value twice does nothing");
    assert_eq!(events().await.len(), 1, "one Event for the failure");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_errs_answers_garbage_or_hangs_fails_the_candidate_and_stalls_no_other_cr() {
    let (cluster, operator, gateway) = setup("faults").await;
    let cases = [
        ("errs", Answer::ServerError, "503"),
        ("garbage", Answer::Garbage, "not JSON"),
        ("hangs", Answer::Hang, "no answer within 2s"),
    ];
    for (name, answer, _) in cases {
        let cr = promoted_cr(&cluster.namespace, name, &format!("org/{name}"), 2);
        gateway.answer(&candidate_group(&cr), answer);
        apply(&cluster, &cr).await;
    }
    // Meanwhile a CR without promotion converges.
    let plain = cr_with_apps("plain", &["chat"], None).replace("v1alpha1", "v1alpha2");
    cluster.kubectl_with_input(&["apply", "-f", "-"], &plain);
    cluster.wait_converged("plain").await;
    for (name, answer, says) in cases {
        let cr = promoted_cr(&cluster.namespace, name, &format!("org/{name}"), 2);
        let failed = wait_phase(&cluster, name, &candidate_group(&cr), "Failed").await;
        assert!(failed["message"].as_str().unwrap().contains(says), "{answer:?}: {failed}");
        // A first deployment that fails is never Ready: nothing of the application runs.
        let cr = cluster.wait_reason(name, "PromotionFailed").await;
        assert_eq!(ready_condition(&cr).unwrap()["status"], "False");
        assert!(deployment(&cluster, &format!("{name}-model-orchestra-chat")).await.is_none());
    }
    let metrics = fetch_metrics(&operator.metrics_addr().await).await;
    for result in ["error", "timeout"] {
        assert!(
            metric(&metrics, &format!("model_orchestra_promotion_probes_total{{result=\"{result}\"}}")) >= 1.0,
            "{result}"
        );
    }
}
