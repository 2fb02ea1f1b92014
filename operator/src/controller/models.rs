//! Ollama's models, pulled into each replica through Ollama's own API, off the reconcile
//! path: one agent per pod, which lists what the pod holds (`GET /api/tags`), deletes what
//! is no longer listed (`DELETE /api/delete`), and pulls what is missing, one model at a time
//! (`POST /api/pull`, whose progress it follows line by line), then names it as listed
//! (`POST /api/copy`: a model pulled from a registry is named after it). Every change of
//! phase wakes the CR's reconcile, progress at most every second; the reconcile reads what
//! the agents saw ([`Puller::ensure`]) and decides the rest (`reconcile::pulls`).
//!
//! What users of model operators complain about most is pulls that stall forever: a pull
//! that receives nothing for `stallSeconds` is cut (Ollama cancels a pull whose client went
//! away), failed with the bytes it got, and retried with backoff; a model the registry does
//! not have is failed naming it and retried only after minutes; a registry that does not
//! answer is retried, and said. Every answer is bounded: a progress line of at most 64 KiB,
//! a listing of at most 4 MiB.
//!
//! The route to a pod: in the cluster, its address; outside (`make run`), the API server's
//! pod proxy (`/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/…`), which needs `create` and
//! `get` on `pods/proxy`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use http_body_util::{BodyExt, Full};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::ObjectRef;
use model_orchestra_api::v1alpha2::PullPhase;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::cached_cr::CachedCr;
use super::prober::Route;
use crate::reconcile::pulls::{is_missing, InReplica};

/// The longest line of a pull's progress stream.
const MAX_LINE: usize = 64 * 1024;
/// The largest listing (`/api/tags`) or other answer read whole.
const MAX_ANSWER: usize = 4 * 1024 * 1024;
/// Lines of a progress stream that are not JSON before the pull is failed.
const MAX_GARBAGE: usize = 100;
/// How often an agent lists its pod's models when nothing else happens.
const RELIST: Duration = Duration::from_secs(30);
/// Ollama's step that checks the blobs it downloaded (`verifying sha256 digest`): it hashes
/// every new blob and says nothing until it is done.
const VERIFYING: &str = "verifying sha256 digest";
/// How fast that check is assumed to hash, at the least: a replica limited to a tenth of a
/// core on a busy machine. SHA-256 runs at hundreds of MB/s on one core.
const VERIFY_BYTES_PER_SECOND: f64 = 16.0 * 1024.0 * 1024.0;
/// The most a request other than a pull may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What a replica must hold, as the reconcile says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Want {
    /// `(listed name, name to pull)`, in the order listed.
    pub models: Vec<(String, String)>,
    pub insecure: bool,
    pub stall: Duration,
    /// The `models.titanml.co/refresh` value: every model is pulled again once per value.
    pub refresh: Option<String>,
}

/// Where a replica's Ollama API is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replica {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    /// The pod's address (the in-cluster route); None until it has one.
    pub ip: Option<String>,
    pub port: u16,
}

struct Agent {
    cr: String,
    want: watch::Sender<Want>,
    state: Arc<Mutex<BTreeMap<String, InReplica>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) struct Puller {
    client: kube::Client,
    route: Route,
    /// By pod UID.
    agents: Mutex<HashMap<String, Agent>>,
    wake: mpsc::UnboundedSender<ObjectRef<CachedCr>>,
}

impl Puller {
    pub(crate) fn new(client: kube::Client, route: Route) -> (Puller, mpsc::UnboundedReceiver<ObjectRef<CachedCr>>) {
        let (wake, woken) = mpsc::unbounded_channel();
        (Puller { client, route, agents: Mutex::new(HashMap::new()), wake }, woken)
    }

    /// Keeps an agent for `replica` (of the CR `cr`, key `namespace/name`) holding `want`;
    /// returns what it has seen of the replica's models.
    pub(crate) fn ensure(
        &self,
        cr: &ObjectRef<CachedCr>,
        replica: &Replica,
        want: Want,
    ) -> BTreeMap<String, InReplica> {
        let key = format!("{}/{}", cr.namespace.as_deref().unwrap_or_default(), cr.name);
        let mut agents = self.agents.lock().expect("agents lock");
        if let Some(agent) = agents.get(&replica.uid) {
            agent.want.send_if_modified(|w| {
                let changed = *w != want;
                *w = want.clone();
                changed
            });
            return agent.state.lock().expect("state lock").clone();
        }
        let (tx, rx) = watch::channel(want);
        let state = Arc::new(Mutex::new(BTreeMap::new()));
        let endpoint = Endpoint { client: self.client.clone(), route: self.route, replica: replica.clone() };
        let task = tokio::spawn(run(endpoint, rx, state.clone(), self.wake.clone(), cr.clone()));
        agents.insert(replica.uid.clone(), Agent { cr: key, want: tx, state, task });
        BTreeMap::new()
    }

