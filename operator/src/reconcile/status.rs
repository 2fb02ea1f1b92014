//! The status a reconcile reports: conditions `Ready`, `Progressing`, `Degraded` with
//! typed reasons, per-application readiness from the Deployments and their pods, the
//! gateway address. Pure: the reconciler gathers the facts, this decides the status, and it
//! is written only if it changed.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::condition::{ConditionType, Reason};
use super::model::{refresh_done, Download};
pub(crate) use super::pod_health::PodProblem;
// v1alpha2's status is v1alpha1's plus each model and the last refresh: a v1alpha1 line
// leaves those out, so it writes exactly the v1alpha1 status.
use model_orchestra_api::v1alpha2::{
    ApplicationStatus, ModelOrchestraStatus, ModelPhase, ModelRefresh, ModelStatus, PromotionPhase, PromotionStatus,
    PullPhase, PulledModelStatus, SleepPhase,
};

/// How far the reconcile got.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Every object is applied; what the cluster says about them.
    Applied { observed: Box<Observed>, hash: String },
    /// The spec fails the operator's validation: nothing was applied or pruned.
    RenderFailed(String),
    /// The API server refused an object in the dry run (`Invalid` or `Forbidden`):
    /// nothing was written.
    Refused { reason: Reason, message: String },
    /// Applying or pruning failed; retried with backoff.
    ApplyFailed(String),
    /// The cluster, or the operator, is catching up with a CRD installed moments ago
    /// ([`Reason::WaitingForApiServer`], [`Reason::StartingWatches`]); retried soon.
    Waiting { reason: Reason, message: String },
}

/// One component's readiness.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Health {
    pub replicas: ApplicationStatus,
    pub rollout: Rollout,
    pub problem: Option<PodProblem>,
    /// The application sleeps when idle: the model gateway owns its replicas.
    pub sleeps: bool,
}

impl Health {
    /// Scaled to zero by the model gateway: healthy, and woken by the next request.
    pub(crate) fn asleep(&self) -> bool {
        self.sleeps && self.replicas.desired_replicas == 0
    }

    /// Why the component does not serve: a pod's own problem (the scheduler's message, a
    /// container that cannot start) says more than the rollout's counts.
    fn why(&self) -> String {
        match (&self.problem, &self.rollout) {
            (Some(p), _) => p.message.clone(),
            (None, Rollout::Progressing { message, .. } | Rollout::Stuck { message }) => message.clone(),
            (None, Rollout::Done) => "pods not ready".into(),
        }
    }
}

/// Where a sleep-enabled application stands, from its Deployment and the last status:
/// scaled to zero is `Sleeping`; scaled up from `Sleeping` (or still `Waking`) with no
/// replica ready is `Waking`; anything else `Awake`.
pub(crate) fn sleep_phase(h: &Health, previous: Option<SleepPhase>) -> Option<SleepPhase> {
    if !h.sleeps {
        return None;
    }
    Some(if h.replicas.desired_replicas == 0 {
        SleepPhase::Sleeping
    } else if !h.replicas.ready && matches!(previous, Some(SleepPhase::Sleeping | SleepPhase::Waking)) {
        SleepPhase::Waking
    } else {
        SleepPhase::Awake
    })
}

/// Where a component's Deployment stands in rolling out its current generation (as
/// `kubectl rollout status` reads a Deployment's status).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rollout {
    /// The current generation's pods serve: every pod updated and available, no old one left.
    Done,
    /// Rolling out; `serving`: as many pods (of any revision) as desired are available, so
    /// the previous revision still serves meanwhile.
    Progressing { message: String, serving: bool },
    /// Past its progress deadline (the Deployment controller's `ProgressDeadlineExceeded`).
    Stuck { message: String },
}

impl Default for Rollout {
    fn default() -> Self {
        Rollout::Progressing { message: "the Deployment is not created yet".into(), serving: false }
    }
}

impl Rollout {
    fn serving(&self) -> bool {
        match self {
            Rollout::Done => true,
            Rollout::Progressing { serving, .. } => *serving,
            Rollout::Stuck { .. } => false,
        }
    }
}

/// What the cluster says about the applied objects: the gateway and the applications
/// apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Observed {
    pub gateway: Health,
    pub applications: BTreeMap<String, Health>,
    pub gateway_address: Option<String>,
    /// The download of each cached application's model.
    pub models: BTreeMap<String, Download>,
    /// The CR's `models.titanml.co/refresh` annotation.
    pub refresh: Option<String>,
    /// What the render found legal but almost certainly wrong (each naming its field).
    pub warnings: Vec<String>,
    /// Each application's verified promotion, when it has one.
    pub promotions: BTreeMap<String, PromotionStatus>,
    /// Each Ollama application's models, over the replicas that serve.
    pub pulls: BTreeMap<String, Vec<PulledModelStatus>>,
    /// No Takeoff gateway is rendered (every application is Ollama): it is not waited for.
    pub no_gateway: bool,
    /// A Deployment's controller has not seen its current generation yet: whether its pods
    /// roll is not known.
    pub controllers_behind: bool,
}

