//! The vendored chart: `Chart.yaml`, `values.yaml` and Handlebars templates, embedded in
//! the binary at build time or loaded from a directory (`--chart DIR`) for chart work.
//!
//! Loading compiles every template once; a [`Chart`] is then reused for every render.

mod component;
mod config_yaml;
mod context;
mod group;
pub mod model_gateway;
mod names;
mod ollama;
mod render;
mod yaml;

use std::path::Path;

use handlebars::Handlebars;
use model_orchestra_api::ApiVersion;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::RenderError;
use crate::model::Values;
use crate::versions::{self, EmbeddedChart, ServedVersion};

pub use component::Component;
pub use context::{
    COMPONENT_LABEL, INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, MODEL_REVISION_LABEL, REVISION_ANNOTATION,
};
pub use group::{POD_INDEX_LABEL, ROLE_LABEL};
pub use ollama::{MODELS_ANNOTATION, MODELS_READY_CONDITION};
pub use render::{to_yaml_stream, Rendered, RenderedObject, YamlStream};

/// Where an engine reads models, and the model cache is mounted.
const MODELS_DIR: &str = "/code/models";

/// The longest an answer in flight gets to finish when the pod that carries it stops: an
/// Ollama replica's drain and the model gateway's both wait for their answers (and stop as
/// soon as none is left) up to this. Two minutes: a long answer of a small model on a busy
/// CPU, with room (an idle keep-alive connection does not hold a drain: `crate::drain`).
pub const ANSWER_GRACE_SECONDS: u64 = 115;

/// The annotation of `Chart.yaml` naming the ModelOrchestra version a chart serves (none
/// means `v1alpha1`).
pub use model_orchestra_api::keys::CHART_API_VERSION_ANNOTATION as API_VERSION_ANNOTATION;

/// `Chart.yaml`: the fields the renderer uses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChartMetadata {
    pub name: String,
    pub version: String,
    pub app_version: String,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// A loaded, compiled chart.
pub struct Chart {
    pub metadata: ChartMetadata,
    /// The API version whose CRs this chart renders, and its module.
    version: &'static dyn ServedVersion,
    /// `values.yaml`, parsed once: the defaults every CR is merged over.
    defaults: Values,
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
    /// The chart compiled into this binary for `version`.
    pub fn embedded(version: ApiVersion) -> Result<Chart, RenderError> {
        Chart::from_embedded(versions::served(version).embedded_chart())
    }

    /// The API version whose CRs this chart renders.
    /// The operator's image, as the chart's default model gateway image (which the operator
    /// sets to its own): what runs an Ollama replica's drain helper, whatever image a CR
    /// gives its model gateway (the helper's command must be this operator's).
    pub(crate) fn operator_image(&self) -> Option<&str> {
        self.defaults.model_gateway.as_ref()?.image.as_deref()
    }

    /// Makes `image` the model gateway's default image (the operator's own, when it runs
    /// from another registry than the released one). A contract without a model gateway
    /// is left as it is.
    pub fn set_model_gateway_image(&mut self, image: &str) {
        if let Some(gateway) = &mut self.defaults.model_gateway {
            gateway.image = Some(image.to_string());
        }
    }

    pub fn api_version(&self) -> ApiVersion {
        self.version.api_version()
    }

    /// An embedded chart. Its `Chart.yaml` and `values.yaml` were parsed at build time
    /// (`build.rs`); its values are checked against the contract in debug builds (every
    /// test), as its rendered objects are.
    fn from_embedded(embedded: &EmbeddedChart) -> Result<Chart, RenderError> {
        let mut templates = Vec::new();
        for f in embedded.templates.files() {
            let name = f.path().file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            let text = f.contents_utf8().ok_or_else(|| RenderError::chart(&name, "not UTF-8"))?;
            templates.push((name, text.to_string()));
        }
        let metadata: ChartMetadata =
            serde_json::from_str(embedded.chart_json).map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let values: Value =
            serde_json::from_str(embedded.values_json).map_err(|e| RenderError::chart("values.yaml", e))?;
        Chart::from_parts(metadata, &values, templates, cfg!(debug_assertions))
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
        let metadata: Value =
            serde_yaml::from_str(&read(&dir.join("Chart.yaml"))?).map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let metadata: ChartMetadata =
            serde_json::from_value(metadata).map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let values: Value =
            serde_yaml::from_str(&read(&dir.join("values.yaml"))?).map_err(|e| RenderError::chart("values.yaml", e))?;
        Chart::from_parts(metadata, &values, templates, true)
    }

    /// `values.yaml` must satisfy its version's values contract (strictly, no unknown
    /// field). `checked`: it must also give every value a default, and every rendered
    /// object is checked against its kind's schema.
    fn from_parts(
        metadata: ChartMetadata,
        values: &Value,
        files: Vec<(String, String)>,
        checked: bool,
    ) -> Result<Chart, RenderError> {
        let annotation = metadata.annotations.get(API_VERSION_ANNOTATION).map_or("v1alpha1", String::as_str);
        let api_version: ApiVersion = annotation.parse().map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let version = versions::served(api_version);
        let defaults = version.values(values).map_err(|e| RenderError::chart("values.yaml", e))?;
        if checked {
            version.check_defaults(&defaults).map_err(|e| RenderError::chart("values.yaml", e))?;
            let probe =
                Values { applications: Some([("probe".to_string(), Default::default())].into()), ..Default::default() };
            crate::model::resolve(&defaults, &probe, version.rules())?;
        }
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
        Ok(Chart { metadata, version, defaults, templates, registry, check_objects: checked })
    }
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
                    Compiled::Partial(
                        name.clone(),
                        handlebars::Template::compile_with_name(&text, name).map_err(error)?,
                    )
                }
                None => {
                    Compiled::Template(handlebars::Template::compile_with_name(&text, file.clone()).map_err(error)?)
                }
            };
            Ok((file, compiled))
        })
        .collect()
}