    /// Stops the agents of the CR `key`'s pods not in `live` (UIDs): gone or replaced.
    pub(crate) fn retain(&self, key: &str, live: &HashSet<String>) {
        self.agents.lock().expect("agents lock").retain(|uid, a| a.cr != key || live.contains(uid));
    }

    /// Stops the agents of CRs not in `live` (keys).
    pub(crate) fn retain_crs(&self, live: &HashSet<String>) {
        self.agents.lock().expect("agents lock").retain(|_, a| live.contains(&a.cr));
    }

    /// Stops every agent of the CR `key`.
    pub(crate) fn forget(&self, key: &str) {
        self.agents.lock().expect("agents lock").retain(|_, a| a.cr != key);
    }

    /// The CRs (keys) with an agent running.
    pub(crate) fn crs(&self) -> HashSet<String> {
        self.agents.lock().expect("agents lock").values().map(|a| a.cr.clone()).collect()
    }

    /// How many agents run.
    pub(crate) fn agents(&self) -> usize {
        self.agents.lock().expect("agents lock").len()
    }
}

/// Why a request to a replica failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PullError {
    #[error("Ollama answered {code}: {body}")]
    Status { code: u16, body: String },
    #[error("cannot reach Ollama: {0}")]
    Unreachable(String),
    #[error("{0}")]
    Stream(String),
}

/// A replica's Ollama API, by the operator's route.
struct Endpoint {
    client: kube::Client,
    route: Route,
    replica: Replica,
}

type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

impl Endpoint {
    /// Sends `method path` with a JSON body; the answer's status and its body as a stream.
    async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, ByteStream), PullError> {
        let bytes = body.map(|b| serde_json::to_vec(&b).expect("a request serialises")).unwrap_or_default();
        let r = &self.replica;
        match self.route {
            Route::ApiServer => {
                let uri = format!("/api/v1/namespaces/{}/pods/{}:{}/proxy{path}", r.namespace, r.pod, r.port);
                let request = http::Request::builder()
                    .method(method)
                    .uri(uri)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(kube::client::Body::from(bytes))
                    .expect("a valid request");
                let response = self.client.send(request).await.map_err(|e| PullError::Unreachable(e.to_string()))?;
                let code = response.status().as_u16();
                let stream = response.into_body().into_data_stream().map(|c| c.map_err(|e| e.to_string()));
                Ok((code, Box::pin(stream)))
            }
            Route::Service => {
                let ip = r.ip.as_deref().ok_or_else(|| PullError::Unreachable("the pod has no address yet".into()))?;
                let uri = format!("http://{ip}:{}{path}", r.port);
                let request = http::Request::builder()
                    .method(method)
                    .uri(uri)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(bytes)))
                    .expect("a valid request");
                let http =
                    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
                let response = http.request(request).await.map_err(|e| PullError::Unreachable(e.to_string()))?;
                let code = response.status().as_u16();
                let stream = response.into_body().into_data_stream().map(|c| c.map_err(|e| e.to_string()));
                Ok((code, Box::pin(stream)))
            }
        }
    }

    /// A request whose whole (bounded) answer is JSON.
    async fn call(&self, method: http::Method, path: &str, body: Option<Value>) -> Result<Value, PullError> {
        let request = async {
            let (code, mut stream) = self.send(method, path, body).await?;
            let mut answer = BytesMut::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(PullError::Unreachable)?;
                if answer.len() + chunk.len() > MAX_ANSWER {
                    return Err(PullError::Stream(format!("an answer over {MAX_ANSWER} bytes")));
                }
                answer.extend_from_slice(&chunk);
            }
            if !(200..300).contains(&code) {
                return Err(PullError::Status { code, body: excerpt(&answer) });
            }
            if answer.is_empty() {
                return Ok(Value::Null);
            }
            serde_json::from_slice(&answer)
                .map_err(|_| PullError::Stream(format!("an answer that is not JSON: {}", excerpt(&answer))))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, request)
            .await
            .unwrap_or_else(|_| Err(PullError::Unreachable(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))))
    }
}