/// Whether the Deployment controller has yet to see `d`'s current generation (its status
/// describes an older spec).
pub(crate) fn controller_behind(d: &Deployment) -> bool {
    d.status.as_ref().and_then(|s| s.observed_generation).unwrap_or(0) < d.metadata.generation.unwrap_or(0)
}

/// How long a status waits, after an apply, for the Deployment controller to see the
/// generations that apply made (it takes milliseconds; seconds on a loaded control plane).
pub(crate) const CONTROLLER_CATCH_UP: Duration = Duration::from_secs(5);

/// Whether to hold the status back rather than write it: the user's edit (`edited`: the
/// CR's generation is newer than its status's) was applied `since_apply` ago and changed a
/// Deployment the controller has not seen yet. Written now, the status would say
/// `ApplicationsNotReady` ("has not seen the new generation yet") for an edit that rolls no
/// pod (a progress deadline, a strategy) and flip back a moment later; held, it says what
/// the edit did once the controller has said whether pods roll. What the operator changes
/// on its own (a group's root restarted) is reported at once: its status says why. Bounded:
/// a controller that does not catch up within [`CONTROLLER_CATCH_UP`] is reported as it is.
pub(crate) fn hold_for_controllers(observed: &Observed, edited: bool, since_apply: Duration) -> bool {
    edited && observed.controllers_behind && since_apply < CONTROLLER_CATCH_UP
}

/// Readiness of one component from its Deployment (replicas may be owned by an autoscaler,
/// so the live `spec.replicas` is the desired count). Ready means the current generation's
/// pods serve: the old pods of an unfinished rollout do not count.
pub(crate) fn deployment_readiness(d: Option<&Deployment>) -> (ApplicationStatus, Rollout) {
    let Some(d) = d else {
        return (ApplicationStatus::default(), Rollout::default());
    };
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let ready_replicas = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
    let rollout = rollout(d);
    let ready = rollout == Rollout::Done && ready_replicas >= desired;
    (ApplicationStatus { ready_replicas, desired_replicas: desired, ready, ..Default::default() }, rollout)
}

fn rollout(d: &Deployment) -> Rollout {
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = d.status.clone().unwrap_or_default();
    let (updated, available, total) =
        (status.updated_replicas.unwrap_or(0), status.available_replicas.unwrap_or(0), status.replicas.unwrap_or(0));
    let serving = available >= desired;
    let stuck = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded"));
    if let Some(c) = stuck {
        let detail = c.message.clone().unwrap_or_default();
        return Rollout::Stuck { message: format!("the rollout is past its progress deadline ({detail})") };
    }
    let progressing = |message: String| Rollout::Progressing { message, serving };
    if status.observed_generation.unwrap_or(0) < d.metadata.generation.unwrap_or(0) {
        return progressing("the Deployment controller has not seen the new generation yet".into());
    }
    if updated < desired {
        return progressing(format!("{updated} of {desired} new pods updated"));
    }
    if total > updated {
        return progressing(format!("{} old pods still running", total - updated));
    }
    if available < updated {
        return progressing(format!("{available} of {updated} new pods available"));
    }
    Rollout::Done
}

/// Everything the next status depends on.
pub(crate) struct Report<'a> {
    pub previous: &'a ModelOrchestraStatus,
    pub generation: Option<i64>,
    pub outcome: &'a Outcome,
    pub operator_version: &'a str,
    /// The API version the CR is served as, recorded so every line routes it alike.
    pub served_as: &'a str,
    /// The routing value of the line writing the status.
    pub line: &'a str,
    pub now: &'a Time,
}

/// One condition's status, reason and message.
type Verdict = (bool, Reason, String);

