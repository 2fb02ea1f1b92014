//! What every reconcile reads: the cluster view (client, caches, prober, pullers), the chart
//! and the settings; and what the operator keeps per CR between reconciles, forgotten
//! together when the CR goes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::ApiResource;
use kube::runtime::events::Recorder;
use kube::Client;

use super::admission::{AdmissionWatch, Permissions};
use super::applied::AppliedState;
use super::children::Caches;
use super::memory::CrMemory;
use super::models::Puller;
use super::pods::Pods;
use super::prober::Prober;
use super::Settings;
use crate::chart::Chart;
use crate::operations::metrics::Metrics;
use crate::reconcile::backoff::Backoff;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::ApiVersion;

/// What the operator knows of the cluster: a client, the caches its watches fill, and the
/// kinds the cluster serves.
pub(super) struct ClusterView {
    pub client: Client,
    pub caches: Caches,
    pub pods: Pods,
    /// Kinds the cluster serves (the optional ones, KEDA and Prometheus, may be missing).
    pub served: Vec<Kind>,
    /// Asks the cluster again at once which optional kinds it serves (else every 15 s).
    pub rediscover: Arc<tokio::sync::Notify>,
    /// The version CRs are read and their status written at.
    pub read_at: ApiVersion,
    /// Asks candidates the success prompt.
    pub prober: Prober,
    /// Pulls Ollama applications' models into their replicas.
    pub puller: Puller,
    /// What admission the cluster configures (which creations need a dry run).
    pub admission: AdmissionWatch,
}

/// What every reconcile reads: the cluster view, the chart and the settings.
pub(super) struct Context {
    pub client: Client,
    pub caches: Caches,
    pub pods: Pods,
    pub served: Vec<Kind>,
    pub(super) rediscover: Arc<tokio::sync::Notify>,
    pub read_at: ApiVersion,
    pub(super) prober: Prober,
    pub(super) puller: Puller,
    pub(super) admission: AdmissionWatch,
    /// Which kinds RBAC lets the operator create where.
    pub(super) permissions: Permissions,
    pub chart: Arc<Chart>,
    pub settings: Arc<Settings>,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub backoff: Backoff,
    /// Per CR, one entry: what its last full apply left behind, the status this operator
    /// last wrote, and (another line's CR whose latest generation is not reconciled) since
    /// when this line has seen it so, and whether it said so.
    pub(super) memory: CrMemory,
}

impl Context {
    /// The ModelOrchestra resource CRs are read and their status written at.
    pub(super) fn cr_resource(&self) -> ApiResource {
        self.read_at.resource()
    }

    pub(super) fn new(
        view: ClusterView,
        chart: Arc<Chart>,
        settings: Arc<Settings>,
        metrics: Arc<Metrics>,
        recorder: Recorder,
    ) -> Self {
        let ClusterView { client, caches, pods, served, rediscover, read_at, prober, puller, admission } = view;
        let backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(300));
        Context {
            client,
            caches,
            pods,
            served,
            rediscover,
            read_at,
            prober,
            puller,
            admission,
            permissions: Permissions::default(),
            chart,
            settings,
            metrics,
            recorder,
            backoff,
            memory: Default::default(),
        }
    }

    /// Drops everything kept about the CR `key` (deleted, or routed to another line).
    pub(super) fn forget(&self, key: &str) {
        self.memory.forget_reconciles(key);
        self.prober.stop_all(key);
        self.puller.forget(key);
        self.backoff.succeeded(key);
        self.update_tracked();
    }

    /// Drops everything kept about CRs not in `live` (after a relist that may have missed
    /// deletions).
    pub(super) fn forget_all_but(&self, live: &HashSet<String>) {
        self.memory.retain(live);
        self.prober.retain_crs(live);
        self.puller.retain_crs(live);
        self.backoff.retain(|k| live.contains(k));
        self.update_tracked();
    }

    /// Drops a deleted CR entirely.
    pub(super) fn deleted(&self, key: &str) {
        self.forget(key);
        self.memory.remove(key);
    }

    pub(super) fn remember(&self, key: String, state: AppliedState) {
        self.memory.change(&key, |e| e.applied = Some(state));
        self.update_tracked();
    }

    /// How many CRs the operator keeps anything for: memory, backoff, a verification or a
    /// model agent (a deleted CR counts out of every one).
    fn remembered(&self) -> usize {
        let mut elsewhere: HashSet<String> = self.prober.crs();
        elsewhere.extend(self.puller.crs());
        elsewhere.extend(self.backoff.keys());
        self.memory.len() + elsewhere.iter().filter(|k| !self.memory.holds(k)).count()
    }

    pub(super) fn update_tracked(&self) {
        self.metrics.tracked.set(self.remembered() as i64);
        self.metrics.model_agents.set(self.puller.agents() as i64);
        self.metrics.verifications.set(self.prober.running() as i64);
    }
}
