//! The condition types and reasons a ModelOrchestra reports, in one place: their strings
//! appear in the status, in Events and in metric labels, and nowhere else.

use std::fmt;

/// The condition types on `status.conditions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ConditionType {
    /// Every object is applied and every component's pods are ready.
    Ready,
    /// The operator is still working towards Ready (applying, or waiting for pods).
    Progressing,
    /// Something needs attention: the spec, the cluster or the pods.
    Degraded,
}

impl ConditionType {
    pub(crate) const ALL: [ConditionType; 3] =
        [ConditionType::Ready, ConditionType::Progressing, ConditionType::Degraded];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Progressing => "Progressing",
            ConditionType::Degraded => "Degraded",
        }
    }
}

/// Why a condition has its status (also the Event reason and the error metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Reason {
    /// Everything applied and ready.
    Ready,
    /// `Degraded=False`: nothing is wrong.
    AsExpected,
    /// Applied; some component's pods are not ready yet.
    ApplicationsNotReady,
    /// Applied; a component's pods cannot be placed on any node (the scheduler's message).
    Unschedulable,
    /// A component's rollout is past its Deployment's progress deadline.
    RolloutStuck,
    /// An application's new revision is being verified (its candidate asked the success
    /// prompt); the previous revision serves meanwhile.
    Verifying,
    /// An application's new revision failed its verification; the previous one serves.
    PromotionFailed,
    /// `Degraded=True`: the spec is legal but almost certainly wrong (the warnings name the
    /// fields); everything else may be fine.
    SpecWarnings,
    /// An application's model download failed (its Job's and pod's message); nothing else
    /// is torn down.
    ModelDownloadFailed,
    /// A model of an Ollama application could not be pulled into a replica.
    ModelPullFailed,
    /// The spec fails the operator's own validation: nothing applied or pruned.
    RenderFailed,
    /// The API server refused an object in a dry run (schema, admission policy): nothing
    /// written.
    Invalid,
    /// The API server forbade an object in a dry run (RBAC, admission): nothing written.
    Forbidden,
    /// Applying or pruning failed for a reason that retrying may fix.
    ApplyFailed,
    /// `Progressing=True` while an apply failure is retried.
    Retrying,
    /// The CR is correct, and the cluster is catching up: the API server does not yet map
    /// its kind (a CRD installed moments ago). Retried soon; not a warning.
    WaitingForApiServer,
    /// The CR is correct, and the operator is catching up: the cluster serves a kind it
    /// needs since moments ago, and the operator starts watching it. Retried soon.
    StartingWatches,
    /// Writing the status itself failed.
    StatusFailed,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Ready => "Ready",
            Reason::AsExpected => "AsExpected",
            Reason::ApplicationsNotReady => "ApplicationsNotReady",
            Reason::Unschedulable => "Unschedulable",
            Reason::RolloutStuck => "RolloutStuck",
            Reason::SpecWarnings => "SpecWarnings",
            Reason::Verifying => "Verifying",
            Reason::PromotionFailed => "PromotionFailed",
            Reason::ModelDownloadFailed => "ModelDownloadFailed",
            Reason::ModelPullFailed => "ModelPullFailed",
            Reason::RenderFailed => "RenderFailed",
            Reason::Invalid => "Invalid",
            Reason::Forbidden => "Forbidden",
            Reason::ApplyFailed => "ApplyFailed",
            Reason::Retrying => "Retrying",
            Reason::WaitingForApiServer => "WaitingForAPIServer",
            Reason::StartingWatches => "StartingWatches",
            Reason::StatusFailed => "StatusFailed",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