/// `(Ready, Progressing, Degraded)` for an outcome.
fn verdicts(outcome: &Outcome) -> [Verdict; 3] {
    match outcome {
        Outcome::RenderFailed(m) => [
            (false, Reason::RenderFailed, m.clone()),
            (false, Reason::RenderFailed, m.clone()),
            (true, Reason::RenderFailed, m.clone()),
        ],
        Outcome::Refused { reason, message: m } => {
            [(false, *reason, m.clone()), (false, *reason, m.clone()), (true, *reason, m.clone())]
        }
        Outcome::ApplyFailed(m) => [
            (false, Reason::ApplyFailed, m.clone()),
            (true, Reason::Retrying, m.clone()),
            (true, Reason::ApplyFailed, m.clone()),
        ],
        Outcome::Waiting { reason, message: m } => {
            [(false, *reason, m.clone()), (true, *reason, m.clone()), (false, Reason::AsExpected, String::new())]
        }
        Outcome::Applied { observed, .. } => {
            let failed: Vec<String> = observed
                .models
                .iter()
                .filter(|(_, d)| d.phase == ModelPhase::Failed)
                .map(|(app, d)| format!("{app}: {}", d.message))
                .collect();
            if !failed.is_empty() {
                let m = format!("model download failed: {}", failed.join("; "));
                return [
                    (false, Reason::ModelDownloadFailed, m.clone()),
                    (false, Reason::ModelDownloadFailed, m.clone()),
                    (true, Reason::ModelDownloadFailed, m),
                ];
            }
            let pull_failed: Vec<String> = observed
                .pulls
                .iter()
                .flat_map(|(app, models)| {
                    models
                        .iter()
                        .filter(|m| m.phase == PullPhase::Failed)
                        .map(move |m| format!("{app}: {}: {}", m.name, m.message))
                })
                .collect();
            if !pull_failed.is_empty() {
                let m = format!("model pull failed: {}", pull_failed.join("; "));
                return [
                    (false, Reason::ModelPullFailed, m.clone()),
                    // Retried with backoff: the CR is not settled.
                    (true, Reason::ModelPullFailed, m.clone()),
                    (true, Reason::ModelPullFailed, m),
                ];
            }
            let refused: Vec<String> = observed
                .promotions
                .iter()
                .filter(|(_, p)| p.phase == PromotionPhase::Failed)
                .map(|(app, p)| {
                    let answer = p.answer.as_ref().map(|a| format!("; answer: {a:?}")).unwrap_or_default();
                    let serving = match observed.applications.get(app) {
                        Some(h) if h.replicas.ready_replicas > 0 => "the previous revision keeps serving",
                        _ => "nothing serves yet",
                    };
                    format!("{app}: revision {}: {}{answer} ({serving})", p.revision, p.message)
                })
                .collect();
            if !refused.is_empty() {
                let m = format!("promotion failed: {}", refused.join("; "));
                return [
                    (false, Reason::PromotionFailed, m.clone()),
                    (false, Reason::PromotionFailed, m.clone()),
                    (true, Reason::PromotionFailed, m),
                ];
            }
            let mut verdicts = applied_verdicts(observed);
            if !observed.warnings.is_empty() {
                let m =
                    format!("{} warning(s) about the spec: {}", observed.warnings.len(), observed.warnings.join("; "));
                let degraded = &mut verdicts[2];
                if degraded.0 {
                    degraded.2 = format!("{}; {m}", degraded.2);
                } else {
                    *degraded = (true, Reason::SpecWarnings, m);
                }
            }
            verdicts
        }
    }
}

/// `(Ready, Progressing, Degraded)` of a CR whose objects are all applied.
fn applied_verdicts(observed: &Observed) -> [Verdict; 3] {
    let model_waiting = |app: &str| observed.models.get(app).filter(|d| d.phase != ModelPhase::Ready);
    let pulls_waiting = |app: &str| pull_progress(observed.pulls.get(app).map(Vec::as_slice).unwrap_or_default());
    let verifying = |app: &str| observed.promotions.get(app).filter(|p| p.phase == PromotionPhase::Verifying);
    let app_ready = |app: &str, h: &Health| {
        h.asleep()
            || (h.replicas.ready
                && model_waiting(app).is_none()
                && verifying(app).is_none()
                && pulls_waiting(app).is_none())
    };
    let gateway = (!observed.no_gateway).then_some(("gateway", &observed.gateway));
    let components = gateway.into_iter().chain(observed.applications.iter().map(|(k, v)| (k.as_str(), v)));
    let waiting: Vec<(&str, &Health)> = components.filter(|(name, h)| !app_ready(name, h)).collect();
    let ready_apps = observed.applications.iter().filter(|(k, h)| app_ready(k, h)).count();
    let fine = (false, Reason::AsExpected, "all objects applied".to_string());
    if waiting.is_empty() {
        let and_gateway = if observed.no_gateway { "" } else { " and the gateway" };
        let asleep: Vec<&str> =
            observed.applications.iter().filter(|(_, h)| h.asleep()).map(|(k, _)| k.as_str()).collect();
        let asleep = if asleep.is_empty() {
            String::new()
        } else {
            format!(" ({} asleep: the next request wakes it)", asleep.join(", "))
        };
        let m = format!("{ready_apps}/{} applications{and_gateway} are ready{asleep}", observed.applications.len());
        return [(true, Reason::Ready, m.clone()), (false, Reason::Ready, m), fine];
    }
    let why = Health::why;
    let stuck: Vec<String> = waiting
        .iter()
        .filter_map(|(name, h)| match &h.rollout {
            Rollout::Stuck { message } => Some(match &h.problem {
                Some(p) => format!("{name}: {message}: {}", p.message),
                None => format!("{name}: {message}"),
            }),
            _ => None,
        })
        .collect();
    if !stuck.is_empty() {
        let m = format!("rollout stuck: {}", stuck.join("; "));
        return [
            (false, Reason::RolloutStuck, m.clone()),
            (false, Reason::RolloutStuck, m.clone()),
            (true, Reason::RolloutStuck, m),
        ];
    }
    let unschedulable: Vec<&(&str, &Health)> =
        waiting.iter().filter(|(_, h)| h.problem.as_ref().is_some_and(|p| p.unschedulable)).collect();
    if !unschedulable.is_empty() {
        let described: Vec<String> = unschedulable
            .iter()
            .map(|(name, h)| {
                let old = if h.rollout.serving() { " (the previous pods keep serving)" } else { "" };
                format!("{name}: {}{old}", why(h))
            })
            .collect();
        let m = format!("pods cannot be scheduled: {}", described.join("; "));
        // Degraded only when something does not serve; a rollout whose new pods wait for
        // room is progressing until its deadline.
        let serving = unschedulable.iter().all(|(_, h)| h.rollout.serving());
        let degraded = if serving { fine } else { (true, Reason::Unschedulable, m.clone()) };
        return [(false, Reason::Unschedulable, m.clone()), (true, Reason::Unschedulable, m), degraded];
    }
    let described: Vec<String> = waiting
        .iter()
        .map(|(name, h)| match (verifying(name), model_waiting(name), pulls_waiting(name)) {
            (Some(p), _, _) => format!("{name} (verifying revision {}: {})", p.revision, p.message),
            (None, Some(d), _) => format!("{name} (model {}: {})", d.phase.as_str(), d.message),
            (None, None, Some(pulls)) => format!("{name} ({pulls})"),
            (None, None, None) => format!("{name} ({})", why(h)),
        })
        .collect();
    let m = format!("waiting for {}", described.join(", "));
    let reason = if waiting.iter().any(|(name, _)| verifying(name).is_some()) {
        Reason::Verifying
    } else {
        Reason::ApplicationsNotReady
    };
    [(false, reason, m.clone()), (true, reason, m), fine]
}

