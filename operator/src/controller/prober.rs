//! The success prompt, asked off the reconcile path: one task per candidate being verified
//! sends the prompt, deterministically (temperature 0), to what serves the candidate —
//! Takeoff's gateway through its OpenAI-compatible API (`/v1/chat/completions`, `model` =
//! the candidate's consumer group), an Ollama candidate through its own Service
//! (`/api/generate`, raw) — at most a few requests in flight for the whole operator, each
//! with a timeout, and wakes its CR's reconcile with every result. A slow model holds one
//! slot, not a reconcile.
//!
//! The route to a Service: in the cluster, its DNS name (`http://<service>.<ns>.svc:<port>`);
//! outside (`make run`), the API server's service proxy
//! (`/api/v1/namespaces/<ns>/services/<service>:<port>/proxy/…`), which needs `create` on
//! `services/proxy`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::runtime::reflector::ObjectRef;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

use super::cached_cr::CachedCr;
use crate::operations::metrics::Metrics;
use crate::reconcile::promotion::{matches, Ask, Progress, Target};

/// Requests in flight at once, for every candidate together.
const IN_FLIGHT: usize = 4;
/// The OpenAI-compatible API's path on the gateway.
const COMPLETIONS: &str = "/v1/chat/completions";
/// Ollama's own completion API.
const GENERATE: &str = "/api/generate";

/// How the operator reaches gateways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// Directly, through the gateway Service's cluster DNS name (in the cluster).
    Service,
    /// Through the API server's service proxy (outside the cluster).
    ApiServer,
}

impl Route {
    /// The Service when running in a pod of the cluster, else the API server.
    pub(super) fn detect() -> Route {
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            Route::Service
        } else {
            Route::ApiServer
        }
    }
}

struct Running {
    /// The revision and retry value verified.
    id: String,
    progress: Arc<Mutex<Progress>>,
    ready: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) struct Prober {
    client: kube::Client,
    route: Route,
    slots: Arc<Semaphore>,
    running: Mutex<HashMap<(String, String), Running>>,
    wake: mpsc::UnboundedSender<ObjectRef<CachedCr>>,
    metrics: Arc<Metrics>,
}

/// Why a probe got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("no answer within {0}s")]
    Timeout(u64),
    #[error("the service answered {code}: {body}")]
    Status { code: u16, body: String },
    #[error("cannot reach the service: {0}")]
    Unreachable(String),
    #[error("the answer is not a completion: {0}")]
    Malformed(String),
    /// The API server's service proxy found no ready endpoint behind the Service: the route
    /// to the candidate is not there yet (the EndpointSlice lags the pods' readiness), which
    /// says nothing of its answers. Not counted; the verification's deadline still bounds it.
    #[error("the service has no ready endpoint yet: {0}")]
    NoEndpoints(String),
}

/// What an error status from the API server's service proxy means for a probe.
fn proxied_error(code: u16, message: &str) -> ProbeError {
    let body: String = message.chars().take(200).collect();
    if code == 503 && message.contains("no endpoints available for service") {
        ProbeError::NoEndpoints(body)
    } else {
        ProbeError::Status { code, body }
    }
}

impl Prober {
    pub(crate) fn new(
        client: kube::Client,
        route: Route,
        metrics: Arc<Metrics>,
    ) -> (Prober, mpsc::UnboundedReceiver<ObjectRef<CachedCr>>) {
        let (wake, woken) = mpsc::unbounded_channel();
        let prober = Prober {
            client,
            route,
            slots: Arc::new(Semaphore::new(IN_FLIGHT)),
            running: Mutex::new(HashMap::new()),
            wake,
            metrics,
        };
        (prober, woken)
    }

    /// Keeps a verification of `id` running for the application `app` of `cr` (a new one
    /// replaces another revision's), probing once the candidate is `ready`; returns what it
    /// has seen so far.
    pub(crate) fn ensure(&self, cr: &ObjectRef<CachedCr>, app: &str, id: &str, ask: Ask, ready: bool) -> Progress {
        let key = (format!("{}/{}", cr.namespace.as_deref().unwrap_or_default(), cr.name), app.to_string());
        let mut running = self.running.lock().expect("prober lock");
        if let Some(r) = running.get(&key).filter(|r| r.id == id) {
            r.ready.store(ready, std::sync::atomic::Ordering::Relaxed);
            return r.progress.lock().expect("progress lock").clone();
        }
        let progress = Arc::new(Mutex::new(Progress::default()));
        let ready_flag = Arc::new(std::sync::atomic::AtomicBool::new(ready));
        let task = tokio::spawn(verify(
            self.client.clone(),
            self.route,
            self.slots.clone(),
            ask,
            progress.clone(),
            ready_flag.clone(),
            self.wake.clone(),
            cr.clone(),
            self.metrics.clone(),
        ));
        running.insert(key, Running { id: id.to_string(), progress, ready: ready_flag, task });
        Progress::default()
    }

