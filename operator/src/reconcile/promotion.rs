//! Verified promotion, decided without an API server: whether an application's rendered
//! revision serves, is being verified by a candidate, is promoted or has failed — from the
//! revision its Deployment runs, the status's record, the prober's progress and the retry
//! annotation. While a revision is verified the application's own Deployment and ConfigMap
//! are left exactly as they are: only the candidate, reached under its own consumer group,
//! sees the new revision.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use model_orchestra_api::v1alpha2::{PromotionPhase, PromotionStatus};

/// Annotating a CR with this (any new value) verifies its failed revisions again; the same
/// value twice does nothing.
pub(crate) use model_orchestra_api::keys::RETRY_PROMOTION_ANNOTATION as RETRY_ANNOTATION;

/// The longest answer kept in the status and Events.
const ANSWER_CHARS: usize = 200;

/// What the prober has seen of one verification.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Matching answers in a row.
    pub passes: u32,
    /// Failed probes in a row (a wrong answer, an error, a timeout).
    pub failures: u32,
    /// Probes sent.
    pub probes: u32,
    /// The last answer, if the last probe got one.
    pub answer: Option<String>,
    /// Why the last probe failed, when it did.
    pub error: Option<String>,
}

/// Where and what the prober asks to verify a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ask {
    pub namespace: String,
    /// The Service asked and its port named `http`.
    pub service: String,
    pub port: u16,
    /// Which API, and the model asked.
    pub target: Target,
    pub prompt: String,
    pub expect: String,
    pub max_tokens: i32,
    pub timeout: Duration,
    pub period: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

/// What the prober asks a candidate through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Takeoff: the gateway's OpenAI-compatible chat completions, `model` = the candidate's
    /// consumer group (the gateway routes by it).
    Gateway { group: String },
    /// Ollama: the candidate's own Service, `/api/generate` raw (the prompt as written, no
    /// chat template: base models answer too) with this model.
    Ollama { model: String },
}

/// The thresholds of a verification (`PromotionSettings`, in the terms decided here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Thresholds {
    pub success: u32,
    pub failure: u32,
    pub deadline: Duration,
}

/// Where the candidate's model stands, with a model cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Model {
    /// No cache, or its download of this revision is ready.
    Ready,
    Downloading(String),
    Failed(String),
}

/// Everything one application's decision depends on.
#[derive(Debug, Clone)]
pub(crate) struct Facts<'a> {
    /// The revision the chart rendered.
    pub revision: &'a str,
    /// The revision the application's Deployment runs (none: no Deployment yet).
    pub live: Option<&'a str>,
    pub previous: Option<&'a PromotionStatus>,
    /// The CR's `models.titanml.co/retry-promotion`.
    pub retry: Option<&'a str>,
    /// The prober's progress on this revision (and retry).
    pub progress: Option<&'a Progress>,
    pub model: Model,
    pub thresholds: Thresholds,
    pub now: &'a Time,
}

/// What to do with one application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Its revision serves: apply it as rendered; no candidate.
    Serve,
    /// Verify the revision: the application's Deployment and ConfigMap stay as they are
    /// (not applied, not pruned); the candidate runs (`candidate_replicas`) and is probed.
    Verify { candidate_replicas: i32, probe: bool },
    /// Verified: apply the application as rendered (its rollout replaces the old pods); the
    /// candidate goes.
    Promote,
    /// Failed: the application stays as it is; the candidate is kept at zero replicas.
    Fail,
}