/// The next status. `lastTransitionTime` moves only when a condition's status flips; after
/// a failure the last observed applications and gateway address are kept.
pub(crate) fn next_status(r: &Report) -> ModelOrchestraStatus {
    let conditions = ConditionType::ALL
        .into_iter()
        .zip(verdicts(r.outcome))
        .map(|(type_, (status, reason, message))| {
            let status = if status { "True" } else { "False" };
            let since = match condition(r.previous, type_) {
                Some(c) if c.status == status => c.last_transition_time.clone(),
                _ => r.now.clone(),
            };
            Condition {
                type_: type_.as_str().into(),
                status: status.into(),
                reason: reason.as_str().into(),
                message,
                observed_generation: r.generation,
                last_transition_time: since,
            }
        })
        .collect();
    let mut next = ModelOrchestraStatus {
        observed_generation: r.generation,
        conditions,
        operator_version: Some(r.operator_version.into()),
        served_as: Some(r.served_as.into()),
        line: Some(r.line.into()),
        ..r.previous.clone()
    };
    if let Outcome::Applied { observed, hash } = r.outcome {
        let apps: BTreeMap<String, ApplicationStatus> = observed
            .applications
            .iter()
            .map(|(k, h)| {
                let model = observed
                    .models
                    .get(k)
                    .map(|d| model_status(r.previous.applications.get(k).and_then(|a| a.model.as_ref()), d, r.now));
                let promotion = observed.promotions.get(k).cloned();
                let verified = promotion.as_ref().is_none_or(|p| p.phase == PromotionPhase::Promoted);
                let previous = r.previous.applications.get(k);
                let sleep = sleep_phase(h, previous.and_then(|a| a.sleep));
                // Asleep, no replica holds the models: they stand as they were last seen.
                let models = match (h.asleep(), previous) {
                    (true, Some(p)) => p.models.clone(),
                    _ => observed.pulls.get(k).cloned().unwrap_or_default(),
                };
                let ready = h.asleep()
                    || (h.replicas.ready
                        && verified
                        && model.as_ref().is_none_or(|m| m.phase == ModelPhase::Ready)
                        && models.iter().all(|m| m.phase == PullPhase::Ready));
                let sleep_since = match previous {
                    Some(p) if p.sleep == sleep => p.sleep_since.clone(),
                    _ => sleep.map(|_| r.now.clone()),
                };
                let message = if ready {
                    String::new()
                } else if !h.replicas.ready {
                    h.why()
                } else {
                    pull_progress(&models).unwrap_or_default()
                };
                let status = ApplicationStatus {
                    ready,
                    model,
                    promotion,
                    models,
                    sleep,
                    sleep_since,
                    message,
                    ..h.replicas.clone()
                };
                (k.clone(), status)
            })
            .collect();
        next.applications_ready = Some(format!("{}/{}", apps.values().filter(|a| a.ready).count(), apps.len()));
        if let Some(value) = observed.refresh.as_deref() {
            let new = r.previous.model_refresh.as_ref().is_none_or(|done| done.value != value);
            if new && refresh_done(value, &observed.models) {
                next.model_refresh = Some(ModelRefresh { value: value.to_string(), completed_at: r.now.clone() });
            }
        }
        next.models_ready = super::pulls::models_ready(apps.values().map(|a| a.models.as_slice()));
        let asleep: Vec<String> = apps
            .iter()
            .filter_map(|(k, a)| match a.sleep {
                Some(SleepPhase::Sleeping) => Some(k.clone()),
                Some(SleepPhase::Waking) => Some(format!("{k} (waking)")),
                _ => None,
            })
            .collect();
        next.asleep = (!asleep.is_empty()).then(|| asleep.join(", "));
        next.applications = apps;
        next.gateway_address = observed.gateway_address.clone();
        next.applied_hash = Some(hash.clone());
    }
    next
}