/// The start of an answer, printable, for messages.
fn excerpt(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).chars().filter(|c| !c.is_control()).collect()
}

/// A model's name as Ollama lists it: the `library/` namespace left out, `:latest` added.
pub(crate) fn canonical(name: &str) -> String {
    let name = name.strip_prefix("library/").unwrap_or(name);
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// What a pod holds: canonical name → (digest, size).
fn listing(tags: &Value) -> BTreeMap<String, (String, i64)> {
    tags["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let name = m["name"].as_str().or_else(|| m["model"].as_str())?;
            let digest = m["digest"].as_str().unwrap_or_default();
            let digest = if digest.starts_with("sha256:") || digest.is_empty() {
                digest.to_string()
            } else {
                format!("sha256:{digest}")
            };
            Some((canonical(name), (digest, m["size"].as_i64().unwrap_or(0))))
        })
        .collect()
}

/// How a failed pull is retried: after `10s × 2^(n-1)` up to 5 minutes; a model the
/// registry does not have, after a minute doubling up to 10.
pub(crate) fn retry_after(failures: u32, missing: bool) -> Duration {
    let (first, cap) = if missing { (60, 600) } else { (10, 300) };
    Duration::from_secs((first * 2u64.saturating_pow(failures.saturating_sub(1).min(10))).min(cap))
}

/// Progress of one pull, from its stream's lines.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Progress {
    /// Per blob digest: (completed, total).
    blobs: BTreeMap<String, (i64, i64)>,
    pub status: String,
    pub error: Option<String>,
    pub success: bool,
    garbage: usize,
}

impl Progress {
    /// Takes one line of the stream; whether it was progress (new bytes or a new step).
    pub(crate) fn line(&mut self, line: &[u8]) -> Result<bool, String> {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            self.garbage += 1;
            return if self.garbage > MAX_GARBAGE {
                Err(format!("the pull's progress stream is not JSON: {}", excerpt(line)))
            } else {
                Ok(false)
            };
        };
        if let Some(e) = v["error"].as_str() {
            self.error = Some(e.chars().take(500).collect());
            return Ok(true);
        }
        let status = v["status"].as_str().unwrap_or_default().chars().take(200).collect::<String>();
        let mut moved = status != self.status;
        if let (Some(digest), Some(total)) = (v["digest"].as_str(), v["total"].as_i64()) {
            let completed = v["completed"].as_i64().unwrap_or(0).clamp(0, total.max(0));
            let entry = self.blobs.entry(digest.chars().take(100).collect()).or_insert((0, total));
            moved |= completed > entry.0;
            *entry = (completed.max(entry.0), total.max(0));
        }
        self.success |= status == "success";
        self.status = status;
        Ok(moved)
    }

    pub(crate) fn bytes(&self) -> (i64, i64) {
        self.blobs.values().fold((0, 0), |(c, t), (bc, bt)| (c.saturating_add(*bc), t.saturating_add(*bt)))
    }

    /// How long the pull may go on without progress: `stall`; while Ollama checks what it
    /// downloaded, which it does in silence, the time hashing every byte received takes at
    /// [`VERIFY_BYTES_PER_SECOND`], when that is longer (a first pull of a model larger than
    /// `stallSeconds`' worth of hashing was cut at this step, then found whole by its retry).
    pub(crate) fn patience(&self, stall: Duration) -> Duration {
        if self.status != VERIFYING {
            return stall;
        }
        let (completed, _) = self.bytes();
        stall.max(Duration::from_secs_f64(completed.max(0) as f64 / VERIFY_BYTES_PER_SECOND))
    }
}

/// How a pull ended.
#[derive(Debug, Clone, PartialEq)]
enum Pulled {
    Done,
    Failed { message: String, missing: bool },
}

/// Per model, what the agent keeps between its rounds.
#[derive(Default)]
struct Memory {
    failures: u32,
    retry_at: Option<Instant>,
    /// The refresh value the model was last pulled for.
    refreshed: Option<Option<String>>,
}

