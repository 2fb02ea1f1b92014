//! The vendored chart: `Chart.yaml`, `values.yaml` and Handlebars templates, embedded in
//! the binary at build time or loaded from a directory (`--chart DIR`) for chart work.
//!
//! Loading compiles every template once; a [`Chart`] is then reused for every render.

mod component;
mod config_yaml;
mod context;
mod contract;
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
pub use context::{MANAGED_BY, MANAGED_BY_LABEL, MODEL_REVISION_LABEL};
pub use contract::{Contract, API_VERSION_ANNOTATION};
pub use render::{to_yaml_stream, RenderedObject};

/// A chart compiled into the binary: its templates, and its `Chart.yaml` and `values.yaml`
/// as JSON (see `build.rs`).
struct Embedded {
    templates: Dir<'static>,
    chart_json: &'static str,
    values_json: &'static str,
}

/// The `v1alpha1` chart (model-orchestra 0.3's contract).
static EMBEDDED_V1ALPHA1: Embedded = Embedded {
    templates: include_dir!("$CARGO_MANIFEST_DIR/../charts/model-orchestra/templates"),
    chart_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra/Chart.json")),
    values_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra/values.json")),
};

/// The `v1alpha2` chart (inference-stack 1.0's contract).
static EMBEDDED_V1ALPHA2: Embedded = Embedded {
    templates: include_dir!("$CARGO_MANIFEST_DIR/../charts/model-orchestra-1.0/templates"),
    chart_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra-1.0/Chart.json")),
    values_json: include_str!(concat!(env!("OUT_DIR"), "/model-orchestra-1.0/values.json")),
};

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
    /// The ModelOrchestra version whose values this chart renders.
    pub contract: Contract,
    /// `values.yaml`, parsed once: the defaults every CR is merged over.
    defaults: ModelOrchestraSpec,
    /// `applicationTemplate.modelsVolume` and `.modelCache` of `values.yaml` (`v1alpha2`).
    default_models: crate::api::v1alpha2::ModelsVolumes,
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
    /// The `v1alpha1` chart compiled into this binary.
    pub fn embedded() -> Result<Chart, RenderError> {
        Chart::from_embedded(&EMBEDDED_V1ALPHA1)
    }

    /// The chart compiled into this binary for `contract`.
    pub fn embedded_for(contract: Contract) -> Result<Chart, RenderError> {
        Chart::from_embedded(match contract {
            Contract::V1alpha1 => &EMBEDDED_V1ALPHA1,
            Contract::V1alpha2 => &EMBEDDED_V1ALPHA2,
        })
    }

    /// An embedded chart. Its `Chart.yaml` and `values.yaml` were parsed at build time
    /// (`build.rs`); its values are checked against the contract in debug builds (every
    /// test), as its rendered objects are.
    fn from_embedded(embedded: &Embedded) -> Result<Chart, RenderError> {
        let mut templates = Vec::new();
        for f in embedded.templates.files() {
            let name = f.path().file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            let text = f.contents_utf8().ok_or_else(|| RenderError::chart(&name, "not UTF-8"))?;
            templates.push((name, text.to_string()));
        }
        let metadata: ChartMetadata =
            serde_json::from_str(embedded.chart_json).map_err(|e| RenderError::chart("Chart.yaml", e))?;
        let contract = contract_of(&metadata)?;
        let checked = cfg!(debug_assertions);
        let values: Value =
            serde_json::from_str(embedded.values_json).map_err(|e| RenderError::chart("values.yaml", e))?;
        let (defaults, models) = defaults(contract, &values, checked)?;
        Chart::from_parts(metadata, contract, defaults, models, templates, checked)
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
        let contract = contract_of(&metadata)?;
        let values: Value =
            serde_yaml::from_str(&read(&dir.join("values.yaml"))?).map_err(|e| RenderError::chart("values.yaml", e))?;
        let (defaults, models) = defaults(contract, &values, true)?;
        Chart::from_parts(metadata, contract, defaults, models, templates, true)
    }

    fn from_parts(
        metadata: ChartMetadata,
        contract: Contract,
        defaults: ModelOrchestraSpec,
        default_models: crate::api::v1alpha2::ModelsVolumes,
        files: Vec<(String, String)>,
        check_objects: bool,
    ) -> Result<Chart, RenderError> {
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
        Ok(Chart { metadata, contract, defaults, default_models, templates, registry, check_objects })
    }
}

fn contract_of(metadata: &ChartMetadata) -> Result<Contract, RenderError> {
    Contract::from_api_version(metadata.annotations.get(API_VERSION_ANNOTATION).map(String::as_str))
        .map_err(|e| RenderError::chart("Chart.yaml", e))
}

/// `values.yaml` as the renderer's defaults, read as the contract's version. `checked`: it
/// must itself satisfy the values contract (strictly, no unknown field), and give every
/// value a default (a value left out would have nothing to fall back on).
fn defaults(
    contract: Contract,
    values: &Value,
    checked: bool,
) -> Result<(ModelOrchestraSpec, crate::api::v1alpha2::ModelsVolumes), RenderError> {
    let in_values = |e: crate::error::InputError| RenderError::chart("values.yaml", e);
    let json_error = |e: serde_json::Error| RenderError::chart("values.yaml", e);
    let (mut defaults, models) = match contract {
        Contract::V1alpha1 => {
            let spec: ModelOrchestraSpec = if checked {
                crate::input::strict_from_value(values).map_err(in_values)?
            } else {
                serde_json::from_value(values.clone()).map_err(json_error)?
            };
            (spec, Default::default())
        }
        Contract::V1alpha2 => {
            let spec: crate::api::v1alpha2::ModelOrchestraSpec = if checked {
                crate::input::strict_from_value(values).map_err(in_values)?
            } else {
                serde_json::from_value(values.clone()).map_err(json_error)?
            };
            spec.into_values()
        }
    };
    if !contract.applications_have_network() {
        // Applications have no Service or Ingress: the resolver still resolves the settings
        // every component has, so they are none (no ports, disabled); nothing renders them.
        let template = defaults.application_template.get_or_insert_with(Default::default);
        template.service =
            Some(crate::api::ServiceValues { type_: Some(crate::api::ServiceType::ClusterIP), ports: Some(vec![]) });
        template.ingress = Some(crate::api::IngressValues {
            enabled: Some(false),
            class_name: Some(String::new()),
            annotations: Some(Default::default()),
            hosts: Some(vec![]),
            tls: Some(vec![]),
        });
    }
    if checked {
        let probe = ModelOrchestraSpec {
            applications: Some([("probe".to_string(), Default::default())].into()),
            ..Default::default()
        };
        resolve::resolve(&defaults, &probe)?;
        if contract == Contract::V1alpha2 {
            if models.template.is_none() {
                return Err(RenderError::chart("values.yaml", "applicationTemplate.modelsVolume needs a default"));
            }
            resolve::model_cache(models.cache_template.as_ref(), None)
                .map_err(|e| RenderError::chart("values.yaml", e))?;
        }
    }
    Ok((defaults, models))
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
