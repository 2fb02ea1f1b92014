//! Per-CR memory: what the operator keeps about one CR between its reconciles — what its
//! last apply left behind, the status this operator last wrote, and (for another line's
//! CR) since when no line has served it — in **one** entry per CR, so that forgetting a CR
//! is one removal and nothing is left behind in a second map. The pullers, probers and
//! backoff a CR owns are stopped with it by [`super::context::Context::forget`], and
//! `model_orchestra_tracked_resources` counts a CR while any of them holds it.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use model_orchestra_api::v1alpha2::ModelOrchestraStatus;

use super::applied::AppliedState;

/// What the operator keeps per CR: what its last apply left, the status it last wrote, and
/// (another line's CR) since when it has seen it unserved.
pub(super) type CrMemory = Memory<AppliedState, StatusWrite, Unserved>;
/// One CR's entry of [`CrMemory`].
pub(super) type CrEntry = Entry<AppliedState, StatusWrite, Unserved>;

/// The status this operator last wrote for a CR.
#[derive(Debug, Clone)]
pub(super) struct StatusWrite {
    /// Kept only until the cached CR shows it.
    pub(super) status: Option<ModelOrchestraStatus>,
    /// The CR's resourceVersion that write returned.
    pub(super) resource_version: Option<String>,
    pub(super) at: Instant,
    /// A progress-only change waits for [`super::report::PROGRESS_INTERVAL`] to pass.
    pub(super) waiting: bool,
}

/// A CR of another line whose current generation no line has reconciled yet.
#[derive(Debug, Clone)]
pub(super) struct Unserved {
    pub(super) uid: String,
    pub(super) generation: Option<i64>,
    pub(super) since: Instant,
    pub(super) reported: bool,
}

/// One CR's memory: `A`, what its last apply left; `S`, the status last written; `U`, while
/// it is another line's and unserved, since when.
#[derive(Debug)]
pub(super) struct Entry<A, S, U> {
    pub applied: Option<A>,
    pub status: Option<S>,
    pub unserved: Option<U>,
}

impl<A, S, U> Default for Entry<A, S, U> {
    fn default() -> Self {
        Entry { applied: None, status: None, unserved: None }
    }
}

impl<A, S, U> Entry<A, S, U> {
    fn is_empty(&self) -> bool {
        self.applied.is_none() && self.status.is_none() && self.unserved.is_none()
    }
}

/// Every CR's memory, by key (`namespace/name`).
pub(super) struct Memory<A, S, U> {
    crs: Mutex<HashMap<String, Entry<A, S, U>>>,
}

impl<A, S, U> Default for Memory<A, S, U> {
    fn default() -> Self {
        Memory { crs: Mutex::new(HashMap::new()) }
    }
}

impl<A, S, U> Memory<A, S, U> {
    /// Reads the CR `key`'s entry, if any.
    pub(super) fn read<R>(&self, key: &str, f: impl FnOnce(Option<&Entry<A, S, U>>) -> R) -> R {
        f(self.crs.lock().expect("memory lock").get(key))
    }

    /// Changes the CR `key`'s entry (made if missing; dropped if it ends empty).
    pub(super) fn change<R>(&self, key: &str, f: impl FnOnce(&mut Entry<A, S, U>) -> R) -> R {
        let mut crs = self.crs.lock().expect("memory lock");
        let entry = crs.entry(key.to_string()).or_default();
        let out = f(entry);
        if entry.is_empty() {
            crs.remove(key);
        }
        out
    }

    /// Forgets what the CR's reconciles kept (applied and written), keeping whether it is
    /// unserved: a CR routed to another line is still watched for that.
    pub(super) fn forget_reconciles(&self, key: &str) {
        self.change(key, |e| (e.applied, e.status) = (None, None));
    }

    /// Forgets the CR entirely.
    pub(super) fn remove(&self, key: &str) {
        self.crs.lock().expect("memory lock").remove(key);
    }

    /// Forgets every CR not in `live`.
    pub(super) fn retain(&self, live: &HashSet<String>) {
        self.crs.lock().expect("memory lock").retain(|k, _| live.contains(k));
    }

    /// Whether the CR `key` has any memory.
    pub(super) fn holds(&self, key: &str) -> bool {
        self.crs.lock().expect("memory lock").contains_key(key)
    }

    /// How many CRs have any memory.
    pub(super) fn len(&self) -> usize {
        self.crs.lock().expect("memory lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Test = Memory<&'static str, &'static str, &'static str>;

    fn full(m: &Test, key: &str) {
        m.change(key, |e| *e = Entry { applied: Some("a"), status: Some("s"), unserved: Some("u") });
    }

    #[test]
    fn a_removed_cr_leaves_no_entry() {
        let m = Test::default();
        full(&m, "ns/a");
        full(&m, "ns/b");
        m.remove("ns/a");
        assert_eq!(m.len(), 1);
        assert!(m.read("ns/a", |e| e.is_none()));
    }

    #[test]
    fn forgetting_a_crs_reconciles_keeps_only_that_it_is_unserved() {
        let m = Test::default();
        full(&m, "ns/a");
        m.forget_reconciles("ns/a");
        assert!(m.read("ns/a", |e| e.is_some_and(|e| e.applied.is_none() && e.status.is_none())));
        assert_eq!(m.read("ns/a", |e| e.and_then(|e| e.unserved)), Some("u"));
        m.change("ns/a", |e| e.unserved = None);
        assert_eq!(m.len(), 0, "an entry left empty is dropped");
    }

    #[test]
    fn crs_no_longer_listed_are_forgotten_and_counted_out() {
        let m = Test::default();
        full(&m, "ns/a");
        full(&m, "ns/b");
        m.change("ns/c", |e| e.status = Some("s"));
        assert_eq!(m.len(), 3);
        m.retain(&HashSet::from(["ns/b".to_string()]));
        assert_eq!(m.len(), 1);
        assert!(m.holds("ns/b") && !m.holds("ns/a") && !m.holds("ns/c"));
    }
}