/// The decision for one application, and its next promotion status.
pub(crate) fn decide(f: &Facts) -> (Decision, PromotionStatus) {
    let same = f.previous.filter(|p| p.revision == f.revision);
    let status = |phase: PromotionPhase, message: String, answer: Option<String>, retry: Option<String>| {
        let since = match same {
            Some(p) if p.phase == phase && p.retry == retry => p.since.clone(),
            _ => Some(f.now.clone()),
        };
        PromotionStatus { phase, revision: f.revision.to_string(), answer: answer.map(truncate), message, since, retry }
    };
    let kept_answer = same.and_then(|p| p.answer.clone());
    let kept_retry = same.and_then(|p| p.retry.clone());
    if f.live == Some(f.revision) {
        let message = "serving the verified revision".to_string();
        return (Decision::Serve, status(PromotionPhase::Promoted, message, kept_answer, kept_retry));
    }
    match same.map(|p| p.phase) {
        Some(PromotionPhase::Promoted) => {
            let message = "verified; rolling the application to it".to_string();
            return (Decision::Promote, status(PromotionPhase::Promoted, message, kept_answer, kept_retry));
        }
        Some(PromotionPhase::Failed) if f.retry.is_none() || f.retry == kept_retry.as_deref() => {
            let p = same.expect("matched");
            return (Decision::Fail, status(PromotionPhase::Failed, p.message.clone(), kept_answer, kept_retry));
        }
        _ => {}
    }
    // Verifying: a new revision, one being verified, or a failed one retried.
    let retry = match same.map(|p| p.phase) {
        Some(PromotionPhase::Verifying) => kept_retry,
        Some(PromotionPhase::Failed) => f.retry.map(str::to_string),
        _ => f.retry.map(str::to_string),
    };
    let started = match same {
        Some(p) if p.phase == PromotionPhase::Verifying && p.retry == retry => p.since.clone(),
        _ => None,
    };
    let elapsed =
        started.map_or(Duration::ZERO, |s| Duration::try_from(f.now.0.duration_since(s.0)).unwrap_or(Duration::ZERO));
    let progress = f.progress.cloned().unwrap_or_default();
    let answer = progress.answer.clone().or(kept_answer);
    let failed =
        |message: String| (Decision::Fail, status(PromotionPhase::Failed, message, answer.clone(), retry.clone()));
    if let Model::Failed(why) = &f.model {
        return failed(format!("the candidate's model download failed: {why}"));
    }
    if progress.passes >= f.thresholds.success {
        let message = format!("the candidate answered as expected {} time(s)", progress.passes);
        return (Decision::Promote, status(PromotionPhase::Promoted, message, answer, retry));
    }
    if progress.failures >= f.thresholds.failure {
        let why = match (&progress.error, &progress.answer) {
            (Some(e), _) => e.clone(),
            (None, Some(a)) => format!("the answer {:?} does not match", truncate(a.clone())),
            (None, None) => "no answer".into(),
        };
        return failed(format!("{} failed probe(s) in a row; the last: {why}", progress.failures));
    }
    if elapsed > f.thresholds.deadline {
        return failed(format!(
            "not verified within {}s ({} probe(s), {} matching in a row{})",
            f.thresholds.deadline.as_secs(),
            progress.probes,
            progress.passes,
            progress.error.as_ref().map(|e| format!("; the last: {e}")).unwrap_or_default()
        ));
    }
    let (decision, message) = match &f.model {
        Model::Downloading(why) => (
            Decision::Verify { candidate_replicas: 0, probe: false },
            format!("waiting for the candidate's model: {why}"),
        ),
        _ => {
            let message = match (&progress.error, progress.probes) {
                (_, 0) => "starting the candidate".to_string(),
                (Some(e), n) => {
                    format!("asked {n} time(s), {} matching in a row; the last failed: {e}", progress.passes)
                }
                (None, n) => format!("asked {n} time(s), {} matching in a row", progress.passes),
            };
            (Decision::Verify { candidate_replicas: 1, probe: true }, message)
        }
    };
    (decision, status(PromotionPhase::Verifying, message, answer, retry))
}

/// An answer as the status keeps it: at most [`ANSWER_CHARS`] characters, control
/// characters written as escapes.
fn truncate(answer: String) -> String {
    let clean: String = answer
        .chars()
        .flat_map(|c| if c.is_control() && c != '\n' { c.escape_default().collect::<Vec<_>>() } else { vec![c] })
        .collect();
    match clean.char_indices().nth(ANSWER_CHARS) {
        Some((i, _)) => format!("{}…", &clean[..i]),
        None => clean,
    }
}