/// One pod's agent: lists, deletes and pulls until the pod (or the CR) goes.
async fn run(
    endpoint: Endpoint,
    mut want_rx: watch::Receiver<Want>,
    state: Arc<Mutex<BTreeMap<String, InReplica>>>,
    wake: mpsc::UnboundedSender<ObjectRef<CachedCr>>,
    cr: ObjectRef<CachedCr>,
) {
    let mut memory: HashMap<String, Memory> = HashMap::new();
    let set = |name: &str, f: &dyn Fn(&mut InReplica)| {
        let mut s = state.lock().expect("state lock");
        f(s.entry(name.to_string()).or_default());
    };
    loop {
        let want = want_rx.borrow_and_update().clone();
        let listed: HashSet<String> = want.models.iter().map(|(l, _)| canonical(l)).collect();
        // Forget what is no longer listed.
        state.lock().expect("state lock").retain(|name, _| want.models.iter().any(|(l, _)| l == name));
        memory.retain(|name, _| want.models.iter().any(|(l, _)| l == name));
        let mut next_round = RELIST;
        match endpoint.call(http::Method::GET, "/api/tags", None).await {
            Err(e) => {
                for (name, _) in &want.models {
                    set(name, &|s| {
                        if s.phase != PullPhase::Ready {
                            s.message = format!("the replica does not answer yet: {e}");
                        }
                    });
                }
                let _ = wake.send(cr.clone());
                next_round = Duration::from_secs(2);
            }
            Ok(tags) => {
                let held = listing(&tags);
                // What is not listed goes (a model pulled from a registry is also named
                // after it: that name goes with its listed one).
                let pulled: HashSet<String> = want.models.iter().map(|(_, p)| canonical(p)).collect();
                for name in held.keys().filter(|n| !listed.contains(*n) && !pulled.contains(*n)) {
                    if let Err(e) =
                        endpoint.call(http::Method::DELETE, "/api/delete", Some(json!({"model": name}))).await
                    {
                        tracing::warn!(pod = %endpoint.replica.pod, model = %name, error = %e, "cannot delete a model no longer listed");
                        next_round = next_round.min(Duration::from_secs(10));
                    }
                }
                let mut changed = false;
                for (name, pull_name) in &want.models {
                    let m = memory.entry(name.clone()).or_default();
                    let present = held.get(&canonical(name));
                    // A refresh value this model was not pulled for pulls it again, once.
                    let refresh_due = present.is_some()
                        && want.refresh.is_some()
                        && m.refreshed.as_ref().is_some_and(|r| *r != want.refresh);
                    if let (Some((digest, size)), false) = (present, refresh_due) {
                        m.refreshed.get_or_insert_with(|| want.refresh.clone());
                        let (digest, size) = (digest.clone(), *size);
                        let was = state.lock().expect("state lock").get(name).map(|s| s.phase);
                        set(name, &|s| {
                            s.phase = PullPhase::Ready;
                            s.digest = Some(digest.clone());
                            s.size = Some(size);
                            s.message.clear();
                            (s.completed, s.total) = (0, 0);
                        });
                        changed |= was != Some(PullPhase::Ready);
                        continue;
                    }
                    if m.retry_at.is_some_and(|at| Instant::now() < at) {
                        let left =
                            m.retry_at.map(|at| at.saturating_duration_since(Instant::now())).unwrap_or_default();
                        next_round = next_round.min(left);
                        continue;
                    }
                    // One pull at a time: pulled now, the others wait for the next round.
                    set(name, &|s| {
                        s.phase = PullPhase::Pulling;
                        s.message.clear();
                    });
                    let _ = wake.send(cr.clone());
                    let pulled = pull(&endpoint, name, pull_name, &want, &state, &wake, &cr).await;
                    let outcome = held_after_all(&endpoint, name, pull_name, pulled).await;
                    let m = memory.entry(name.clone()).or_default();
                    match outcome {
                        Pulled::Done => {
                            m.failures = 0;
                            m.retry_at = None;
                            m.refreshed = Some(want.refresh.clone());
                            let now = Time(k8s_openapi::jiff::Timestamp::now());
                            set(name, &|s| s.pulled_at = Some(now.clone()));
                        }
                        Pulled::Failed { message, missing } => {
                            m.failures += 1;
                            let after = retry_after(m.failures, missing);
                            m.retry_at = Some(Instant::now() + after);
                            let (completed, total) = {
                                let s = state.lock().expect("state lock");
                                s.get(name).map(|s| (s.completed, s.total)).unwrap_or_default()
                            };
                            let got = if total > 0 {
                                format!(" ({completed} of {total} bytes received)")
                            } else {
                                String::new()
                            };
                            let message = format!("{message}{got}; retried in {}s", after.as_secs());
                            set(name, &|s| {
                                s.phase = PullPhase::Failed;
                                s.message = message.clone();
                                s.missing = missing;
                            });
                        }
                    }
                    let _ = wake.send(cr.clone());
                    // List again at once: the pulled model's digest, the next model.
                    next_round = Duration::ZERO;
                    break;
                }
                if changed {
                    let _ = wake.send(cr.clone());
                }
            }
        }
        if next_round.is_zero() {
            continue;
        }
        tokio::select! {
            changed = want_rx.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(next_round) => {}
        }
    }
}

