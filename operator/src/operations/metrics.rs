//! Prometheus metrics (text exposition format) of the controller.

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    duration: Histogram,
    applied: Counter,
    pruned: Counter,
    probes: Family<Labels, Counter>,
    pub leader: Gauge,
    /// CRs the operator keeps state for (its last apply, its failures).
    pub tracked: Gauge,
    /// Ollama replicas whose models an agent keeps.
    pub model_agents: Gauge,
    /// Candidates being verified.
    pub verifications: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("model_orchestra");
        let reconciles = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let applied = Counter::default();
        let pruned = Counter::default();
        let probes = Family::<Labels, Counter>::default();
        let leader = Gauge::default();
        let tracked = Gauge::default();
        let (model_agents, verifications) = (Gauge::default(), Gauge::default());
        registry.register("reconciles", "Reconciles of routed ModelOrchestras, by result", reconciles.clone());
        registry.register("reconcile_errors", "Failed reconciles and render failures, by reason", errors.clone());
        registry.register("reconcile_duration_seconds", "Duration of reconciles", duration.clone());
        registry.register("objects_applied", "Objects sent with server-side apply", applied.clone());
        registry.register("objects_pruned", "Objects deleted because no longer rendered", pruned.clone());
        registry.register(
            "promotion_probes",
            "Success prompts sent to candidates, by result (pass, fail, error, timeout)",
            probes.clone(),
        );
        registry.register("leader", "1 while this instance holds the leader lease", leader.clone());
        registry.register(
            "tracked_resources",
            "ModelOrchestras the operator keeps any state for (memory, backoff, verifications, model agents)",
            tracked.clone(),
        );
        registry.register("model_agents", "Ollama replicas whose models an agent keeps", model_agents.clone());
        registry.register("verifications", "Candidates being verified", verifications.clone());
        Metrics {
            registry,
            reconciles,
            errors,
            duration,
            applied,
            pruned,
            probes,
            leader,
            tracked,
            model_agents,
            verifications,
        }
    }

    pub fn observe_reconcile(&self, took: Duration, error_reason: Option<&str>) {
        let result = if error_reason.is_some() { "error" } else { "success" };
        self.reconciles.get_or_create(&vec![("result", result.to_string())]).inc();
        if let Some(reason) = error_reason {
            self.count_error(reason);
        }
        self.duration.observe(took.as_secs_f64());
    }

    pub fn count_error(&self, reason: &str) {
        self.errors.get_or_create(&vec![("reason", reason.to_string())]).inc();
    }

    pub fn count_applied(&self, n: usize) {
        self.applied.inc_by(n as u64);
    }

    pub fn count_pruned(&self, n: usize) {
        self.pruned.inc_by(n as u64);
    }

    /// One success prompt sent: `pass`, `fail` (a wrong answer), `error` or `timeout`.
    pub fn count_probe(&self, result: &str) {
        self.probes.get_or_create(&vec![("result", result.to_string())]).inc();
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_exposed_in_prometheus_text_format_with_their_labels() {
        let m = Metrics::new();
        m.observe_reconcile(Duration::from_millis(3), None);
        m.observe_reconcile(Duration::from_millis(3), Some("ApplyFailed"));
        m.count_applied(4);
        let text = m.encode();
        assert!(text.contains("model_orchestra_reconciles_total{result=\"success\"} 1"), "{text}");
        assert!(text.contains("model_orchestra_reconcile_errors_total{reason=\"ApplyFailed\"} 1"), "{text}");
        assert!(text.contains("model_orchestra_objects_applied_total 4"), "{text}");
        assert!(text.contains("model_orchestra_reconcile_duration_seconds_count 2"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
