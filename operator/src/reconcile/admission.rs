//! Which objects of a plan need a server-side dry run before anything is written, and which
//! need no request at all.
//!
//! The rule stays: nothing is written unless the API server would accept everything. The
//! local validation ([`crate::validate`], held to the API server by the property test
//! `tests/e2e/server_validation.rs`) proves an object is valid for its kind. What it cannot see
//! is what the cluster adds, and what a live object adds:
//!
//! - an update can be refused for what the live object holds (an immutable field, another
//!   controller's ownerReference): every changed object that exists is dry-run;
//! - admission the cluster configures can refuse a creation: webhooks and admission
//!   policies (anywhere in the cluster: their selectors are not evaluated here), a
//!   ResourceQuota or LimitRange in the namespace. While any exists, or while the operator
//!   cannot tell (its watches of them have not listed, or are forbidden), every object is
//!   dry-run;
//! - RBAC can refuse a kind: a creation is dry-run until the operator knows RBAC allows
//!   its kind in that namespace (asked once per namespace and kind, or learnt from an
//!   admitted creation), and in a namespace where a creation without a dry run was refused.
//!
//! Only a creation with none of these is applied without its dry run. An object whose body
//! and live version are both what the last apply left needs neither request.

/// What the cluster configures that could refuse a creation the local validation passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The watches have not listed yet, or cannot (forbidden, not served).
    Unknown,
    /// No webhook, admission policy, ResourceQuota or LimitRange applies.
    Open,
    /// Something may refuse: every object is dry-run.
    Guarded,
}

/// What is known about one planned object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The object exists (in the cache, or applied by an earlier reconcile).
    pub exists: bool,
    /// Its body and live version are those the last apply left.
    pub unchanged: bool,
    pub admission: Admission,
    /// RBAC is known to allow creating its kind in its namespace.
    pub kind_admitted: bool,
}

/// What one object needs before the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing: it is as the last apply left it.
    Skip,
    /// Applied after every dry run of the plan has passed.
    DryRunThenApply,
    /// Applied without a dry run: a creation nothing but the local validation could refuse.
    Apply,
}

pub(crate) fn step(f: Facts) -> Step {
    if f.exists && f.unchanged {
        return Step::Skip;
    }
    if !f.exists && f.admission == Admission::Open && f.kind_admitted {
        return Step::Apply;
    }
    Step::DryRunThenApply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creation() -> Facts {
        Facts { exists: false, unchanged: false, admission: Admission::Open, kind_admitted: true }
    }

    #[test]
    fn a_creation_nothing_could_refuse_is_applied_without_a_dry_run() {
        assert_eq!(step(creation()), Step::Apply);
    }

    #[test]
    fn a_creation_is_dry_run_while_admission_is_unknown_or_guarded() {
        for admission in [Admission::Unknown, Admission::Guarded] {
            assert_eq!(step(Facts { admission, ..creation() }), Step::DryRunThenApply, "{admission:?}");
        }
    }

    #[test]
    fn the_first_creation_of_a_kind_in_a_namespace_is_dry_run() {
        assert_eq!(step(Facts { kind_admitted: false, ..creation() }), Step::DryRunThenApply);
    }

    #[test]
    fn a_changed_object_that_exists_is_always_dry_run() {
        assert_eq!(step(Facts { exists: true, ..creation() }), Step::DryRunThenApply);
    }

    #[test]
    fn an_object_as_the_last_apply_left_it_needs_no_request() {
        let f = Facts { exists: true, unchanged: true, admission: Admission::Guarded, kind_admitted: false };
        assert_eq!(step(f), Step::Skip);
    }
}
