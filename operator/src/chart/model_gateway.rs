//! The model gateway as the templates see it: `model-orchestra-operator gateway` in the
//! gateway's place (`<fullname>-gateway`) when every application is an open engine. Its
//! ServiceAccount may read its own ModelOrchestra (the routes: which application serves
//! which model) and scale the applications that sleep, nothing else.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use serde::Serialize;

use super::names::Meta;
use crate::model::Model;

/// The gateway container's port (the Service's `http` port is 80).
pub const PORT: i32 = 8080;

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
    let sleeping = model
        .applications
        .iter()
        .filter(|a| a.sleep.is_some())
        .map(|a| format!("{}-{}", base.fullname, a.key))
        .collect();
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
    })
}