/// What an application's models wait for, when some do: each one's phase, with its bytes
/// while they are counted, else its message.
fn pull_progress(models: &[PulledModelStatus]) -> Option<String> {
    let waiting: Vec<String> = models
        .iter()
        .filter(|m| m.phase != PullPhase::Ready)
        .map(|m| match (m.completed_bytes, m.total_bytes) {
            (Some(c), Some(t)) if t > 0 => format!("model {} {} {c}/{t} bytes", m.name, m.phase.as_str()),
            _ if !m.message.is_empty() => format!("model {} {}: {}", m.name, m.phase.as_str(), m.message),
            _ => format!("model {} {}", m.name, m.phase.as_str()),
        })
        .collect();
    (!waiting.is_empty()).then(|| waiting.join(", "))
}

/// A model's status: `since` moves only when the phase changes.
fn model_status(previous: Option<&ModelStatus>, d: &Download, now: &Time) -> ModelStatus {
    let since = match previous {
        Some(p) if p.phase == d.phase && p.job == d.job => p.since.clone(),
        _ => Some(now.clone()),
    };
    ModelStatus {
        phase: d.phase,
        message: d.message.clone(),
        since,
        job: d.job.clone(),
        refresh: d.refresh.clone(),
        serving: d.serving.clone(),
    }
}

/// Whether `next` differs from `previous` only in how many pods are ready: the same
/// generation, apply and address, every condition with the same status and reason (their
/// messages count pods), every application's model and promotion as they were.
pub(crate) fn only_progress(previous: &ModelOrchestraStatus, next: &ModelOrchestraStatus) -> bool {
    let without_counts = |s: &ModelOrchestraStatus| {
        let mut s = s.clone();
        s.applications_ready = None;
        for c in &mut s.conditions {
            c.message = String::new();
        }
        for a in s.applications.values_mut() {
            (a.ready_replicas, a.ready) = (0, false);
            for m in &mut a.models {
                (m.completed_bytes, m.total_bytes) = (None, None);
            }
        }
        s
    };
    without_counts(previous) == without_counts(next)
}