/// Whether an answer matches the promotion's `expect`: from its start, case-insensitively.
/// `None` when `expect` is no regular expression (validation refuses such a spec first).
pub(crate) fn matches(expect: &str, answer: &str) -> Option<bool> {
    Some(crate::model::expectation(expect).ok()?.is_match(answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    const THRESHOLDS: Thresholds = Thresholds { success: 1, failure: 3, deadline: Duration::from_secs(600) };

    fn facts<'a>(
        live: Option<&'a str>,
        previous: Option<&'a PromotionStatus>,
        progress: Option<&'a Progress>,
        now: &'a Time,
    ) -> Facts<'a> {
        Facts {
            revision: "new",
            live,
            previous,
            retry: None,
            progress,
            model: Model::Ready,
            thresholds: THRESHOLDS,
            now,
        }
    }

    fn record(phase: PromotionPhase, since: i64, retry: Option<&str>) -> PromotionStatus {
        PromotionStatus {
            phase,
            revision: "new".into(),
            since: Some(at(since)),
            retry: retry.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn a_revision_the_application_runs_serves() {
        let (d, s) = decide(&facts(Some("new"), None, None, &at(1)));
        assert_eq!((d, s.phase), (Decision::Serve, PromotionPhase::Promoted));
    }

    #[test]
    fn a_new_revision_is_verified_by_a_candidate_while_the_application_stays() {
        let (d, s) = decide(&facts(Some("old"), None, None, &at(1)));
        assert_eq!(d, Decision::Verify { candidate_replicas: 1, probe: true });
        assert_eq!((s.phase, s.since), (PromotionPhase::Verifying, Some(at(1))));
    }

    #[test]
    fn a_first_deployment_is_verified_too() {
        let (d, _) = decide(&facts(None, None, None, &at(1)));
        assert!(matches!(d, Decision::Verify { .. }));
    }

    #[test]
    fn enough_matching_answers_promote() {
        let progress = Progress { passes: 1, probes: 1, answer: Some("Yes.".into()), ..Default::default() };
        let verifying = record(PromotionPhase::Verifying, 1, None);
        let (d, s) = decide(&facts(Some("old"), Some(&verifying), Some(&progress), &at(5)));
        assert_eq!((d, s.phase, s.answer.as_deref()), (Decision::Promote, PromotionPhase::Promoted, Some("Yes.")));
    }

    #[test]
    fn a_promoted_revision_is_applied_until_the_application_runs_it() {
        let promoted = record(PromotionPhase::Promoted, 1, None);
        assert_eq!(decide(&facts(Some("old"), Some(&promoted), None, &at(5))).0, Decision::Promote);
        assert_eq!(decide(&facts(Some("new"), Some(&promoted), None, &at(6))).0, Decision::Serve);
    }

    #[test]
    fn too_many_failed_probes_in_a_row_fail_it_quoting_the_answer() {
        let progress = Progress { failures: 3, probes: 3, answer: Some("No".into()), ..Default::default() };
        let verifying = record(PromotionPhase::Verifying, 1, None);
        let (d, s) = decide(&facts(Some("old"), Some(&verifying), Some(&progress), &at(5)));
        assert_eq!((d, s.phase), (Decision::Fail, PromotionPhase::Failed));
        assert!(s.message.contains("\"No\" does not match"), "{}", s.message);
    }

    #[test]
    fn a_candidate_that_never_answers_fails_at_the_deadline() {
        let verifying = record(PromotionPhase::Verifying, 0, None);
        assert!(matches!(decide(&facts(Some("old"), Some(&verifying), None, &at(599))).0, Decision::Verify { .. }));
        let (d, s) = decide(&facts(Some("old"), Some(&verifying), None, &at(601)));
        assert_eq!(d, Decision::Fail);
        assert!(s.message.contains("not verified within 600s"), "{}", s.message);
    }

    #[test]
    fn a_failure_stays_until_a_new_revision_or_a_new_retry_value() {
        let failed = record(PromotionPhase::Failed, 1, None);
        assert_eq!(decide(&facts(Some("old"), Some(&failed), None, &at(5))).0, Decision::Fail);
        let now = at(5);
        let mut retried = facts(Some("old"), Some(&failed), None, &now);
        retried.retry = Some("r1");
        let (d, s) = decide(&retried);
        assert!(matches!(d, Decision::Verify { .. }));
        assert_eq!(s.retry.as_deref(), Some("r1"));
        // The same value again, once it failed again: nothing.
        let failed_again = record(PromotionPhase::Failed, 9, Some("r1"));
        let later = at(10);
        let mut same = facts(Some("old"), Some(&failed_again), None, &later);
        same.retry = Some("r1");
        assert_eq!(decide(&same).0, Decision::Fail);
    }

    #[test]
    fn a_candidate_waits_for_its_model_and_a_failed_download_fails_the_promotion() {
        let now = at(1);
        let mut waiting = facts(Some("old"), None, None, &now);
        waiting.model = Model::Downloading("Job chat-dl-1 is downloading".into());
        assert_eq!(decide(&waiting).0, Decision::Verify { candidate_replicas: 0, probe: false });
        waiting.model = Model::Failed("BackoffLimitExceeded".into());
        assert_eq!(decide(&waiting).0, Decision::Fail);
    }

    #[test]
    fn the_answer_kept_is_short_and_has_no_control_characters() {
        let long = format!("yes\u{0}{}", "x".repeat(500));
        let progress = Progress { passes: 1, probes: 1, answer: Some(long), ..Default::default() };
        let (_, s) = decide(&facts(Some("old"), None, Some(&progress), &at(1)));
        let answer = s.answer.unwrap();
        assert!(answer.starts_with("yes\\u{0}") && answer.chars().count() <= ANSWER_CHARS + 1, "{answer}");
    }

    #[test]
    fn an_answer_matches_from_its_start_case_insensitively() {
        assert_eq!(matches(r"^\s*yes\b", "  Yes, it works"), Some(true));
        assert_eq!(matches(r"yes", "Well, yes"), Some(false), "anchored at the start");
        assert_eq!(matches(r"^\s*yes\b", "yesterday"), Some(false));
        assert_eq!(matches(r"(", "x"), None);
    }
}