    /// Stops verifying the application `app` of the CR `key` (`namespace/name`).
    pub(crate) fn stop(&self, key: &str, app: &str) {
        self.running.lock().expect("prober lock").remove(&(key.to_string(), app.to_string()));
    }

    /// Stops the verifications of CRs not in `live` (keys).
    pub(crate) fn retain_crs(&self, live: &HashSet<String>) {
        self.running.lock().expect("prober lock").retain(|(k, _), _| live.contains(k));
    }

    /// Stops every verification of the CR `key`.
    pub(crate) fn stop_all(&self, key: &str) {
        self.running.lock().expect("prober lock").retain(|(k, _), _| k != key);
    }

    /// The CRs (keys) with a verification running.
    pub(crate) fn crs(&self) -> HashSet<String> {
        self.running.lock().expect("prober lock").keys().map(|(k, _)| k.clone()).collect()
    }

    /// How many verifications run.
    pub(crate) fn running(&self) -> usize {
        self.running.lock().expect("prober lock").len()
    }
}

/// One verification: probes every `period` once the candidate is ready, until the answers
/// decide it (the thresholds); each result wakes the CR's reconcile.
#[allow(clippy::too_many_arguments)]
async fn verify(
    client: kube::Client,
    route: Route,
    slots: Arc<Semaphore>,
    ask: Ask,
    progress: Arc<Mutex<Progress>>,
    ready: Arc<std::sync::atomic::AtomicBool>,
    wake: mpsc::UnboundedSender<ObjectRef<CachedCr>>,
    cr: ObjectRef<CachedCr>,
    metrics: Arc<Metrics>,
) {
    loop {
        if ready.load(std::sync::atomic::Ordering::Relaxed) {
            let outcome = {
                let Ok(_slot) = slots.acquire().await else { return };
                match tokio::time::timeout(ask.timeout, send(&client, route, &ask)).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(ProbeError::Timeout(ask.timeout.as_secs())),
                }
            };
            if let Err(e @ ProbeError::NoEndpoints(_)) = &outcome {
                let said = Some(e.to_string());
                let changed = {
                    let mut p = progress.lock().expect("progress lock");
                    std::mem::replace(&mut p.error, said.clone()) != said
                };
                if changed {
                    let _ = wake.send(cr.clone());
                }
                tokio::time::sleep(ask.period).await;
                continue;
            }
            let done = {
                let mut p = progress.lock().expect("progress lock");
                p.probes += 1;
                let result = match outcome {
                    Ok(answer) => {
                        let matched = matches(&ask.expect, &answer).unwrap_or(false);
                        p.answer = Some(answer);
                        p.error = None;
                        if matched {
                            p.passes += 1;
                            p.failures = 0;
                            "pass"
                        } else {
                            p.failures += 1;
                            p.passes = 0;
                            "fail"
                        }
                    }
                    Err(e) => {
                        let result = if matches!(e, ProbeError::Timeout(_)) { "timeout" } else { "error" };
                        p.answer = None;
                        p.error = Some(e.to_string());
                        p.failures += 1;
                        p.passes = 0;
                        result
                    }
                };
                metrics.count_probe(result);
                p.passes >= ask.success_threshold || p.failures >= ask.failure_threshold
            };
            let _ = wake.send(cr.clone());
            if done {
                return;
            }
        }
        tokio::time::sleep(ask.period).await;
    }
}

/// The path asked and the prompt as its request: deterministic sampling, no streaming.
pub(crate) fn request(ask: &Ask) -> (&'static str, Value) {
    match &ask.target {
        Target::Gateway { group } => (
            COMPLETIONS,
            json!({
                "model": group,
                "messages": [{"role": "user", "content": ask.prompt}],
                "max_tokens": ask.max_tokens,
                "temperature": 0,
                "stream": false,
            }),
        ),
        Target::Ollama { model } => (
            GENERATE,
            json!({
                "model": model,
                "prompt": ask.prompt,
                "raw": true,
                "stream": false,
                "options": {"temperature": 0, "seed": 0, "num_predict": ask.max_tokens},
            }),
        ),
    }
}

/// The answer's text: a chat completion's first choice's message (or, from an older
/// gateway, its `text`); Ollama's `response`.
pub(crate) fn answer_of(target: &Target, body: &[u8]) -> Result<String, ProbeError> {
    let excerpt = || String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
    let value: Value =
        serde_json::from_slice(body).map_err(|_| ProbeError::Malformed(format!("not JSON: {:?}", excerpt())))?;
    match target {
        Target::Gateway { .. } => {
            let choice = &value["choices"][0];
            choice["message"]["content"]
                .as_str()
                .or_else(|| choice["text"].as_str())
                .map(str::to_string)
                .ok_or_else(|| ProbeError::Malformed(format!("no choices[0].message.content in {:?}", excerpt())))
        }
        Target::Ollama { .. } => value["response"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ProbeError::Malformed(format!("no response in {:?}", excerpt()))),
    }
}

