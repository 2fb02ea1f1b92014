//! Ollama applications on the real node, with real models: the image the project builds
//! from Ollama's pinned Go module, pulled by containerd from the cluster's registry as
//! `docker.io/ollama/ollama`; SmolLM2 135M and Gemma 3 270M (GGUF files from PyPI), pulled
//! by Ollama from the cluster's models registry as the operator tells each replica to. The
//! operator runs as a process (out of the cluster): it reaches replicas through the API
//! server's pod proxy, as `make run` does.
//!
//! The models registry's faults (a stall, an outage) are the shared cluster's: the tests
//! that turn them on hold [`FAULTS`] for writing, the other pulling tests for reading.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use local_cluster::ollama::{TestModel, GEMMA3, SMOLLM2};
use model_orchestra_api::ApiVersion;
use serde_json::{json, Value};
use tokio::sync::{OnceCell, RwLock};

use crate::support::*;

/// Held for writing by a test that breaks the models registry.
pub(crate) static FAULTS: RwLock<()> = RwLock::const_new(());
/// The Ollama image and the test models, pushed once per shared cluster.
static PUSHED: OnceCell<()> = OnceCell::const_new();
/// Long enough for a pod's image pull and start, a model's pull and its first load.
const PULLED: Duration = Duration::from_secs(240);
pub(crate) const MODELS_REGISTRY: &str = "registry.kube-system.svc:5000";

/// The test's namespace on the shared cluster, its pods on the real node; the Ollama image
/// and the test models in the registries; the v1alpha2 line running.
pub(crate) async fn setup(test: &str) -> (Cluster, Operator) {
    let cluster = Cluster::start(test).await;
    let local = cluster.local.expect("the Ollama tests run on the local cluster (a real node)");
    PUSHED
        .get_or_init(|| async {
            local.push_ollama_image().await.unwrap_or_else(|e| panic!("{e}"));
            local.push_models(&[SMOLLM2, GEMMA3]).await.unwrap_or_else(|e| panic!("{e}"));
        })
        .await;
    local.run_pods_for_real(&cluster.namespace).await.unwrap();
    let image = shared_operator_image(local).await;
    let extra_args = ["--model-gateway-image", image];
    let options = OperatorOptions { api_version: "v1alpha2", extra_args: &extra_args, ..Default::default() };
    let operator = Operator::start(&cluster, options).await;
    (cluster, operator)
}

/// A CR `name` with one Ollama application `chat` serving `models` from the models
/// registry; `extra` is more of the application's YAML (indented for it).
pub(crate) fn cr(name: &str, models: &[&str], extra: &str) -> String {
    let models: Vec<Value> = models.iter().map(|m| json!({"name": m})).collect();
    format!(
        r#"apiVersion: models.titanml.co/v1alpha2
kind: ModelOrchestra
metadata:
  name: {name}
spec:
  applications:
    chat:
      engine:
        ollama:
          models: {models}
          registry: {{host: "{MODELS_REGISTRY}", insecure: true}}
          stallSeconds: 5
      resources:
        requests: {{cpu: 100m, memory: 256Mi}}
{extra}"#,
        models = serde_json::to_string(&models).unwrap()
    )
}

/// `kubectl apply --server-side` of the CR, as a user would.
pub(crate) async fn apply(cluster: &Cluster, yaml: &str) {
    cluster.kubectl_with_input(&["apply", "--server-side", "-f", "-"], yaml);
}

/// The application's Service (`<release>-<app>`).
pub(crate) fn service(name: &str) -> String {
    format!("{name}-model-orchestra-chat")
}

pub(crate) fn app_status(cr: &kube::api::DynamicObject) -> Value {
    cr.data["status"]["applications"]["chat"].clone()
}

/// The status of `model`, as the CR's status reports it.
fn model_status(cr: &kube::api::DynamicObject, model: &str) -> Option<Value> {
    app_status(cr)["models"].as_array()?.iter().find(|m| m["name"] == model).cloned()
}

