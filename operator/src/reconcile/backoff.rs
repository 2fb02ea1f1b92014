//! Per-object exponential backoff with jitter, and the retry classes of failures.
//! kube-runtime requeues failed objects with a fixed action; this keeps an attempt count per
//! object so one failing CR backs off without slowing the others.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How a failed reconcile is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// At once: a conflict (someone wrote in between) is gone on the next try.
    Now,
    /// When the CR changes (or at the next resync): the same input gets the same answer
    /// (an invalid spec, an object the API server refuses as invalid).
    OnChange,
    /// With exponential backoff: forbidden writes, server errors, timeouts, lost connections.
    Backoff,
    /// After [`SOON`], not counted as a failure: the cluster is catching up by itself (the
    /// API server learning a CRD it was just given).
    Soon,
}

/// How long [`Retry::Soon`] waits.
pub(crate) const SOON: Duration = Duration::from_secs(2);

pub(crate) struct Backoff {
    base: Duration,
    cap: Duration,
    attempts: Mutex<HashMap<String, u32>>,
    rng: AtomicU64,
}

impl Backoff {
    pub(crate) fn new(base: Duration, cap: Duration) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Backoff { base, cap, attempts: Mutex::new(HashMap::new()), rng: AtomicU64::new(seed | 1) }
    }

    /// Records a failure of `key` and returns how long to wait before the next attempt.
    pub(crate) fn failed(&self, key: &str) -> Duration {
        let attempt = {
            let mut attempts = self.attempts.lock().expect("backoff lock");
            let n = attempts.entry(key.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        delay(attempt, self.base, self.cap, self.unit_random())
    }

    /// Forgets the failures of `key`.
    pub(crate) fn succeeded(&self, key: &str) {
        self.attempts.lock().expect("backoff lock").remove(key);
    }

    /// Keeps only the keys `keep` accepts (the CRs that still exist).
    /// The objects (keys) backing off.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.attempts.lock().expect("backoff lock").keys().cloned().collect()
    }

    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.attempts.lock().expect("backoff lock").retain(|k, _| keep(k));
    }

    fn unit_random(&self) -> f64 {
        // xorshift64; jitter needs spread, not secrecy.
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `base · 2^(attempt-1)`, capped, then scaled into `[½, 1]` of itself by `unit` ∈ [0, 1)
/// ("equal jitter"): retries of many objects spread out but never collapse to zero.
pub(crate) fn delay(attempt: u32, base: Duration, cap: Duration, unit: f64) -> Duration {
    let exp = base.saturating_mul(1u32.checked_shl(attempt.saturating_sub(1).min(31)).unwrap_or(u32::MAX));
    let capped = exp.min(cap);
    capped.mul_f64(0.5 + unit.clamp(0.0, 1.0) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(500);
    const CAP: Duration = Duration::from_secs(300);

    #[test]
    fn delays_double_per_attempt_up_to_the_cap() {
        assert_eq!(delay(1, BASE, CAP, 0.999_999), Duration::from_millis(500).mul_f64(0.999_999_5));
        assert_eq!(delay(3, BASE, CAP, 0.999_999), Duration::from_millis(2000).mul_f64(0.999_999_5));
        assert_eq!(delay(40, BASE, CAP, 0.999_999), CAP.mul_f64(0.999_999_5));
    }

    #[test]
    fn jitter_keeps_the_delay_between_half_and_all_of_it() {
        assert_eq!(delay(2, BASE, CAP, 0.0), Duration::from_millis(500));
        assert!(delay(2, BASE, CAP, 0.7) > Duration::from_millis(500));
    }

    #[test]
    fn failures_are_counted_per_object_and_reset_on_success() {
        let b = Backoff::new(BASE, CAP);
        let first = b.failed("a");
        let _ = b.failed("a");
        let third = b.failed("a");
        assert!(third > first * 2, "{first:?} then {third:?}");
        assert!(b.failed("other") <= BASE, "another object starts from the base");
        b.succeeded("a");
        assert!(b.failed("a") <= BASE);
    }
}