/// A pull that failed for another reason than a missing model, checked against what the
/// replica holds before it is called failed: Ollama's download goes on when the stream that
/// asked for it breaks, and may have ended well.
async fn held_after_all(endpoint: &Endpoint, name: &str, pull_name: &str, outcome: Pulled) -> Pulled {
    let Pulled::Failed { message, missing: false } = &outcome else { return outcome };
    let held = match endpoint.call(http::Method::GET, "/api/tags", None).await {
        Ok(tags) => listing(&tags),
        Err(_) => return outcome,
    };
    if !held.contains_key(&canonical(pull_name)) {
        return outcome;
    }
    tracing::info!(pod = %endpoint.replica.pod, model = %name, failure = %message, "the pull's stream failed, but the replica holds the model");
    name_as_listed(endpoint, name, pull_name).await
}

/// Names a model pulled from a registry as listed (`POST /api/copy`); nothing to do when
/// the names are the same.
async fn name_as_listed(endpoint: &Endpoint, name: &str, pull_name: &str) -> Pulled {
    if canonical(pull_name) != canonical(name) {
        let copy = json!({"source": pull_name, "destination": name});
        if let Err(e) = endpoint.call(http::Method::POST, "/api/copy", Some(copy)).await {
            let message = format!("naming {pull_name} {name}: {e}");
            return Pulled::Failed { missing: is_missing(&message), message };
        }
    }
    Pulled::Done
}

