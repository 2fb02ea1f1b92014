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
/// The embedded chart's `Chart.yaml` and `values.yaml`, as JSON (see `build.rs`).
const EMBEDDED_CHART_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/Chart.json"));
const EMBEDDED_VALUES_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/values.json"));

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
    /// The chart compiled into this binary. Its `Chart.yaml` and `values.yaml` were parsed
    /// at build time (`build.rs`); its values are checked against the contract in debug
    /// builds (every test), as its rendered objects are.
    pub fn embedded() -> Result<Chart, RenderError> {
        let mut templates = Vec::new();
        if let Some(dir) = EMBEDDED.get_dir("templates") {
            for f in dir.files() {
                let name = f.path().file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
                let text = f.contents_utf8().ok_or_else(|| RenderError::chart(&name, "not UTF-8"))?;
                templates.push((name, text.to_string()));
            }
        }
        let metadata = serde_json::from_str(EMBEDDED_CHART_JSON).map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let checked = cfg!(debug_assertions);
        let defaults = if checked {
            let value = serde_json::from_str(EMBEDDED_VALUES_JSON).map_err(|e| RenderError::chart("values.yaml", e))?;
            checked_defaults(&value)?
        } else {
            serde_json::from_str(EMBEDDED_VALUES_JSON).map_err(|e| RenderError::chart("values.yaml", e))?
        };
        Chart::from_parts(metadata, defaults, templates, checked)
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
        let metadata: Value = serde_yaml::from_str(&read(&dir.join("Chart.yaml"))?).map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let metadata = serde_json::from_value(metadata).map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let defaults: Value = serde_yaml::from_str(&read(&dir.join("values.yaml"))?).map_err(|e| RenderError::chart("values.yaml", e))?;
        Chart::from_parts(metadata, checked_defaults(&defaults)?, templates, true)
    }

    fn from_parts(metadata: ChartMetadata, defaults: ModelOrchestraSpec, files: Vec<(String, String)>, check_objects: bool) -> Result<Chart, RenderError> {
        let mut registry = render::registry();
        let mut templates = Vec::new();
        for (file, compiled) in compile_templates(files)? {
            match compiled {
                Compiled::Partial(name, template) => registry.register_template(&name, template),
                Compiled::Template(template) => {
                    registry.register_template(&file, template);
                    templates.push(file);
                }
            }
        }
        if templates.is_empty() {
            return Err(RenderError::chart("templates/", "no templates (*.hbs) found"));
        }
        Ok(Chart { metadata, defaults, templates, registry, check_objects })
    }
}

/// `values.yaml` checked: it must itself satisfy the values contract, and give every value
/// a default (a value left out would have nothing to fall back on).
fn checked_defaults(values: &Value) -> Result<ModelOrchestraSpec, RenderError> {
    let defaults: ModelOrchestraSpec = crate::input::strict_from_value(values).map_err(|e| RenderError::chart("values.yaml", e))?;
    let probe = ModelOrchestraSpec { applications: Some([("probe".to_string(), Default::default())].into()), ..Default::default() };
    resolve::resolve(&defaults, &probe)?;
    Ok(defaults)
}

/// A compiled template file: a partial (`_name.json.hbs`, registered as `name`) or a
/// template rendered for every release.
enum Compiled {
    Partial(String, handlebars::Template),
    Template(handlebars::Template),
}

/// Compiles the template files (`*.hbs`; other files are skipped), sorted by file name.
/// Compiling is most of a chart's load time (~1 ms, in Handlebars' parser); a second thread
/// halves it in a warm process but costs more than it saves in a fresh `render` process
/// (4.6 ms against 4.1 ms for the sample), so it stays on one.
fn compile_templates(mut files: Vec<(String, String)>) -> Result<Vec<(String, Compiled)>, RenderError> {
    files.retain(|(file, _)| file.ends_with(".hbs"));
    files.sort();
    files
        .into_iter()
        .map(|(file, text)| {
            let stem = file.strip_suffix(".hbs").unwrap_or(&file);
            let error = |e| RenderError::chart(format!("templates/{file}"), e);
            let compiled = match stem.strip_prefix('_') {
                Some(partial) => {
                    let name = partial.trim_end_matches(".json").to_string();
                    Compiled::Partial(name.clone(), handlebars::Template::compile_with_name(&text, name).map_err(error)?)
                }
                None => Compiled::Template(handlebars::Template::compile_with_name(&text, file.clone()).map_err(error)?),
            };
            Ok((file, compiled))
        })
        .collect()
}