/// The condition of `type_`, if set.
pub(crate) fn condition(status: &ModelOrchestraStatus, type_: ConditionType) -> Option<&Condition> {
    status.conditions.iter().find(|c| c.type_ == type_.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    const READY: ConditionType = ConditionType::Ready;
    const PROGRESSING: ConditionType = ConditionType::Progressing;
    const DEGRADED: ConditionType = ConditionType::Degraded;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn health(ready: bool) -> Health {
        Health {
            replicas: ApplicationStatus {
                ready_replicas: i32::from(ready),
                desired_replicas: 1,
                ready,
                ..Default::default()
            },
            rollout: if ready {
                Rollout::Done
            } else {
                Rollout::Progressing { message: "0 of 1 new pods available".into(), serving: false }
            },
            problem: None,
            sleeps: false,
        }
    }

    fn applied(ready: bool) -> Outcome {
        let observed = Observed {
            gateway: health(true),
            applications: BTreeMap::from([("chat".to_string(), health(ready))]),
            gateway_address: Some("demo-gateway.ns.svc:80".into()),
            ..Default::default()
        };
        Outcome::Applied { observed: Box::new(observed), hash: "h".into() }
    }

    fn next(previous: &ModelOrchestraStatus, generation: i64, outcome: &Outcome, now: i64) -> ModelOrchestraStatus {
        next_status(&Report {
            previous,
            generation: Some(generation),
            outcome,
            operator_version: "0.1.0",
            served_as: "v1alpha1",
            line: "v0",
            now: &at(now),
        })
    }

    fn status_of(s: &ModelOrchestraStatus, t: ConditionType) -> (String, String) {
        let c = condition(s, t).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    /// A sleep-enabled application scaled to `desired` with `ready` replicas ready.
    fn sleeper(desired: i32, ready: i32) -> Outcome {
        let h = Health {
            replicas: ApplicationStatus {
                ready_replicas: ready,
                desired_replicas: desired,
                ready: ready >= desired,
                ..Default::default()
            },
            rollout: Rollout::Done,
            problem: ready
                .lt(&desired)
                .then(|| PodProblem { message: "Back-off pulling image \"nope\"".into(), unschedulable: false }),
            sleeps: true,
        };
        let observed = Observed {
            gateway: health(true),
            applications: BTreeMap::from([("chat".to_string(), h)]),
            ..Default::default()
        };
        Outcome::Applied { observed: Box::new(observed), hash: "h".into() }
    }

    #[test]
    fn an_application_scaled_to_zero_by_the_gateway_is_sleeping_and_counts_as_ready() {
        let s = next(&Default::default(), 1, &sleeper(0, 0), 1);
        assert_eq!(status_of(&s, READY), ("True".into(), "Ready".into()));
        assert_eq!(s.applications["chat"].sleep, Some(SleepPhase::Sleeping));
        assert!(s.applications["chat"].ready);
        assert_eq!(s.asleep.as_deref(), Some("chat"));
        assert!(condition(&s, READY).unwrap().message.contains("chat asleep"));
    }

    #[test]
    fn scaled_up_from_sleeping_without_a_ready_replica_is_waking_with_the_reason() {
        let asleep = next(&Default::default(), 1, &sleeper(0, 0), 1);
        let s = next(&asleep, 1, &sleeper(1, 0), 2);
        let chat = &s.applications["chat"];
        assert_eq!(chat.sleep, Some(SleepPhase::Waking));
        assert!(!chat.ready);
        assert!(chat.message.contains("Back-off pulling image"), "{}", chat.message);
        assert_eq!(s.asleep.as_deref(), Some("chat (waking)"));
        assert_eq!(chat.sleep_since, Some(at(2)));
    }

    #[test]
    fn a_woken_application_with_a_ready_replica_is_awake() {
        let asleep = next(&Default::default(), 1, &sleeper(0, 0), 1);
        let waking = next(&asleep, 1, &sleeper(1, 0), 2);
        let s = next(&waking, 1, &sleeper(1, 1), 7);
        assert_eq!(s.applications["chat"].sleep, Some(SleepPhase::Awake));
        assert_eq!(s.asleep, None);
        assert_eq!(s.applications["chat"].message, "");
    }

    #[test]
    fn a_sleep_enabled_application_starting_for_the_first_time_is_awake_not_waking() {
        let s = next(&Default::default(), 1, &sleeper(1, 0), 1);
        assert_eq!(s.applications["chat"].sleep, Some(SleepPhase::Awake));
    }

    #[test]
    fn applied_with_all_deployments_ready_is_ready_and_not_progressing() {
        let s = next(&Default::default(), 2, &applied(true), 1);
        assert_eq!(status_of(&s, READY), ("True".into(), "Ready".into()));
        assert_eq!(status_of(&s, PROGRESSING).0, "False");
        assert_eq!(status_of(&s, DEGRADED).0, "False");
        assert_eq!(s.applications_ready.as_deref(), Some("1/1"));
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(s.applied_hash.as_deref(), Some("h"));
        assert!(!s.applications.contains_key("gateway"));
    }

    #[test]
    fn applied_but_waiting_for_an_application_is_progressing_with_its_name() {
        let s = next(&Default::default(), 1, &applied(false), 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "ApplicationsNotReady".into()));
        assert!(condition(&s, READY).unwrap().message.contains("chat"));
        assert_eq!(status_of(&s, PROGRESSING).0, "True");
    }

    #[test]
    fn an_unschedulable_application_is_degraded_with_the_schedulers_message() {
        let mut outcome = applied(false);
        if let Outcome::Applied { observed, .. } = &mut outcome {
            observed.applications.get_mut("chat").unwrap().problem = Some(PodProblem {
                unschedulable: true,
                message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.".into(),
            });
        }
        let s = next(&Default::default(), 1, &outcome, 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "Unschedulable".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "Unschedulable".into()));
        assert_eq!(
            condition(&s, READY).unwrap().message,
            "pods cannot be scheduled: chat: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
        );
    }

    #[test]
    fn a_render_failure_is_degraded_and_keeps_the_last_observed_applications() {
        let before = next(&Default::default(), 1, &applied(true), 1);
        let s = next(&before, 2, &Outcome::RenderFailed("spec.x: bad".into()), 2);
        assert_eq!(status_of(&s, READY), ("False".into(), "RenderFailed".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "RenderFailed".into()));
        assert_eq!(s.applications, before.applications);
        assert_eq!(s.applied_hash.as_deref(), Some("h"));
    }

    #[test]
    fn an_object_the_server_refuses_is_degraded_with_its_reason_and_nothing_progresses() {
        let before = next(&Default::default(), 1, &applied(true), 1);
        let s = next(&before, 2, &Outcome::Refused { reason: Reason::Invalid, message: "Service s: denied".into() }, 2);
        assert_eq!(status_of(&s, READY), ("False".into(), "Invalid".into()));
        assert_eq!(status_of(&s, PROGRESSING), ("False".into(), "Invalid".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "Invalid".into()));
        assert_eq!(s.gateway_address, before.gateway_address);
    }

    #[test]
    fn an_apply_failure_is_retried_and_degraded() {
        let s = next(&Default::default(), 1, &Outcome::ApplyFailed("applying ConfigMap c: timeout".into()), 1);
        assert_eq!(status_of(&s, PROGRESSING), ("True".into(), "Retrying".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "ApplyFailed".into()));
    }

    #[test]
    fn waiting_for_the_api_server_progresses_and_is_not_degraded() {
        let waiting =
            Outcome::Waiting { reason: Reason::WaitingForApiServer, message: "waiting for the API server".into() };
        let s = next(&Default::default(), 1, &waiting, 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "WaitingForAPIServer".into()));
        assert_eq!(status_of(&s, PROGRESSING), ("True".into(), "WaitingForAPIServer".into()));
        assert_eq!(status_of(&s, DEGRADED), ("False".into(), "AsExpected".into()));
    }

    #[test]
    fn last_transition_time_changes_only_when_the_condition_flips() {
        let first = next(&Default::default(), 1, &applied(false), 10);
        let same = next(&first, 1, &applied(false), 20);
        assert_eq!(condition(&same, READY).unwrap().last_transition_time, at(10));
        assert_eq!(same, first, "nothing changed, so the status is identical and not written");
        let flipped = next(&same, 1, &applied(true), 30);
        assert_eq!(condition(&flipped, READY).unwrap().last_transition_time, at(30));
        assert_eq!(condition(&flipped, DEGRADED).unwrap().last_transition_time, at(10), "Degraded stayed False");
    }

    fn with_model(phase: ModelPhase, message: &str, refresh: Option<&str>) -> Outcome {
        let mut outcome = applied(true);
        if let Outcome::Applied { observed, .. } = &mut outcome {
            let download = Download {
                job: "chat-dl-1".into(),
                phase,
                message: message.into(),
                refresh: refresh.map(str::to_string),
                serving: None,
            };
            observed.models.insert("chat".into(), download);
            observed.refresh = refresh.map(str::to_string);
        }
        outcome
    }

    #[test]
    fn a_failed_download_is_model_download_failed_and_degraded_with_its_message() {
        let s = next(
            &Default::default(),
            1,
            &with_model(ModelPhase::Failed, "Job chat-dl-1: BackoffLimitExceeded", None),
            1,
        );
        assert_eq!(status_of(&s, READY), ("False".into(), "ModelDownloadFailed".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "ModelDownloadFailed".into()));
        assert_eq!(
            condition(&s, READY).unwrap().message,
            "model download failed: chat: Job chat-dl-1: BackoffLimitExceeded"
        );
        let model = s.applications["chat"].model.clone().unwrap();
        assert_eq!((model.phase, model.job.as_str()), (ModelPhase::Failed, "chat-dl-1"));
        assert!(!s.applications["chat"].ready);
    }

    #[test]
    fn an_application_whose_model_is_downloading_is_not_ready_and_says_so() {
        let s =
            next(&Default::default(), 1, &with_model(ModelPhase::Downloading, "Job chat-dl-1 is downloading", None), 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "ApplicationsNotReady".into()));
        assert_eq!(
            condition(&s, READY).unwrap().message,
            "waiting for chat (model Downloading: Job chat-dl-1 is downloading)"
        );
        assert_eq!(s.applications_ready.as_deref(), Some("0/1"));
    }

    #[test]
    fn a_models_since_moves_only_when_its_phase_changes() {
        let first = next(&Default::default(), 1, &with_model(ModelPhase::Downloading, "a", None), 10);
        let same = next(&first, 1, &with_model(ModelPhase::Downloading, "a", None), 20);
        assert_eq!(same.applications["chat"].model.as_ref().unwrap().since, Some(at(10)));
        let ready = next(&same, 1, &with_model(ModelPhase::Ready, "done", None), 30);
        assert_eq!(ready.applications["chat"].model.as_ref().unwrap().since, Some(at(30)));
    }

    #[test]
    fn a_refresh_is_stamped_once_when_its_models_are_ready() {
        let running = next(&Default::default(), 1, &with_model(ModelPhase::Downloading, "", Some("r1")), 10);
        assert_eq!(running.model_refresh, None);
        let done = next(&running, 1, &with_model(ModelPhase::Ready, "", Some("r1")), 20);
        assert_eq!(done.model_refresh, Some(ModelRefresh { value: "r1".into(), completed_at: at(20) }));
        let later = next(&done, 1, &with_model(ModelPhase::Ready, "", Some("r1")), 30);
        assert_eq!(later.model_refresh, done.model_refresh, "the same value is not stamped again");
    }

    fn deployment(generation: i64, status: serde_json::Value) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d", "generation": generation},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn a_deployment_whose_controller_has_not_seen_its_generation_is_behind() {
        let seen = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert!(!controller_behind(&deployment(2, seen.clone())));
        assert!(controller_behind(&deployment(3, seen)));
    }

    #[test]
    fn a_status_waits_for_the_controllers_a_few_seconds_after_an_apply_and_no_longer() {
        let behind = Observed { controllers_behind: true, ..Default::default() };
        assert!(hold_for_controllers(&behind, true, Duration::from_millis(300)));
        assert!(
            !hold_for_controllers(&behind, true, CONTROLLER_CATCH_UP),
            "a controller that does not catch up is reported"
        );
        assert!(!hold_for_controllers(&Observed::default(), true, Duration::ZERO), "nothing to wait for");
    }

    #[test]
    fn what_the_operator_changes_on_its_own_is_reported_at_once() {
        let behind = Observed { controllers_behind: true, ..Default::default() };
        assert!(!hold_for_controllers(&behind, false, Duration::ZERO), "a group's root restarted: the status says why");
    }

    #[test]
    fn a_deployment_is_ready_only_when_every_pod_is_updated_available_and_no_old_one_is_left() {
        let done = json!({"observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        let (replicas, rollout) = deployment_readiness(Some(&deployment(2, done.clone())));
        assert!(replicas.ready);
        assert_eq!(rollout, Rollout::Done);
        assert!(!deployment_readiness(Some(&deployment(3, done))).0.ready, "status describes an older generation");
        assert!(!deployment_readiness(None).0.ready);
    }

    #[test]
    fn the_old_pods_of_an_unfinished_rollout_do_not_make_it_ready() {
        // A surge: the new pod waits for a GPU, the two old ones still serve.
        let surge = json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 2, "updatedReplicas": 1, "availableReplicas": 2});
        let (replicas, rollout) = deployment_readiness(Some(&deployment(2, surge)));
        assert!(!replicas.ready);
        assert_eq!(rollout, Rollout::Progressing { message: "1 of 2 new pods updated".into(), serving: true });
        let leftover = json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 2, "availableReplicas": 3});
        assert_eq!(
            deployment_readiness(Some(&deployment(2, leftover))).1,
            Rollout::Progressing { message: "1 old pods still running".into(), serving: true }
        );
    }

    #[test]
    fn a_rollout_past_its_progress_deadline_is_stuck() {
        let stuck = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"d-1\" has timed out progressing."}]});
        assert!(matches!(deployment_readiness(Some(&deployment(2, stuck))).1, Rollout::Stuck { .. }));
    }

    fn rolling(rollout: Rollout, problem: Option<PodProblem>) -> Outcome {
        let mut outcome = applied(false);
        if let Outcome::Applied { observed, .. } = &mut outcome {
            let chat = observed.applications.get_mut("chat").unwrap();
            chat.rollout = rollout;
            chat.problem = problem;
        }
        outcome
    }

    fn gpu_full() -> Option<PodProblem> {
        Some(PodProblem {
            unschedulable: true,
            message: "0/6 nodes are available: 2 Insufficient nvidia.com/gpu.".into(),
        })
    }

    #[test]
    fn new_pods_waiting_for_room_while_the_old_ones_serve_are_progressing_not_ready_and_not_degraded() {
        let outcome =
            rolling(Rollout::Progressing { message: "0 of 1 new pods updated".into(), serving: true }, gpu_full());
        let s = next(&Default::default(), 2, &outcome, 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "Unschedulable".into()));
        assert_eq!(status_of(&s, PROGRESSING), ("True".into(), "Unschedulable".into()));
        assert_eq!(status_of(&s, DEGRADED).0, "False");
        let message = &condition(&s, PROGRESSING).unwrap().message;
        assert!(
            message.contains("Insufficient nvidia.com/gpu") && message.contains("previous pods keep serving"),
            "{message}"
        );
    }

    #[test]
    fn a_stuck_rollout_is_degraded_with_the_pods_problem() {
        let outcome =
            rolling(Rollout::Stuck { message: "the rollout is past its progress deadline".into() }, gpu_full());
        let s = next(&Default::default(), 2, &outcome, 1);
        assert_eq!(status_of(&s, READY), ("False".into(), "RolloutStuck".into()));
        assert_eq!(status_of(&s, PROGRESSING), ("False".into(), "RolloutStuck".into()));
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "RolloutStuck".into()));
        assert!(condition(&s, DEGRADED).unwrap().message.contains("Insufficient nvidia.com/gpu"));
    }

    #[test]
    fn warnings_make_an_otherwise_healthy_cr_degraded_with_their_fields_and_keep_it_ready() {
        let mut outcome = applied(true);
        if let Outcome::Applied { observed, .. } = &mut outcome {
            observed.warnings = vec!["spec.applications.chat.tolerations: no GPU toleration".into()];
        }
        let s = next(&Default::default(), 1, &outcome, 1);
        assert_eq!(status_of(&s, READY).0, "True");
        assert_eq!(status_of(&s, DEGRADED), ("True".into(), "SpecWarnings".into()));
        assert!(condition(&s, DEGRADED).unwrap().message.contains("spec.applications.chat.tolerations"));
    }

    #[test]
    fn the_status_records_the_version_the_cr_is_served_as_and_the_line() {
        let s = next(&Default::default(), 1, &applied(true), 1);
        assert_eq!((s.served_as.as_deref(), s.line.as_deref()), (Some("v1alpha1"), Some("v0")));
    }

    fn coming_up(ready: i32, reason: &str) -> ModelOrchestraStatus {
        let condition = Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: reason.into(),
            message: format!("waiting for chat ({ready}/2 ready)"),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        let chat =
            ApplicationStatus { ready_replicas: ready, desired_replicas: 2, ready: ready == 2, ..Default::default() };
        ModelOrchestraStatus {
            observed_generation: Some(1),
            conditions: vec![condition],
            applications_ready: Some(format!("{}/1", i32::from(ready == 2))),
            applications: [("chat".to_string(), chat)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn more_ready_pods_and_nothing_else_is_only_progress() {
        assert!(only_progress(&coming_up(0, "ApplicationsNotReady"), &coming_up(1, "ApplicationsNotReady")));
    }

    #[test]
    fn a_new_reason_or_generation_is_more_than_progress() {
        let before = coming_up(1, "ApplicationsNotReady");
        assert!(!only_progress(&before, &coming_up(1, "Unschedulable")));
        let next = ModelOrchestraStatus { observed_generation: Some(2), ..before.clone() };
        assert!(!only_progress(&before, &next));
    }
}
