//! Reconciliation logic that needs no API server: the apply plan and prune rule, the
//! status and its conditions, version routing and per-object backoff. The controller
//! ([`crate::controller`]) does the I/O around these.

pub(crate) mod admission;
pub(crate) mod backoff;
pub(crate) mod condition;
pub(crate) mod drift;
pub(crate) mod events;
pub(crate) mod failure;
pub(crate) mod gates;
pub(crate) mod group;
pub(crate) mod merge_patch;
pub(crate) mod model;
pub(crate) mod plan;
pub(crate) mod pod_health;
pub(crate) mod promotion;
pub(crate) mod pulls;
pub mod routing;
pub(crate) mod status;

use std::collections::BTreeMap;

use model_orchestra_api::v1alpha2::ModelOrchestraStatus;
use model_orchestra_api::ApiVersion;
use serde_json::Value;

use crate::chart::{Chart, Rendered};
use crate::error::RenderError;

/// A CR's spec rendered as the operator renders it: the model, its objects (before the
/// gates of downloads, promotions and groups) and the refresh value of each cached model.
pub(crate) struct RenderedCr {
    pub model: crate::model::Model,
    pub rendered: Rendered,
    pub refresh: BTreeMap<String, String>,
}

/// Reads `spec` strictly as the version `serves` (a field of another version is named as
/// such) and renders it with `chart` for the CR `name` in `namespace`; each cached model is
/// downloaded for its refresh value (the CR's refresh annotation, else `previous`). Shared
/// by the reconciler and `diff`, so both decide from the same render.
pub(crate) fn render_cr(
    chart: &Chart,
    serves: ApiVersion,
    spec: &Value,
    name: &str,
    namespace: &str,
    refresh_annotation: Option<&str>,
    previous: &ModelOrchestraStatus,
) -> Result<RenderedCr, RenderError> {
    let values = crate::versions::served(serves)
        .values(spec)
        .map_err(|e| crate::versions::name_foreign_fields(serves, spec, e, name).prefixed("spec"))?;
    let apps: Vec<&str> = values.applications.iter().flatten().map(|(k, _)| k.as_str()).collect();
    let refresh = model::refresh_values(refresh_annotation, &apps, previous);
    let model = chart.model(&values, &refresh)?;
    let rendered = chart.render_model(name, namespace, &model)?;
    Ok(RenderedCr { model, rendered, refresh })
}