/// Waits until the CR `name`'s status (for its generation) satisfies `f`.
pub(crate) async fn wait_status<T>(
    cluster: &Cluster,
    name: &str,
    what: &str,
    f: impl Fn(&kube::api::DynamicObject) -> Option<T>,
) -> T {
    let f = &f;
    eventually_within(PULLED, what, || async move {
        let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get(name).await.ok()?;
        if cr.data["status"]["observedGeneration"].as_i64() != cr.metadata.generation {
            return None;
        }
        f(&cr)
    })
    .await
}

pub(crate) async fn wait_ready(cluster: &Cluster, name: &str) -> kube::api::DynamicObject {
    wait_status(cluster, name, &format!("{name} is Ready"), |cr| {
        (ready_condition(cr)?["status"] == "True").then(|| cr.clone())
    })
    .await
}

/// `POST path` of the Service `service` through the API server's service proxy.
async fn ask(cluster: &Cluster, service: &str, path: &str, body: Value) -> Result<Value, String> {
    let uri = format!("/api/v1/namespaces/{}/services/{service}:http/proxy{path}", cluster.namespace);
    let request = http::Request::post(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let response = cluster.client.send(request).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.map_err(|e| e.to_string())?.to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    if !status.is_success() {
        return Err(format!("{status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))
}

/// The model's continuation of `prompt`, deterministic, through the Service.
async fn generate(cluster: &Cluster, service: &str, model: &str, prompt: &str) -> String {
    try_generate(cluster, service, model, prompt).await.unwrap_or_else(|e| panic!("{model}: {e}"))
}

async fn try_generate(cluster: &Cluster, service: &str, model: &str, prompt: &str) -> Result<String, String> {
    let body = json!({"model": model, "prompt": prompt, "raw": true, "stream": false,
        "options": {"temperature": 0, "seed": 0, "num_predict": 12}});
    let answer = ask(cluster, service, "/api/generate", body).await?;
    answer["response"].as_str().map(str::to_string).ok_or_else(|| format!("no response: {answer}"))
}

/// The models the Service's replica holds (`GET /api/tags`), by name.
async fn held(cluster: &Cluster, service: &str) -> Vec<String> {
    let uri = format!("/api/v1/namespaces/{}/services/{service}:http/proxy/api/tags", cluster.namespace);
    let text = cluster.client.request_text(http::Request::get(uri).body(vec![]).unwrap()).await.unwrap();
    let tags: Value = serde_json::from_str(&text).unwrap();
    tags["models"].as_array().unwrap().iter().filter_map(|m| m["name"].as_str().map(str::to_string)).collect()
}

pub(crate) async fn application_pods(cluster: &Cluster, name: &str) -> Vec<Pod> {
    let pods = cluster.component_pods(name, "application-chat").await;
    pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect()
}

fn condition(pod: &Pod, type_: &str) -> Option<k8s_openapi::api::core::v1::PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_).cloned()
}

/// The model's reported size is its GGUF file's and a few small layers (template, params).
fn assert_size_of(status: &Value, model: TestModel) {
    let file = std::fs::metadata(local_cluster::ollama::models_dir().join(model.gguf)).unwrap().len();
    let size = status["size"].as_u64().unwrap_or_else(|| panic!("no size: {status}"));
    assert!((file..file + 65_536).contains(&size), "{size} bytes for the {file} of {}: {status}", model.gguf);
}

fn restarts(pod: &Pod) -> i32 {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default();
    statuses.iter().map(|c| c.restart_count).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_application_is_ready_once_its_model_is_pulled_and_the_model_answers_through_its_service() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("ollama_ready").await;
    apply(&cluster, &cr("chat", &["smollm2:135m"], "")).await;

    let ready = wait_ready(&cluster, "chat").await;
    let model = model_status(&ready, "smollm2:135m").expect("the model in the status");
    assert_eq!(model["phase"], "Ready", "{model}");
    assert!(model["digest"].as_str().unwrap().starts_with("sha256:"), "{model}");
    assert_size_of(&model, SMOLLM2);
    assert!(model["lastPullTime"].is_string(), "{model}");
    assert_eq!(app_status(&ready)["address"], format!("{}.{}.svc:11434", service("chat"), cluster.namespace));

    // The replica was not Ready before the operator found its model present.
    let pods = application_pods(&cluster, "chat").await;
    assert_eq!(pods.len(), 1);
    let gate = condition(&pods[0], "models.titanml.co/models-ready").expect("the models-ready condition");
    let pod_ready = condition(&pods[0], "Ready").expect("Ready");
    assert_eq!((gate.status.as_str(), pod_ready.status.as_str()), ("True", "True"));
    assert!(pod_ready.last_transition_time >= gate.last_transition_time, "{pod_ready:?} before {gate:?}");

    let answer = generate(&cluster, &service("chat"), "smollm2:135m", "The capital of France is").await;
    assert!(answer.contains("Paris"), "the model's answer: {answer:?}");
    // And through Ollama's OpenAI-compatible API.
    let chat = ask(
        &cluster,
        &service("chat"),
        "/v1/chat/completions",
        json!({"model": "smollm2:135m", "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": "What is the capital of France?"}]}),
    )
    .await
    .unwrap();
    let content = chat["choices"][0]["message"]["content"].as_str().unwrap_or_default();
    assert!(content.contains("Paris"), "{chat}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_added_is_pulled_and_a_model_removed_is_deleted_without_restarting_the_replica() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("ollama_add_remove").await;
    apply(&cluster, &cr("chat", &["smollm2:135m"], "")).await;
    wait_ready(&cluster, "chat").await;
    let before = application_pods(&cluster, "chat").await;
    assert_eq!(before.len(), 1);

    apply(&cluster, &cr("chat", &["smollm2:135m", "gemma3:270m"], "")).await;
    let both = wait_status(&cluster, "chat", "both models are Ready", |cr| {
        let ready =
            ["smollm2:135m", "gemma3:270m"].iter().all(|m| model_status(cr, m).is_some_and(|s| s["phase"] == "Ready"));
        (ready && ready_condition(cr)?["status"] == "True").then(|| cr.clone())
    })
    .await;
    assert_size_of(&model_status(&both, "gemma3:270m").unwrap(), GEMMA3);
    assert!(held(&cluster, &service("chat")).await.contains(&"gemma3:270m".to_string()));
    let answer = generate(&cluster, &service("chat"), "gemma3:270m", "The capital of France is").await;
    assert!(!answer.is_empty());

    apply(&cluster, &cr("chat", &["smollm2:135m"], "")).await;
    wait_status(&cluster, "chat", "the status drops gemma3", |cr| {
        (app_status(cr)["models"].as_array()?.len() == 1).then_some(())
    })
    .await;
    let started = std::time::Instant::now();
    loop {
        let held = held(&cluster, &service("chat")).await;
        if !held.iter().any(|m| m.contains("gemma3")) {
            break;
        }
        assert!(started.elapsed() < PULLED, "the replica still holds {held:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let after = application_pods(&cluster, "chat").await;
    assert_eq!(after.iter().map(|p| p.uid()).collect::<Vec<_>>(), before.iter().map(|p| p.uid()).collect::<Vec<_>>());
    assert_eq!(restarts(&after[0]), 0, "no container restarted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_registry_does_not_have_is_failed_naming_it_and_the_present_one_still_answers() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("ollama_missing").await;
    apply(&cluster, &cr("chat", &["smollm2:135m", "nosuch:1b"], "")).await;

    // (A replica's first pull, the moment it listens, may first break as a connection does —
    // retried in 10 s, as any broken pull; the registry's answer comes with the next one.)
    let status = wait_status(&cluster, "chat", "nosuch:1b is Failed as missing and smollm2 Ready", |cr| {
        let missing = model_status(cr, "nosuch:1b")?;
        let present = model_status(cr, "smollm2:135m")?;
        let said = missing["message"].as_str()?.contains("does not exist");
        (missing["phase"] == "Failed" && said && present["phase"] == "Ready").then(|| cr.clone())
    })
    .await;
    let missing = model_status(&status, "nosuch:1b").unwrap();
    let message = missing["message"].as_str().unwrap();
    assert!(message.contains("nosuch:1b"), "names the model: {message}");
    // Retried after a minute, then after longer each time (how many times it failed by now
    // depends on how fast the present model was pulled).
    let backoff: u64 = message
        .rsplit_once("retried in ")
        .and_then(|(_, s)| s.strip_suffix('s')?.parse().ok())
        .unwrap_or_else(|| panic!("says when it is retried: {message}"));
    assert!(backoff >= 60, "not retried in a hot loop: {message}");
    let ready = ready_condition(&status).unwrap();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("ModelPullFailed")),
        "{ready}"
    );
    assert!(ready["message"].as_str().unwrap().contains("nosuch:1b"), "{ready}");
    assert_eq!(status.data["status"]["applications"]["chat"]["models"].as_array().unwrap().len(), 2);
    // A typo is not an outage: the replica serves the model the registry has (0.1.0 to
    // 1.0.0 kept it out of its Service until every listed model was present).
    let pods = application_pods(&cluster, "chat").await;
    let gate = condition(&pods[0], "models.titanml.co/models-ready").unwrap();
    assert_eq!(gate.status, "True", "{gate:?}");
    let said = gate.message.unwrap_or_default();
    assert!(said.starts_with("serving smollm2:135m; the models registry does not have nosuch:1b"), "{said}");
    let answer = generate(&cluster, &service("chat"), "smollm2:135m", "The capital of France is").await;
    assert!(answer.contains("Paris"), "the present model's answer: {answer:?}");

    // Removing the model that does not exist makes the CR Ready.
    apply(&cluster, &cr("chat", &["smollm2:135m"], "")).await;
    wait_ready(&cluster, "chat").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_the_registry_fails_is_retried_and_ready_once_the_registry_is_back() {
    let _faults = FAULTS.write().await;
    let (cluster, _operator) = setup("ollama_registry_down").await;
    let blobs = &cluster.local.unwrap().models_registry.as_ref().unwrap().blobs;
    blobs.faults.go_down(true);
    let _restore = Restore(|| blobs.faults.go_down(false));
    apply(&cluster, &cr("chat", &["smollm2:135m"], "")).await;

    let failed = wait_status(&cluster, "chat", "the pull failed and is retried", |cr| {
        let m = model_status(cr, "smollm2:135m")?;
        (m["phase"] == "Failed").then_some(m)
    })
    .await;
    assert!(failed["message"].as_str().unwrap().contains("retried in"), "{failed}");
    blobs.faults.go_down(false);
    let ready = wait_ready(&cluster, "chat").await;
    assert_eq!(model_status(&ready, "smollm2:135m").unwrap()["phase"], "Ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_that_stalls_is_failed_with_the_bytes_it_got_and_retried() {
    let _faults = FAULTS.write().await;
    let (cluster, _operator) = setup("ollama_stall").await;
    let blobs = &cluster.local.unwrap().models_registry.as_ref().unwrap().blobs;
    blobs.faults.stall(true);
    let _restore = Restore(|| blobs.faults.stall(false));
    apply(&cluster, &cr("chat", &["smollm2:135m"], "")).await;

    // (A pull a replica starts the moment it listens may first break otherwise; the one
    // after it, 10 s later, meets the stall.)
    let failed = wait_status(&cluster, "chat", "the stalled pull is failed after 5s without progress", |cr| {
        let m = model_status(cr, "smollm2:135m")?;
        (m["phase"] == "Failed" && m["message"].as_str()?.contains("no progress for 5s")).then_some(m)
    })
    .await;
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("bytes"), "says what it got: {message}");
    assert!(message.contains("retried in"), "{message}");
    blobs.faults.stall(false);
    wait_ready(&cluster, "chat").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_pulls_the_model_again_and_its_new_digest_is_shown() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("ollama_refresh").await;
    let local = cluster.local.unwrap();
    // A tag of this test's own, first SmolLM2, then Gemma under the same name.
    let tag: &'static str = Box::leak(format!("refresh-{}:1", std::process::id()).into_boxed_str());
    local.push_models(&[TestModel { name: tag, ..SMOLLM2 }]).await.unwrap();
    apply(&cluster, &cr("chat", &[tag], "")).await;
    let first = model_status(&wait_ready(&cluster, "chat").await, tag).unwrap();

    local.push_models(&[TestModel { name: tag, ..GEMMA3 }]).await.unwrap();
    cluster.kubectl(&["annotate", "modelorchestra", "chat", "models.titanml.co/refresh=1"]);
    let second = wait_status(&cluster, "chat", "the refreshed model's new digest", |cr| {
        let m = model_status(cr, tag)?;
        (m["phase"] == "Ready" && m["digest"] != first["digest"]).then_some(m)
    })
    .await;
    assert_size_of(&second, GEMMA3);
    assert_ne!(second["lastPullTime"], first["lastPullTime"]);
}

/// Verified promotion, decided by the real model's answer to `The capital of France is`
/// (raw, temperature 0): SmolLM2 says " Paris.", Gemma 3 270M " the capital of the
/// country of France.". Each probe may take 120 s: the first includes Gemma's cold load,
/// which on the tier's loaded two cores can outlast the default 30 s, twice (and a probe
/// without an answer has none to quote).
fn promoted(name: &str, models: &[&str], expect: &str) -> String {
    let promotion = format!(
        r#"      promotion:
        enabled: true
        prompt: "The capital of France is"
        expect: '{expect}'
        successThreshold: 1
        failureThreshold: 2
        periodSeconds: 1
        timeoutSeconds: 120
"#
    );
    cr(name, models, &promotion)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_candidate_whose_real_answer_matches_is_promoted() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("ollama_promoted").await;
    apply(&cluster, &promoted("chat", &["smollm2:135m"], r"\s*Paris")).await;
    wait_ready(&cluster, "chat").await;

    apply(&cluster, &promoted("chat", &["gemma3:270m"], r"\s*the capital")).await;
    let promotion = wait_status(&cluster, "chat", "the candidate is promoted", |cr| {
        let p = app_status(cr)["promotion"].clone();
        (p["phase"] == "Promoted").then_some(p)
    })
    .await;
    assert!(promotion["answer"].as_str().unwrap().starts_with(" the capital"), "quotes the answer: {promotion}");
    wait_ready(&cluster, "chat").await;
    let answer = generate(&cluster, &service("chat"), "gemma3:270m", "The capital of France is").await;
    assert!(answer.starts_with(" the capital"), "the promoted revision serves: {answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_candidate_whose_real_answer_does_not_match_fails_and_the_old_revision_keeps_answering() {
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("ollama_not_promoted").await;
    apply(&cluster, &promoted("chat", &["smollm2:135m"], r"\s*Paris")).await;
    wait_ready(&cluster, "chat").await;
    let serving: Vec<_> = application_pods(&cluster, "chat").await.iter().filter_map(|p| p.uid()).collect();

    apply(&cluster, &promoted("chat", &["gemma3:270m"], r"\s*Paris")).await;
    // While the candidate is verified, the old revision answers.
    wait_status(&cluster, "chat", "the candidate is verified", |cr| {
        (app_status(cr)["promotion"]["phase"] == "Verifying").then_some(())
    })
    .await;
    let during = try_generate(&cluster, &service("chat"), "smollm2:135m", "The capital of France is").await;
    assert!(during.as_deref().is_ok_and(|a| a.contains("Paris")), "{during:?}");

    let cr = wait_reason_within(&cluster, "chat", "PromotionFailed").await;
    let promotion = app_status(&cr)["promotion"].clone();
    assert_eq!(promotion["phase"], "Failed", "{promotion}");
    assert!(promotion["answer"].as_str().unwrap().contains("the capital of the country"), "{promotion}");
    let events = cluster.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=chat,reason=PromotionFailed",
        "-o",
        "json",
    ]);
    assert!(events.contains("the capital of the country"), "the Event quotes the answer: {events}");

    let after: Vec<_> = application_pods(&cluster, "chat").await.iter().filter_map(|p| p.uid()).collect();
    assert_eq!(after, serving, "the old revision's replica serves on");
    let answer = generate(&cluster, &service("chat"), "smollm2:135m", "The capital of France is").await;
    assert!(answer.contains("Paris"), "{answer:?}");
}

async fn wait_reason_within(cluster: &Cluster, name: &str, reason: &str) -> kube::api::DynamicObject {
    wait_status(cluster, name, &format!("{name} has Ready reason {reason}"), |cr| {
        (ready_condition(cr)?["reason"] == reason).then(|| cr.clone())
    })
    .await
}

/// Runs `f` on drop (a fault turned off even when the test fails).
struct Restore<F: Fn()>(F);

impl<F: Fn()> Drop for Restore<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_cr_leaves_no_state_in_the_operator_its_pullers_and_verification_stopped() {
    let _pulls = FAULTS.read().await;
    let (cluster, operator) = setup("ollama_deleted").await;
    let addr = operator.metrics_addr().await;
    // A candidate that never matches keeps its verification running.
    let never = cr(
        "chat",
        &["smollm2:135m"],
        r#"      promotion:
        enabled: true
        prompt: "The capital of France is"
        expect: '\s*Berlin'
        failureThreshold: 1000
        periodSeconds: 1
"#,
    );
    apply(&cluster, &never).await;
    let gauges = || async {
        let text = fetch_metrics(&addr).await;
        ["tracked_resources", "model_agents", "verifications"]
            .map(|g| metric(&text, &format!("model_orchestra_{g}")) as i64)
    };
    eventually_within(PULLED, "the CR tracked, a replica's agent and a verification running", || async {
        let [tracked, agents, verifications] = gauges().await;
        (tracked == 1 && agents >= 1 && verifications == 1).then_some(())
    })
    .await;

    cluster.kubectl(&["delete", "modelorchestra", "chat", "--wait=false"]);
    let started = std::time::Instant::now();
    loop {
        let now = gauges().await;
        if now == [0, 0, 0] {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "left behind (tracked, agents, verifications): {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_that_rolls_no_pod_never_reports_the_application_not_ready() {
    use futures::StreamExt;
    let _pulls = FAULTS.read().await;
    let (cluster, _operator) = setup("ollama_no_flicker").await;
    apply(&cluster, &cr("steady", &["smollm2:135m"], "")).await;
    let ready = wait_ready(&cluster, "steady").await;
    let pods_before: Vec<_> = application_pods(&cluster, "steady").await.into_iter().map(|p| p.metadata.uid).collect();

    // Every Ready condition the CR reports from now on, as a watch sees each status write.
    let api = cluster.mo_api_at(ApiVersion::V1alpha2);
    let config = kube::runtime::watcher::Config::default().fields("metadata.name=steady");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(Option<i64>, String, String)>::new()));
    let sink = seen.clone();
    let watch = tokio::spawn(async move {
        let mut events = kube::runtime::watcher::watcher(api, config).boxed();
        while let Some(Ok(event)) = events.next().await {
            if let kube::runtime::watcher::Event::Apply(cr) | kube::runtime::watcher::Event::InitApply(cr) = event {
                if let Some(c) = ready_condition(&cr) {
                    let observed = cr.data["status"]["observedGeneration"].as_i64();
                    let entry = (
                        observed,
                        c["status"].as_str().unwrap_or("").into(),
                        c["reason"].as_str().unwrap_or("").into(),
                    );
                    sink.lock().unwrap().push(entry);
                }
            }
        }
    });

    // How long a pull may stall (the operator's business: the Deployment does not change),
    // then a rollout's deadline (the Deployment changes, its pods do not).
    let stall = cr("steady", &["smollm2:135m"], "").replace("stallSeconds: 5", "stallSeconds: 7");
    let deadline = cr("steady", &["smollm2:135m"], "      progressDeadlineSeconds: 300\n")
        .replace("stallSeconds: 5", "stallSeconds: 7");
    for (edit, generation) in
        [(stall, ready.metadata.generation.unwrap() + 1), (deadline, ready.metadata.generation.unwrap() + 2)]
    {
        apply(&cluster, &edit).await;
        eventually_within(Duration::from_secs(60), "the edit observed", || async {
            let seen = seen.lock().unwrap();
            seen.iter().any(|(observed, _, _)| *observed == Some(generation)).then_some(())
        })
        .await;
        // Long enough for the controllers' and the model agent's own passes after the edit.
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    watch.abort();

    let seen = seen.lock().unwrap().clone();
    let flickers: Vec<_> = seen.iter().filter(|(_, status, _)| status != "True").collect();
    assert!(flickers.is_empty(), "Ready went away after an edit that rolls nothing: {seen:?}");
    let pods_after: Vec<_> = application_pods(&cluster, "steady").await.into_iter().map(|p| p.metadata.uid).collect();
    assert_eq!(pods_after, pods_before, "the edit rolled no pod");
}
