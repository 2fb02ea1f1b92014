//! What a failed reconcile means: the reason its status shows and how it is retried,
//! decided from what failed and the API server's answer. The controller's error carries
//! these facts; the decision needs no client.

use std::fmt;

use super::backoff::Retry;
use super::condition::Reason;
use super::status::Outcome;

/// The request about one object that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    DryRun,
    Apply,
    Prune,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::DryRun => "the API server refuses",
            Step::Apply => "applying",
            Step::Prune => "pruning",
        })
    }
}

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed {
    /// The spec did not render (the operator's own validation).
    Render,
    /// The plan holds a kind the cluster does not serve.
    Unserved,
    /// The plan holds a kind the cluster has served only since moments ago: the operator
    /// does not watch it yet, and will.
    NotWatchedYet,
    /// A request about one object.
    Request(Step),
    /// Writing the CR's status.
    Status,
}

/// A failure as the status and the retry policy read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failure<'a> {
    pub failed: Failed,
    /// The API server's status code, when it answered.
    pub code: Option<u16>,
    /// The API server's message (empty when it did not answer).
    pub message: &'a str,
}

impl Failure<'_> {
    /// Whether the API server's answer is a refusal of the object dressed as a server
    /// error: a malformed quantity fails to decode before validation and comes back as a
    /// 500 ("quantities must match the regular expression …"). Retrying cannot fix it.
    fn invalid_in_disguise(&self) -> bool {
        matches!(self.failed, Failed::Request(_))
            && self.code == Some(500)
            && self.message.contains("quantities must match the regular expression")
    }

    /// Whether the API server refused a child only because its admission cannot yet map
    /// the owner's kind: `OwnerReferencesPermissionEnforcement` checks `blockOwnerDeletion`
    /// against the owner's REST mapping, which the API server learns seconds after a CRD is
    /// installed ("cannot set blockOwnerDeletion in this case because cannot find
    /// RESTMapping for APIVersion models.titanml.co/v1alpha1 …"). The CR is correct; the
    /// cluster catches up by itself.
    fn owner_not_mapped_yet(&self) -> bool {
        matches!(self.failed, Failed::Request(_))
            && self.code == Some(403)
            && self.message.contains("cannot find RESTMapping")
    }

    /// The reason the status's conditions give.
    pub(crate) fn reason(&self) -> Reason {
        if self.invalid_in_disguise() {
            return Reason::Invalid;
        }
        if self.owner_not_mapped_yet() {
            return Reason::WaitingForApiServer;
        }
        match (self.failed, self.code) {
            (Failed::NotWatchedYet, _) => Reason::StartingWatches,
            (Failed::Render, _) => Reason::RenderFailed,
            (Failed::Request(Step::DryRun), Some(400 | 422)) => Reason::Invalid,
            (Failed::Request(Step::DryRun), Some(403)) => Reason::Forbidden,
            (Failed::Status, _) => Reason::StatusFailed,
            _ => Reason::ApplyFailed,
        }
    }

    /// How to retry: a conflict at once; an invalid spec or object when the CR changes (or
    /// at the next resync); anything else (forbidden, server errors, timeouts) with backoff.
    pub(crate) fn retry(&self) -> Retry {
        if self.invalid_in_disguise() {
            return Retry::OnChange;
        }
        if self.owner_not_mapped_yet() || self.failed == Failed::NotWatchedYet {
            return Retry::Soon;
        }
        match (self.failed, self.code) {
            (Failed::Render, _) => Retry::OnChange,
            (_, Some(409)) => Retry::Now,
            (_, Some(400 | 404 | 422)) => Retry::OnChange,
            // A refusal can end without the CR changing: an admin grants the missing RBAC.
            // Backoff still reaches the resync interval for one that lasts.
            _ => Retry::Backoff,
        }
    }

    /// What the status says about it; `message` is the whole error, as the user reads it.
    pub(crate) fn outcome(&self, message: String) -> Outcome {
        match self.reason() {
            reason @ Reason::WaitingForApiServer => Outcome::Waiting {
                reason,
                message: format!(
                    "waiting for the API server to map this kind for its children's owner references (it does some seconds \
                     after the CRD is installed); retrying every {} s: {message}",
                    super::backoff::SOON.as_secs()
                ),
            },
            reason @ Reason::StartingWatches => {
                Outcome::Waiting { reason, message: format!("{message}; retrying every {} s", super::backoff::SOON.as_secs()) }
            }
            Reason::RenderFailed => Outcome::RenderFailed(message),
            reason @ (Reason::Invalid | Reason::Forbidden) => Outcome::Refused { reason, message },
            _ => Outcome::ApplyFailed(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(step: Step, code: u16) -> Failure<'static> {
        Failure { failed: Failed::Request(step), code: Some(code), message: "m" }
    }

    #[test]
    fn a_conflict_is_retried_at_once() {
        assert_eq!(answered(Step::Apply, 409).retry(), Retry::Now);
    }

    #[test]
    fn an_invalid_object_waits_for_a_change() {
        assert_eq!(answered(Step::Apply, 422).retry(), Retry::OnChange);
    }

    #[test]
    fn a_forbidden_write_is_retried_with_backoff_since_rbac_can_change_without_the_cr() {
        assert_eq!(answered(Step::Apply, 403).retry(), Retry::Backoff);
    }

    #[test]
    fn an_owner_the_api_server_cannot_map_yet_is_waited_for_not_forbidden() {
        let lag = Failure {
            failed: Failed::Request(Step::DryRun),
            code: Some(403),
            message:
                "Deployment.apps \"x\" is forbidden: cannot set blockOwnerDeletion in this case because cannot find \
                      RESTMapping for APIVersion models.titanml.co/v1alpha1 Kind ModelOrchestra: no matches for kind \
                      \"ModelOrchestra\" in version \"models.titanml.co/v1alpha1\"",
        };
        assert_eq!((lag.reason(), lag.retry()), (Reason::WaitingForApiServer, Retry::Soon));
        assert!(
            matches!(lag.outcome("m".into()), Outcome::Waiting { message, .. } if message.contains("waiting for the API server") && message.ends_with(": m"))
        );
    }

    #[test]
    fn a_kind_served_since_moments_ago_is_waited_for_and_one_never_installed_is_a_failure() {
        let new = Failure { failed: Failed::NotWatchedYet, code: None, message: "" };
        assert_eq!((new.reason(), new.retry()), (Reason::StartingWatches, Retry::Soon));
        assert!(matches!(new.outcome("m".into()), Outcome::Waiting { reason: Reason::StartingWatches, .. }));
        let missing = Failure { failed: Failed::Unserved, code: None, message: "" };
        assert_eq!((missing.reason(), missing.retry()), (Reason::ApplyFailed, Retry::Backoff));
    }

    #[test]
    fn blocking_owner_deletion_without_the_rbac_for_it_stays_forbidden() {
        let rbac = Failure {
            failed: Failed::Request(Step::DryRun),
            code: Some(403),
            message:
                "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on",
        };
        assert_eq!((rbac.reason(), rbac.retry()), (Reason::Forbidden, Retry::Backoff));
    }

    #[test]
    fn a_server_error_backs_off() {
        assert_eq!(answered(Step::Apply, 503).retry(), Retry::Backoff);
    }

    #[test]
    fn a_lost_connection_backs_off() {
        let lost = Failure { failed: Failed::Request(Step::Apply), code: None, message: "connection reset" };
        assert_eq!((lost.reason(), lost.retry()), (Reason::ApplyFailed, Retry::Backoff));
    }

    #[test]
    fn a_spec_that_does_not_render_waits_for_a_change() {
        let render = Failure { failed: Failed::Render, code: None, message: "" };
        assert_eq!((render.reason(), render.retry()), (Reason::RenderFailed, Retry::OnChange));
    }

    #[test]
    fn a_dry_run_refused_as_invalid_is_invalid_and_one_forbidden_is_forbidden() {
        assert_eq!(answered(Step::DryRun, 422).reason(), Reason::Invalid);
        assert_eq!(answered(Step::DryRun, 400).reason(), Reason::Invalid);
        assert_eq!(answered(Step::DryRun, 403).reason(), Reason::Forbidden);
    }

    #[test]
    fn an_apply_refused_after_its_dry_run_passed_is_an_apply_failure() {
        assert_eq!(answered(Step::Apply, 422).reason(), Reason::ApplyFailed);
    }

    #[test]
    fn a_failed_status_write_is_a_status_failure() {
        let status = Failure { failed: Failed::Status, code: Some(500), message: "m" };
        assert_eq!((status.reason(), status.retry()), (Reason::StatusFailed, Retry::Backoff));
    }

    #[test]
    fn a_malformed_quantity_answered_as_a_server_error_is_invalid_and_waits_for_a_change() {
        let quantity = Failure {
            failed: Failed::Request(Step::DryRun),
            code: Some(500),
            message: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        };
        assert_eq!((quantity.reason(), quantity.retry()), (Reason::Invalid, Retry::OnChange));
    }

    #[test]
    fn a_refusal_reads_as_refused_in_the_status_and_a_render_failure_as_one() {
        assert!(matches!(answered(Step::DryRun, 403).outcome("x".into()), Outcome::Refused { .. }));
        let render = Failure { failed: Failed::Render, code: None, message: "" };
        assert!(matches!(render.outcome("x".into()), Outcome::RenderFailed(m) if m == "x"));
        assert!(matches!(answered(Step::Prune, 500).outcome("x".into()), Outcome::ApplyFailed(_)));
    }
}
