//! The model gateway as the templates see it: `model-orchestra-operator gateway` in the
//! gateway's place (`<fullname>-gateway`) when every application is an open engine. Its
//! ServiceAccount may read its own ModelOrchestra (the routes: which application serves
//! which model), scale the applications that sleep and record their last request in their
//! Leases (the gateway's `activity` module), nothing else.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use serde::Serialize;

use super::names::Meta;
use crate::model::Model;

/// The gateway container's port (the Service's `http` port is 80).
pub const PORT: i32 = 8080;

/// The gateway's replicas: every request of the stack passes through it, so no one pod,
/// node or rollout may take the stack down. Two, spread over nodes where there are several,
/// with a PodDisruptionBudget that keeps one serving through a drain. Not a field:
/// `v1alpha2` is frozen since 1.0.0 (see `chart::ollama::DRAIN_AT_MOST_SECONDS` for why); each
/// replica costs one small process (its memory is in the book's Benchmarks).
pub const REPLICAS: i32 = 2;

/// How long a gateway told to stop goes on accepting connections: the time the endpoints
/// controller and every node's kube-proxy take to stop sending new ones once the pod is
/// terminating (well under a second on an idle cluster; seconds on a loaded one).
pub const LEAVE_ENDPOINTS_SECONDS: u64 = 10;

/// The gateway pod's grace period: a gateway told to stop leaves the Service's endpoints,
/// then answers what it holds (up to [`super::ANSWER_GRACE_SECONDS`]), and a margin for the
/// process to end before the kubelet kills it.
pub const TERMINATION_GRACE_SECONDS: u64 = LEAVE_ENDPOINTS_SECONDS + super::ANSWER_GRACE_SECONDS + 5;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ModelGatewayContext {
    meta: Meta,
    selector_labels: BTreeMap<String, String>,
    pod_labels: BTreeMap<String, String>,
    image: String,
    resources: ResourceRequirements,
    port: i32,
    args: Vec<String>,
    /// The ModelOrchestra it serves (its Role's only readable one).
    release: String,
    /// The Deployments of the applications that sleep (its Role's only scalable ones).
    sleeping: Vec<String>,
    /// Their activity Leases (its Role's only writable ones).
    activity_leases: Vec<String>,
    replicas: i32,
    termination_grace_period_seconds: u64,
}

/// The Lease in which the gateways record the last request of the application whose
/// Deployment is `deployment`.
pub fn activity_lease(deployment: &str) -> String {
    format!("{deployment}-activity")
}

/// What the model gateway shares with the release.
pub(super) struct Base<'b> {
    pub(super) meta: Meta,
    pub(super) selector_labels: &'b BTreeMap<String, String>,
    pub(super) pod_labels: &'b BTreeMap<String, String>,
    pub(super) release: &'b str,
    pub(super) namespace: &'b str,
    pub(super) fullname: &'b str,
}

/// The model gateway's context, when the model renders one.
pub(super) fn model_gateway(model: &Model, base: Base) -> Option<ModelGatewayContext> {
    if !model.has_model_gateway() {
        return None;
    }
    let settings = model.model_gateway.as_ref()?;
    let sleeping: Vec<String> = model
        .applications
        .iter()
        .filter(|a| a.sleep.is_some())
        .map(|a| format!("{}-{}", base.fullname, a.key))
        .collect();
    let activity_leases = sleeping.iter().map(|d| activity_lease(d)).collect();
    let args = vec![
        "gateway".to_string(),
        format!("--namespace={}", base.namespace),
        format!("--name={}", base.release),
        format!("--port={PORT}"),
    ];
    Some(ModelGatewayContext {
        meta: base.meta,
        selector_labels: base.selector_labels.clone(),
        pod_labels: base.pod_labels.clone(),
        image: settings.image.clone(),
        resources: settings.resources.clone(),
        port: PORT,
        args,
        release: base.release.to_string(),
        sleeping,
        activity_leases,
        replicas: REPLICAS,
        termination_grace_period_seconds: TERMINATION_GRACE_SECONDS,
    })
}
