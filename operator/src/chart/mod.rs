//! The vendored chart: `Chart.yaml`, `values.yaml` and Handlebars templates, embedded in
//! the binary at build time or loaded from a directory (`--chart DIR`) for chart work.
//!
//! Loading compiles every template once; a [`Chart`] is then reused for every render.

mod component;
mod config_yaml;
mod context;
mod merge;
mod names;
mod render;
pub(crate) mod resolve;
mod values;
mod yaml;

use std::path::Path;

use handlebars::Handlebars;
use include_dir::{include_dir, Dir};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::ModelOrchestraSpec;
use crate::error::RenderError;

pub use component::Component;
pub use context::{MANAGED_BY, MANAGED_BY_LABEL};
pub use render::{to_yaml_stream, RenderedObject};

static EMBEDDED: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../charts/model-orchestra");

/// `Chart.yaml`: the fields the renderer uses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChartMetadata {
    pub name: String,
    pub version: String,
    pub app_version: String,
}

/// A loaded, compiled chart.
pub struct Chart {
    pub metadata: ChartMetadata,
    /// `values.yaml`, parsed once: the defaults every CR is merged over.
    defaults: ModelOrchestraSpec,
    /// Template names in a fixed order (sorted by file name), partials excluded.
    templates: Vec<String>,
    registry: Handlebars<'static>,
    /// Check every rendered object strictly against its kind's schema. Always for a chart
    /// directory (chart work); for the embedded chart, whose templates cannot change, in
    /// debug builds — every test render — but not in release builds, where it would
    /// double the cost of a render to re-prove what the tests proved.
    check_objects: bool,
}

impl Chart {
    /// The chart compiled into this binary.
    pub fn embedded() -> Result<Chart, RenderError> {
        let file = |name: &str| -> Result<String, RenderError> {
            EMBEDDED
                .get_file(name)
                .and_then(|f| f.contents_utf8())
                .map(str::to_owned)
                .ok_or_else(|| RenderError::chart(name, "missing from the embedded chart"))
        };
        let mut templates = Vec::new();
        if let Some(dir) = EMBEDDED.get_dir("templates") {
            for f in dir.files() {
                let name = f.path().file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
                let text = f.contents_utf8().ok_or_else(|| RenderError::chart(&name, "not UTF-8"))?;
                templates.push((name, text.to_string()));
            }
        }
        Chart::from_parts(&file("Chart.yaml")?, &file("values.yaml")?, templates, cfg!(debug_assertions))
    }

    /// A chart directory on disk (for chart development).
    pub fn from_dir(dir: &Path) -> Result<Chart, RenderError> {
        let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| RenderError::chart(p.display().to_string(), e));
        let tdir = dir.join("templates");
        let entries = std::fs::read_dir(&tdir).map_err(|e| RenderError::chart(tdir.display().to_string(), e))?;
        let mut templates = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| RenderError::chart(tdir.display().to_string(), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            templates.push((name, read(&entry.path())?));
        }
        Chart::from_parts(&read(&dir.join("Chart.yaml"))?, &read(&dir.join("values.yaml"))?, templates, true)
    }

    fn from_parts(chart_yaml: &str, values_yaml: &str, mut files: Vec<(String, String)>, check_objects: bool) -> Result<Chart, RenderError> {
        let metadata: ChartMetadata = serde_yaml::from_str::<Value>(chart_yaml)
            .map_err(|e| RenderError::chart("Chart.yaml", e))
            .and_then(|v| serde_json::from_value(v).map_err(|e| RenderError::chart("Chart.yaml", e)))?;
        let defaults: Value = serde_yaml::from_str(values_yaml).map_err(|e| RenderError::chart("values.yaml", e))?;
        // values.yaml must itself satisfy the values contract, and give every value a default.
        let defaults: ModelOrchestraSpec = crate::input::strict_from_value(&defaults).map_err(|e| RenderError::chart("values.yaml", e))?;
        let probe = ModelOrchestraSpec { applications: Some([("probe".to_string(), Default::default())].into()), ..Default::default() };
        resolve::resolve(&defaults, &probe)?;

        files.sort();
        let mut registry = render::registry();
        let mut templates = Vec::new();
        for (file, text) in files {
            let Some(stem) = file.strip_suffix(".hbs") else {
                continue;
            };
            if let Some(partial) = stem.strip_prefix('_') {
                registry.register_partial(partial.trim_end_matches(".json"), text).map_err(|e| RenderError::chart(format!("templates/{file}"), e))?;
            } else {
                registry.register_template_string(&file, text).map_err(|e| RenderError::chart(format!("templates/{file}"), e))?;
                templates.push(file);
            }
        }
        if templates.is_empty() {
            return Err(RenderError::chart("templates/", "no templates (*.hbs) found"));
        }
        Ok(Chart { metadata, defaults, templates, registry, check_objects })
    }
}
