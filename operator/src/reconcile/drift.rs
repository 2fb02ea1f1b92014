//! Whether a child changed since the operator applied it, from what the watch cache holds.
//!
//! The cache lags behind the operator's own writes: right after an apply, the cached copy
//! is missing or older than the apply's response. Reading that as a change re-applied every
//! object of a busy CR (~2.7 requests per object instead of 2 while 1,000 CRs converged);
//! the watch event that brings the cache up to date triggers the next reconcile anyway.

use std::time::Duration;

/// How long a child missing from the cache is taken for a cache that has not caught up
/// with its creation, rather than a deleted child.
pub(crate) const MISSING_GRACE: Duration = Duration::from_secs(10);

/// A child's cached version compared with the one the last apply returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drift {
    /// The cache holds what the operator applied.
    Same,
    /// The cache has not yet seen the operator's write: wait for it, write nothing.
    CacheBehind,
    /// Someone else wrote (or deleted) the child: apply again.
    Changed,
}

/// Compares versions: a Deployment's generation, or any other object's resourceVersion.
/// An etcd-backed API server (every one the project runs against) issues integer
/// resourceVersions that grow with each write; anything that differs and is not a pair of
/// integers counts as a change, so an opaque version only costs a re-apply. `since_apply` is the time since the last
/// apply, for children the cache does not hold.
pub(crate) fn drift(cached: Option<&str>, applied: Option<&str>, since_apply: Duration) -> Drift {
    match (cached, applied) {
        (Some(c), Some(a)) if c == a => Drift::Same,
        (Some(c), Some(a)) => match (c.parse::<u64>(), a.parse::<u64>()) {
            (Ok(c), Ok(a)) if c < a => Drift::CacheBehind,
            _ => Drift::Changed,
        },
        (None, Some(_)) if since_apply < MISSING_GRACE => Drift::CacheBehind,
        _ => Drift::Changed,
    }
}

/// The drift of a whole CR: changed if any child changed, else behind if any is behind.
pub(crate) fn combine(drifts: impl IntoIterator<Item = Drift>) -> Drift {
    drifts.into_iter().fold(Drift::Same, |all, d| match (all, d) {
        (Drift::Changed, _) | (_, Drift::Changed) => Drift::Changed,
        (Drift::CacheBehind, _) | (_, Drift::CacheBehind) => Drift::CacheBehind,
        _ => Drift::Same,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JUST_NOW: Duration = Duration::from_millis(50);
    const LONG_AGO: Duration = Duration::from_secs(60);

    #[test]
    fn the_version_the_apply_returned_is_no_change() {
        assert_eq!(drift(Some("42"), Some("42"), LONG_AGO), Drift::Same);
    }

    #[test]
    fn an_older_cached_version_is_the_cache_catching_up() {
        assert_eq!(drift(Some("41"), Some("42"), JUST_NOW), Drift::CacheBehind);
    }

    #[test]
    fn a_newer_cached_version_is_someone_elses_write() {
        assert_eq!(drift(Some("43"), Some("42"), JUST_NOW), Drift::Changed);
    }

    #[test]
    fn unequal_versions_that_are_not_integers_are_a_change() {
        assert_eq!(drift(Some("a"), Some("b"), JUST_NOW), Drift::Changed);
    }

    #[test]
    fn a_child_missing_right_after_the_apply_is_not_yet_cached() {
        assert_eq!(drift(None, Some("42"), JUST_NOW), Drift::CacheBehind);
    }

    #[test]
    fn a_child_missing_long_after_the_apply_was_deleted() {
        assert_eq!(drift(None, Some("42"), LONG_AGO), Drift::Changed);
    }

    #[test]
    fn one_changed_child_makes_the_cr_changed() {
        assert_eq!(combine([Drift::Same, Drift::CacheBehind, Drift::Changed]), Drift::Changed);
        assert_eq!(combine([Drift::Same, Drift::CacheBehind]), Drift::CacheBehind);
        assert_eq!(combine([Drift::Same, Drift::Same]), Drift::Same);
    }
}
