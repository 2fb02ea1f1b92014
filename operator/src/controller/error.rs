//! Why a reconcile failed, with the API server's answer kept as the source; what it means
//! for the status and the retry is decided in the pure layer
//! ([`crate::reconcile::failure`]).

use crate::error::RenderError;
use crate::reconcile::backoff::Retry;
use crate::reconcile::condition::Reason;
pub(super) use crate::reconcile::failure::Step;
use crate::reconcile::failure::{Failed, Failure};
use crate::reconcile::plan::PlannedObject;
use crate::reconcile::status::Outcome;

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReconcileError {
    #[error("{0}")]
    Render(#[from] RenderError),
    #[error("the cluster does not serve {0}: install its CRD or disable the feature in the spec")]
    Unserved(String),
    #[error("the cluster serves {0} since moments ago; the operator starts watching it")]
    NotWatchedYet(String),
    #[error("{step} {kind} {name}: {}", api_message(.source))]
    Request { step: Step, kind: &'static str, name: String, source: kube::Error },
    #[error("writing status: {}", api_message(.0))]
    Status(kube::Error),
}

impl ReconcileError {
    pub(super) fn request(step: Step, o: &PlannedObject, source: kube::Error) -> Self {
        ReconcileError::Request { step, kind: o.kind.kind(), name: o.name.clone(), source }
    }

    /// The facts the pure layer decides from.
    fn failure(&self) -> Failure<'_> {
        let (failed, answer) = match self {
            ReconcileError::Render(_) => (Failed::Render, None),
            ReconcileError::Unserved(_) => (Failed::Unserved, None),
            ReconcileError::NotWatchedYet(_) => (Failed::NotWatchedYet, None),
            ReconcileError::Request { step, source, .. } => (Failed::Request(*step), Some(source)),
            ReconcileError::Status(source) => (Failed::Status, Some(source)),
        };
        match answer {
            Some(kube::Error::Api(s)) => Failure { failed, code: Some(s.code), message: &s.message },
            _ => Failure { failed, code: None, message: "" },
        }
    }

    pub(super) fn reason(&self) -> Reason {
        self.failure().reason()
    }

    pub(super) fn retry(&self) -> Retry {
        self.failure().retry()
    }

    /// What the status says about it.
    pub(super) fn outcome(&self) -> Outcome {
        self.failure().outcome(self.to_string())
    }
}

/// `message (code Reason)` of an API error; the error itself otherwise.
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(step: Step, code: u16, message: &str) -> ReconcileError {
        let status: kube::core::Status =
            serde_json::from_value(serde_json::json!({"code": code, "message": message, "reason": "Invalid"}))
                .expect("a Status");
        ReconcileError::Request { step, kind: "Service", name: "x".into(), source: kube::Error::Api(Box::new(status)) }
    }

    #[test]
    fn an_api_servers_answer_reaches_the_decision_with_its_code_and_message() {
        let e = refused(Step::DryRun, 500, "quantities must match the regular expression '^…$'");
        assert_eq!((e.reason(), e.retry()), (Reason::Invalid, Retry::OnChange));
    }

    #[test]
    fn a_refusal_names_the_step_the_object_and_the_servers_answer() {
        let e = refused(Step::DryRun, 422, "spec.type: Unsupported value");
        assert_eq!(e.to_string(), "the API server refuses Service x: spec.type: Unsupported value (422 Invalid)");
    }
}
