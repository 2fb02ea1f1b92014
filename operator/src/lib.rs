//! model-orchestra: turns a `ModelOrchestra` custom resource into Kubernetes objects by
//! rendering a vendored chart with Handlebars, and keeps them so in a cluster.
//!
//! Data flows one way: a CR of any served version ([`versions`], types in
//! [`model_orchestra_api`]) → its values → the one internal [`model`] → validated
//! ([`validate`]) and rendered objects with their component ([`chart`]) → an apply plan
//! ([`reconcile`], pure) → the API server and the status ([`controller`], the I/O).

// What is `pub` is what the binary, the tests and the benchmarks use; the rest is
// `pub(crate)`, and the lint keeps it so.
#![warn(unreachable_pub)]

pub mod chart;
pub mod controller;
pub mod diff;
pub mod drain;
pub mod error;
pub mod gateway;
pub mod model;
pub mod operations;
pub mod reconcile;
pub mod reference;
mod validate;
pub mod versions;

use std::sync::OnceLock;

use model_orchestra_api::parse::Document;
use model_orchestra_api::ApiVersion;

use chart::{Chart, Rendered, YamlStream};
use error::RenderError;

/// The chart compiled into this binary for `version`, loaded once per process.
pub fn embedded_chart(version: ApiVersion) -> Result<&'static Chart, RenderError> {
    static CHARTS: [OnceLock<Chart>; ApiVersion::ALL.len()] = [const { OnceLock::new() }; ApiVersion::ALL.len()];
    let slot = &CHARTS[ApiVersion::ALL.iter().position(|v| *v == version).expect("a known version")];
    if let Some(chart) = slot.get() {
        return Ok(chart);
    }
    let chart = Chart::embedded(version)?;
    Ok(slot.get_or_init(|| chart))
}

/// Renders a ModelOrchestra document with `chart` (its version's embedded chart when
/// `None`); its namespace, else `default_namespace`, is the release namespace.
pub fn render_document(
    doc: &Document,
    chart: Option<&Chart>,
    default_namespace: &str,
) -> Result<Rendered, RenderError> {
    let (chart, model, namespace) = document_model(doc, chart, default_namespace)?;
    chart.render_model(doc.name(), namespace, &model)
}

/// Like [`render_document`], each object as the YAML document `render` prints.
pub fn render_document_yaml(
    doc: &Document,
    chart: Option<&Chart>,
    default_namespace: &str,
) -> Result<YamlStream, RenderError> {
    let (chart, model, namespace) = document_model(doc, chart, default_namespace)?;
    chart.render_model_yaml(doc.name(), namespace, &model)
}

/// The chart that renders `doc`, its model and its release namespace.
fn document_model<'a>(
    doc: &'a Document,
    chart: Option<&'a Chart>,
    default_namespace: &'a str,
) -> Result<(&'a Chart, model::Model, &'a str), RenderError> {
    let chart = match chart {
        Some(chart) => chart,
        None => embedded_chart(doc.api_version)?,
    };
    if chart.api_version() != doc.api_version {
        return Err(RenderError::chart(
            "Chart.yaml",
            format!("this chart renders {} ModelOrchestras, not {}", chart.api_version(), doc.api_version),
        ));
    }
    let values = versions::served(doc.api_version).values(&doc.spec).map_err(|e| e.prefixed("spec"))?;
    let namespace = doc.metadata.namespace.as_deref().unwrap_or(default_namespace);
    Ok((chart, chart.model(&values, &Default::default())?, namespace))
}

/// Renders a ModelOrchestra object (as JSON) with its version's embedded chart.
pub fn render_value(value: &serde_json::Value, default_namespace: &str) -> Result<Rendered, RenderError> {
    render_document(&model_orchestra_api::parse::document(value)?, None, default_namespace)
}

/// Renders a ModelOrchestra manifest (YAML or JSON) with its version's embedded chart.
pub fn render_manifest(text: &str, default_namespace: &str) -> Result<Rendered, RenderError> {
    let doc = model_orchestra_api::parse::document_from_yaml(text)?;
    render_document(&doc, None, default_namespace)
}