async fn send(client: &kube::Client, route: Route, ask: &Ask) -> Result<String, ProbeError> {
    let (path, body) = request(ask);
    let body = serde_json::to_vec(&body).expect("a request serialises");
    match route {
        Route::ApiServer => {
            let uri = format!("/api/v1/namespaces/{}/services/{}:{}/proxy{path}", ask.namespace, ask.service, ask.port);
            let request = http::Request::post(uri)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body)
                .expect("a valid request");
            match client.request_text(request).await {
                Ok(text) => answer_of(&ask.target, text.as_bytes()),
                Err(kube::Error::Api(s)) => Err(proxied_error(s.code, &s.message)),
                Err(e) => Err(ProbeError::Unreachable(e.to_string())),
            }
        }
        Route::Service => {
            let uri = format!("http://{}.{}.svc:{}{path}", ask.service, ask.namespace, ask.port);
            let request = http::Request::post(uri)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)))
                .expect("a valid request");
            let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
            let response = http.request(request).await.map_err(|e| ProbeError::Unreachable(e.to_string()))?;
            let code = response.status().as_u16();
            let bytes =
                response.into_body().collect().await.map_err(|e| ProbeError::Unreachable(e.to_string()))?.to_bytes();
            if !(200..300).contains(&code) {
                return Err(ProbeError::Status {
                    code,
                    body: String::from_utf8_lossy(&bytes).chars().take(200).collect(),
                });
            }
            answer_of(&ask.target, &bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ask() -> Ask {
        Ask {
            namespace: "ns".into(),
            service: "gw".into(),
            port: 80,
            target: Target::Gateway { group: "verify-abc".into() },
            prompt: "Are you there? {{x}}\u{0}".into(),
            expect: "yes".into(),
            max_tokens: 8,
            timeout: Duration::from_secs(1),
            period: Duration::from_secs(1),
            success_threshold: 1,
            failure_threshold: 1,
        }
    }

    #[test]
    fn the_request_asks_the_candidates_group_deterministically() {
        let (path, body) = request(&ask());
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!(body["model"], "verify-abc");
        assert_eq!(body["temperature"], 0);
        assert_eq!(body["messages"][0]["content"], "Are you there? {{x}}\u{0}", "the prompt is data, sent as written");
    }

    #[test]
    fn the_answer_is_the_first_choices_message() {
        let gateway = ask().target;
        let body = br#"{"choices":[{"message":{"role":"assistant","content":"Yes."}}]}"#;
        assert_eq!(answer_of(&gateway, body), Ok("Yes.".into()));
        assert_eq!(answer_of(&gateway, br#"{"choices":[{"text":"yes"}]}"#), Ok("yes".into()));
    }

    #[test]
    fn a_body_that_is_not_a_chat_completion_is_a_clear_failure() {
        let gateway = ask().target;
        let html = answer_of(&gateway, b"<html>502</html>");
        assert!(matches!(html, Err(ProbeError::Malformed(m)) if m.contains("not JSON")));
        let error = answer_of(&gateway, br#"{"error":"x"}"#);
        assert!(matches!(error, Err(ProbeError::Malformed(m)) if m.contains("choices[0]")));
    }

    fn ollama() -> Ask {
        Ask { service: "app-candidate".into(), target: Target::Ollama { model: "smollm2:135m".into() }, ..ask() }
    }

    #[test]
    fn an_ollama_candidate_is_asked_raw_on_its_generate_api_deterministically() {
        let (path, body) = request(&ollama());
        assert_eq!(path, "/api/generate");
        assert_eq!(body["model"], "smollm2:135m");
        assert_eq!(body["raw"], true, "the prompt as written, no chat template");
        assert_eq!(body["stream"], false);
        assert_eq!(body["options"]["temperature"], 0);
        assert_eq!(body["options"]["num_predict"], 8);
        assert_eq!(body["prompt"], "Are you there? {{x}}\u{0}");
    }

    #[test]
    fn an_ollama_answer_is_its_response_and_an_error_body_is_a_clear_failure() {
        let target = ollama().target;
        assert_eq!(answer_of(&target, br#"{"model":"m","response":" Paris.","done":true}"#), Ok(" Paris.".into()));
        let error = answer_of(&target, br#"{"error":"model 'x' not found"}"#);
        assert!(matches!(error, Err(ProbeError::Malformed(m)) if m.contains("no response")));
    }

    #[test]
    fn a_service_without_endpoints_behind_the_api_servers_proxy_is_not_yet_reachable_not_a_failed_answer() {
        let e = proxied_error(503, "no endpoints available for service \"hangs-model-orchestra-gateway\"");
        assert!(matches!(e, ProbeError::NoEndpoints(_)), "{e:?}");
        assert!(e.to_string().contains("no ready endpoint yet"), "{e}");
    }

    #[test]
    fn any_other_status_from_the_proxy_is_the_services_answer_and_counts() {
        assert_eq!(
            proxied_error(503, "the engine is loading"),
            ProbeError::Status { code: 503, body: "the engine is loading".into() }
        );
        assert!(matches!(proxied_error(500, "no endpoints available for service \"x\""), ProbeError::Status { .. }));
    }
}
