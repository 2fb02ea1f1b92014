//! A token bucket per key: `rate` requests per second on average, bursts of `burst`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    pub(crate) fn new(rate: f64, burst: u32) -> RateLimiter {
        RateLimiter { rate: rate.max(0.001), burst: f64::from(burst.max(1)), buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes a token from `key`'s bucket, or says how long until one is there.
    pub(crate) fn take(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().expect("not poisoned");
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket { tokens: self.burst, at: now });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.rate))
        }
    }

    /// Keeps only the buckets of `keys` (revoked keys' go).
    pub(crate) fn retain(&self, keys: &[String]) {
        self.buckets.lock().expect("not poisoned").retain(|k, _| keys.contains(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_requests_wait_for_tokens_at_the_rate() {
        let limiter = RateLimiter::new(2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take("a", t0).is_ok());
        }
        let wait = limiter.take("a", t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(limiter.take("a", t0 + Duration::from_millis(500)).is_ok());
    }

    #[test]
    fn each_key_has_its_own_bucket() {
        let limiter = RateLimiter::new(1.0, 1);
        let t0 = Instant::now();
        assert!(limiter.take("a", t0).is_ok());
        assert!(limiter.take("a", t0).is_err());
        assert!(limiter.take("b", t0).is_ok());
    }
}
