//! The model gateway's metrics (`/metrics`, OpenMetrics text): requests, held requests,
//! wake-ups and their duration, idle scale-downs, requests sent again, each by application.

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
    requests: Family<Labels, Counter>,
    held: Family<Labels, Gauge>,
    wakeups: Family<Labels, Counter>,
    wakeup_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    idle_scale_downs: Family<Labels, Counter>,
    retries: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn app(name: &str) -> Labels {
    vec![("application", name.to_string())]
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("model_gateway");
        let requests = Family::<Labels, Counter>::default();
        let held = Family::<Labels, Gauge>::default();
        let wakeups = Family::<Labels, Counter>::default();
        // 0.25 s to about 8.5 minutes: a wake-up starts a pod and loads a model.
        fn buckets() -> Histogram {
            Histogram::new(exponential_buckets(0.25, 2.0, 12))
        }
        let wakeup_seconds = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(buckets);
        let idle_scale_downs = Family::<Labels, Counter>::default();
        let retries = Family::<Labels, Counter>::default();
        registry.register(
            "requests",
            "Requests, by application (empty: no model matched) and status code",
            requests.clone(),
        );
        registry.register("held_requests", "Requests held while their application wakes", held.clone());
        registry.register("wakeups", "Scale-ups of a sleeping application by a request", wakeups.clone());
        registry.register(
            "wakeup_duration_seconds",
            "From a wake-up's scale-up to the first request forwarded to the application",
            wakeup_seconds.clone(),
        );
        registry.register(
            "idle_scale_downs",
            "Scale-downs to zero of an application idle for its idleSeconds",
            idle_scale_downs.clone(),
        );
        registry.register(
            "retries",
            "Requests sent to an application again: the engine failed them before its answer began",
            retries.clone(),
        );
        Metrics { registry, requests, held, wakeups, wakeup_seconds, idle_scale_downs, retries }
    }

    pub fn request(&self, application: &str, code: u16) {
        let labels = vec![("application", application.to_string()), ("code", code.to_string())];
        self.requests.get_or_create(&labels).inc();
    }

    pub fn held(&self, application: &str, delta: i64) {
        self.held.get_or_create(&app(application)).inc_by(delta);
    }

    pub fn wakeup(&self, application: &str) {
        self.wakeups.get_or_create(&app(application)).inc();
    }

    pub fn woke(&self, application: &str, took: Duration) {
        self.wakeup_seconds.get_or_create(&app(application)).observe(took.as_secs_f64());
    }

    pub fn idle_scale_down(&self, application: &str) {
        self.idle_scale_downs.get_or_create(&app(application)).inc();
    }

    pub fn retried(&self, application: &str) {
        self.retries.get_or_create(&app(application)).inc();
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String does not fail");
        out
    }
}
