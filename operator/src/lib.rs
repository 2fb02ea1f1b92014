//! model-orchestra: turns a `ModelOrchestra` custom resource into Kubernetes objects by
//! rendering a vendored chart with Handlebars.
//!
//! Data flows one way: CR ([`api`]) → values ([`chart::values`]) → rendered, checked objects
//! ([`chart`], [`kinds`]) → (in the operator) an apply plan → the API server.

pub mod api;
pub mod chart;
pub mod controller;
pub mod crd;
pub mod error;
pub mod input;
pub mod kinds;
pub mod manifests;
pub mod operations;
pub mod reconcile;
pub mod validate;

use api::ModelOrchestra;
use chart::{Chart, RenderedObject};
use error::RenderError;

/// Renders the objects for `mo`; its namespace, else `default_namespace`, is the release
/// namespace.
pub fn render(chart: &Chart, mo: &ModelOrchestra, default_namespace: &str) -> Result<Vec<RenderedObject>, RenderError> {
    let name = mo.metadata.name.as_deref().unwrap_or_default();
    let namespace = mo.metadata.namespace.as_deref().unwrap_or(default_namespace);
    chart.render(name, namespace, &mo.spec)
}

/// Renders the objects for a `v1alpha2` `mo` with the `v1alpha2` chart; its namespace, else
/// `default_namespace`, is the release namespace.
pub fn render_v1alpha2(
    chart: &Chart,
    mo: &api::v1alpha2::ModelOrchestra,
    default_namespace: &str,
) -> Result<Vec<RenderedObject>, RenderError> {
    let name = mo.metadata.name.as_deref().unwrap_or_default();
    let namespace = mo.metadata.namespace.as_deref().unwrap_or(default_namespace);
    chart.render_v1alpha2(name, namespace, &mo.spec)
}