/// Pulls one model, following its progress; names it as listed once pulled.
#[allow(clippy::too_many_arguments)]
async fn pull(
    endpoint: &Endpoint,
    name: &str,
    pull_name: &str,
    want: &Want,
    state: &Mutex<BTreeMap<String, InReplica>>,
    wake: &mpsc::UnboundedSender<ObjectRef<CachedCr>>,
    cr: &ObjectRef<CachedCr>,
) -> Pulled {
    let failed = |message: String| Pulled::Failed { missing: is_missing(&message), message };
    let body = json!({"model": pull_name, "insecure": want.insecure, "stream": true});
    let (code, mut stream) = match endpoint.send(http::Method::POST, "/api/pull", Some(body)).await {
        Ok(sent) => sent,
        Err(e) => return failed(format!("pulling {pull_name}: {e}")),
    };
    let mut progress = Progress::default();
    let mut buffer = BytesMut::new();
    let mut last_progress = Instant::now();
    let mut last_wake = Instant::now();
    loop {
        let patience = progress.patience(want.stall);
        let left = patience.saturating_sub(last_progress.elapsed());
        let chunk = match tokio::time::timeout(left, stream.next()).await {
            Err(_) => {
                // Dropping the stream cuts the connection: Ollama cancels the pull.
                let (completed, total) = progress.bytes();
                let step = if progress.status.is_empty() { String::new() } else { format!(" ({})", progress.status) };
                return failed(format!(
                    "pulling {pull_name}: no progress for {}s after {completed} of {total} bytes{step}",
                    patience.as_secs()
                ));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => return failed(format!("pulling {pull_name}: the connection broke: {e}")),
            Ok(Some(Ok(chunk))) => chunk,
        };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line = buffer.split_to(end + 1);
            let line = &line[..line.len() - 1];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match progress.line(line) {
                Ok(true) => last_progress = Instant::now(),
                Ok(false) => {}
                Err(e) => return failed(format!("pulling {pull_name}: {e}")),
            }
            if let Some(e) = &progress.error {
                return failed(format!("pulling {pull_name}: {e}"));
            }
        }
        if buffer.len() > MAX_LINE {
            return failed(format!("pulling {pull_name}: a progress line over {MAX_LINE} bytes"));
        }
        let (completed, total) = progress.bytes();
        {
            let mut s = state.lock().expect("state lock");
            let s = s.entry(name.to_string()).or_default();
            (s.completed, s.total) = (completed, total);
        }
        if last_wake.elapsed() >= Duration::from_secs(1) {
            last_wake = Instant::now();
            let _ = wake.send(cr.clone());
        }
    }
    if !(200..300).contains(&code) {
        return failed(format!("pulling {pull_name}: Ollama answered {code}: {}", excerpt(&buffer)));
    }
    if !progress.success {
        let last = if progress.status.is_empty() { "nothing".to_string() } else { format!("{:?}", progress.status) };
        return failed(format!("pulling {pull_name}: the pull ended after {last}, without success"));
    }
    name_as_listed(endpoint, name, pull_name).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_compared_as_ollama_lists_them() {
        assert_eq!(canonical("smollm2:135m"), "smollm2:135m");
        assert_eq!(canonical("library/smollm2"), "smollm2:latest");
        assert_eq!(
            canonical("registry.kube-system.svc:5000/library/smollm2:135m"),
            "registry.kube-system.svc:5000/library/smollm2:135m"
        );
        assert_eq!(canonical("team/model"), "team/model:latest");
    }

    #[test]
    fn progress_is_the_bytes_of_every_blob_and_each_new_step() {
        let mut p = Progress::default();
        assert_eq!(p.line(br#"{"status":"pulling manifest"}"#), Ok(true));
        assert_eq!(p.line(br#"{"status":"pulling abc","digest":"sha256:abc","total":100,"completed":10}"#), Ok(true));
        assert_eq!(p.line(br#"{"status":"pulling abc","digest":"sha256:abc","total":100,"completed":10}"#), Ok(false));
        assert_eq!(p.line(br#"{"status":"pulling def","digest":"sha256:def","total":50,"completed":50}"#), Ok(true));
        assert_eq!(p.bytes(), (60, 150));
        assert_eq!(p.line(br#"{"status":"success"}"#), Ok(true));
        assert!(p.success);
    }

    #[test]
    fn an_error_line_is_kept_and_bytes_never_exceed_their_total() {
        let mut p = Progress::default();
        p.line(br#"{"status":"pulling a","digest":"a","total":10,"completed":999999}"#).unwrap();
        assert_eq!(p.bytes(), (10, 10));
        p.line(br#"{"error":"pull model manifest: file does not exist"}"#).unwrap();
        assert_eq!(p.error.as_deref(), Some("pull model manifest: file does not exist"));
        assert!(is_missing(p.error.as_deref().unwrap()));
    }

    #[test]
    fn the_silent_check_of_a_download_is_given_the_time_hashing_it_takes() {
        let stall = Duration::from_secs(5);
        let mut p = Progress::default();
        let gib = 1024 * 1024 * 1024_i64;
        p.line(format!(r#"{{"status":"pulling a","digest":"sha256:a","total":{gib},"completed":{gib}}}"#).as_bytes())
            .unwrap();
        assert_eq!(p.patience(stall), stall, "downloading: stallSeconds");
        assert!(p.line(br#"{"status":"verifying sha256 digest"}"#).unwrap(), "a new step is progress");
        assert_eq!(p.patience(stall), Duration::from_secs(64), "1 GiB at 16 MiB/s");
        p.line(br#"{"status":"writing manifest"}"#).unwrap();
        assert_eq!(p.patience(stall), stall);
    }

    #[test]
    fn a_small_download_is_checked_within_stall_seconds() {
        let mut p = Progress::default();
        p.line(br#"{"status":"pulling a","digest":"sha256:a","total":1000,"completed":1000}"#).unwrap();
        p.line(br#"{"status":"verifying sha256 digest"}"#).unwrap();
        assert_eq!(p.patience(Duration::from_secs(5)), Duration::from_secs(5));
    }

    #[test]
    fn a_stream_of_garbage_is_failed_after_a_bound() {
        let mut p = Progress::default();
        for _ in 0..MAX_GARBAGE {
            assert_eq!(p.line(b"<html>"), Ok(false));
        }
        assert!(p.line(b"<html>").is_err());
    }

    #[test]
    fn retries_back_off_and_a_missing_model_waits_longer() {
        assert_eq!(retry_after(1, false), Duration::from_secs(10));
        assert_eq!(retry_after(3, false), Duration::from_secs(40));
        assert_eq!(retry_after(20, false), Duration::from_secs(300));
        assert_eq!(retry_after(1, true), Duration::from_secs(60));
        assert_eq!(retry_after(9, true), Duration::from_secs(600));
    }

    #[test]
    fn the_listing_names_models_as_ollama_lists_them_with_their_digest() {
        let tags = json!({"models": [{"name": "smollm2:135m", "digest": "abc", "size": 5}, {"model": "x"}]});
        let held = listing(&tags);
        assert_eq!(held["smollm2:135m"], ("sha256:abc".to_string(), 5));
        assert!(held.contains_key("x:latest"));
    }
}
