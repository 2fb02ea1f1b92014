//! Rendering: templates → a JSON stream → checked objects in Helm's install order.
//!
//! Templates emit JSON (a subset of YAML that is fast to parse). Every value that comes from
//! the CR reaches the output through the `json` helper, a serialiser, so it stays data:
//! a hostile string cannot add, remove or retype a field. A bare `{{expr}}` is escaped as
//! a JSON string literal too, so a template mistake fails closed instead of injecting.

use std::collections::HashSet;

use handlebars::{Context, Handlebars, Helper, HelperResult, Output, RenderContext, RenderErrorReason};
use serde_json::Value;

use std::collections::BTreeMap;

use model_orchestra_api::kinds::Kind;

use super::{context, Chart, Component};
use crate::error::{InputError, InputErrors, RenderError};
use crate::model::{Model, Values};

/// One object the chart rendered, checked against its kind's schema.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedObject {
    pub kind: Kind,
    pub name: String,
    pub component: Component,
    pub object: Value,
}

pub(super) fn registry() -> Handlebars<'static> {
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(|s| serde_json::to_string(s).expect("strings always serialise"));
    hb.register_helper("json", Box::new(json_helper));
    hb
}

/// `{{json value}}`: the value as compact JSON.
fn json_helper(h: &Helper, _: &Handlebars, _: &Context, _: &mut RenderContext, out: &mut dyn Output) -> HelperResult {
    let param = h.param(0).ok_or(RenderErrorReason::ParamNotFoundForIndex("json", 0))?;
    let text = serde_json::to_string(param.value()).map_err(RenderErrorReason::SerdeError)?;
    out.write(&text)?;
    Ok(())
}

/// Below this many applications per shard, a second thread costs more than it saves.
const MIN_APPLICATIONS_PER_SHARD: usize = 8;

/// Applications rendered together within a shard (see [`Chart::render_in_chunks`]).
const CHUNK: usize = 8;

/// How many threads a render may use: the CPUs this process may run on, asked once.
fn render_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The application ranges of a render's shards: one shard up to
/// [`MIN_APPLICATIONS_PER_SHARD`] applications, then one per thread, sizes within one.
fn shards(applications: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    let count = (applications / MIN_APPLICATIONS_PER_SHARD).clamp(1, threads.max(1));
    (0..count).map(|i| (applications * i / count)..(applications * (i + 1) / count)).collect()
}

/// The outcome of one shard: an error in the values (building its applications' contexts)
/// outranks an error in the chart (rendering them), so a bad CR is reported as such
/// whichever shard meets it first.
enum ShardError {
    Values(RenderError),
    Chart(RenderError),
}

/// What a render printed as YAML produced: each object's YAML document (with its `---`
/// line), in order, and the render's warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlStream {
    pub documents: Vec<String>,
    pub warnings: Vec<InputError>,
}

/// What a render produced: the checked objects, and what is legal but almost certainly
/// wrong in the values (each naming its field).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub objects: Vec<RenderedObject>,
    pub warnings: Vec<InputError>,
}

impl Chart {
    /// The model of a ModelOrchestra with these values (its spec, as its version's module
    /// read it): merged over `values.yaml`, each cached model downloaded for `refresh`'s
    /// value for its application (see `reconcile::model::refresh_values`).
    pub fn model(&self, values: &Values, refresh: &BTreeMap<String, String>) -> Result<Model, RenderError> {
        let mut model = crate::model::resolve(&self.defaults, values, self.version.rules())?;
        for app in &mut model.applications {
            if let Some(cache) = &mut app.model_cache {
                cache.refresh = refresh.get(&app.key).cloned().unwrap_or_default();
            }
        }
        Ok(model)
    }

    /// Renders the objects for a ModelOrchestra named `release` in `namespace` with these
    /// values (see [`Chart::model`]).
    pub fn render(
        &self,
        release: &str,
        namespace: &str,
        values: &Values,
        refresh: &BTreeMap<String, String>,
    ) -> Result<Rendered, RenderError> {
        self.render_model(release, namespace, &self.model(values, refresh)?)
    }

    /// Validates the model (every error at once) and renders its objects.
    ///
    /// Applications are rendered in shards, on as many threads as the CPUs allow: every
    /// shard renders every template with the release, the gateway at the root and its own
    /// applications, and contributes the objects of its applications; the first shard also
    /// lists the gateway among its components and contributes the release's and the
    /// gateway's objects. The templates do not know about shards.
    pub fn render_model(&self, release: &str, namespace: &str, values: &Model) -> Result<Rendered, RenderError> {
        let (objects, warnings) = self.render_each(release, namespace, values, &|o| o)?;
        Ok(Rendered { objects: objects.into_iter().map(|(_, o)| o).collect(), warnings })
    }

    /// Like [`Chart::render_model`], each object kept only as its YAML document (`---` line
    /// included), made as soon as the object is checked: what `render` prints, without
    /// holding every object's JSON tree at once.
    pub fn render_model_yaml(&self, release: &str, namespace: &str, values: &Model) -> Result<YamlStream, RenderError> {
        let to_yaml = |o: RenderedObject| {
            let mut doc = String::with_capacity(4096);
            doc.push_str("---\n");
            super::yaml::write_yaml(&mut doc, &o.object);
            doc.shrink_to_fit();
            doc
        };
        let (documents, warnings) = self.render_each(release, namespace, values, &to_yaml)?;
        Ok(YamlStream { documents: documents.into_iter().map(|(_, d)| d).collect(), warnings })
    }

    /// Renders every object, keeps what `keep` makes of it, in Helm's install order.
    #[allow(clippy::type_complexity)]
    fn render_each<T: Send>(
        &self,
        release: &str,
        namespace: &str,
        values: &Model,
        keep: &(dyn Fn(RenderedObject) -> T + Sync),
    ) -> Result<(Vec<((Kind, String), T)>, Vec<InputError>), RenderError> {
        let findings = crate::validate::model(values);
        InputErrors::check(findings.errors)?;
        let release_context = context::Release::new(self, release, namespace, values)?;
        let ranges = shards(values.applications.len(), render_threads());
        let render_shard =
            |i: usize| self.render_in_chunks(&release_context, &values.applications[ranges[i].clone()], i == 0, keep);
        let outcomes: Vec<Result<Vec<((Kind, String), T)>, ShardError>> = if ranges.len() == 1 {
            vec![render_shard(0)]
        } else {
            std::thread::scope(|scope| {
                let others: Vec<_> = (1..ranges.len()).map(|i| scope.spawn(move || render_shard(i))).collect();
                let first = render_shard(0);
                std::iter::once(first)
                    .chain(
                        others.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))),
                    )
                    .collect()
            })
        };
        let mut objects = Vec::new();
        let mut chart_error = None;
        for outcome in outcomes {
            match outcome {
                Ok(shard) => objects.extend(shard),
                Err(ShardError::Values(e)) => return Err(e),
                Err(ShardError::Chart(e)) => chart_error = chart_error.or(Some(e)),
            }
        }
        if let Some(e) = chart_error {
            return Err(e);
        }
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(twice) = objects.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(RenderError::chart(
                "templates/",
                format!("renders {} `{}` a second time", twice[0].0 .0.kind(), twice[0].0 .1),
            ));
        }
        Ok((objects, findings.warnings))
    }

    /// Renders one shard's applications [`CHUNK`] at a time (each chunk like a shard of its
    /// own), so the template contexts and outputs alive at once stay small however many
    /// applications there are. An error in the values outranks one in the chart, as between
    /// shards: after a chart error the remaining chunks' values are still checked.
    #[allow(clippy::type_complexity)]
    fn render_in_chunks<T>(
        &self,
        release: &context::Release,
        applications: &[crate::model::ApplicationModel],
        first: bool,
        keep: &(dyn Fn(RenderedObject) -> T + Sync),
    ) -> Result<Vec<((Kind, String), T)>, ShardError> {
        let mut objects = Vec::new();
        let mut chart_error = None;
        let chunks: Vec<&[crate::model::ApplicationModel]> =
            if applications.is_empty() { vec![applications] } else { applications.chunks(CHUNK).collect() };
        for (i, chunk) in chunks.into_iter().enumerate() {
            if chart_error.is_some() {
                release.applications(chunk).map_err(ShardError::Values)?;
                continue;
            }
            match self.render_shard(release, chunk, first && i == 0, keep) {
                Ok(rendered) => objects.extend(rendered),
                Err(e @ ShardError::Values(_)) => return Err(e),
                Err(e @ ShardError::Chart(_)) => chart_error = Some(e),
            }
        }
        match chart_error {
            Some(e) => Err(e),
            None => Ok(objects),
        }
    }

    /// Renders every template for one shard of the applications (see [`Chart::render`]).
    #[allow(clippy::type_complexity)]
    fn render_shard<T>(
        &self,
        release: &context::Release,
        applications: &[crate::model::ApplicationModel],
        first: bool,
        keep: &(dyn Fn(RenderedObject) -> T + Sync),
    ) -> Result<Vec<((Kind, String), T)>, ShardError> {
        let applications = release.applications(applications).map_err(ShardError::Values)?;
        let mut by_name: std::collections::HashMap<&str, Component> = applications.components().collect();
        if first {
            by_name.insert(release.gateway_name(), Component::Gateway);
        }
        // Wrapped once: `Handlebars::render` would re-serialise the context per template.
        let ctx = Context::from(release.context(first, &applications).map_err(ShardError::Chart)?);
        let mut objects = Vec::new();
        let mut seen = HashSet::new();
        for template in &self.templates {
            let file = format!("templates/{template}");
            let chart_error = |m: String| ShardError::Chart(RenderError::chart(&file, m));
            let text = self.registry.render_with_context(template, &ctx).map_err(|e| chart_error(e.to_string()))?;
            for doc in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
                let doc =
                    doc.map_err(|e| chart_error(format!("output is not valid JSON: {e}: {}", excerpt(&text, &e))))?;
                let mut object = check_object(doc, release.namespace(), self.check_objects).map_err(chart_error)?;
                // The ServiceAccount belongs to the release; every other object to the
                // component whose name it carries.
                object.component = match object.kind {
                    Kind::ServiceAccount => Component::Release,
                    _ => match by_name.get(object.name.as_str()) {
                        Some(component) => component.clone(),
                        None if object.name == release.gateway_name() => Component::Gateway,
                        None => Component::Release,
                    },
                };
                if !seen.insert((object.kind, object.name.clone())) {
                    return Err(chart_error(format!("renders {} `{}` a second time", object.kind.kind(), object.name)));
                }
                // A later shard contributes only its applications' objects.
                if first || matches!(object.component, Component::Application(_) | Component::Candidate(_)) {
                    objects.push(((object.kind, object.name.clone()), keep(object)));
                }
            }
        }
        Ok(objects)
    }
}

fn excerpt(text: &str, e: &serde_json::Error) -> String {
    let line = text.lines().nth(e.line().saturating_sub(1)).unwrap_or_default();
    let start = e.column().saturating_sub(40);
    line.chars().skip(start).take(80).collect()
}

/// Checks one rendered document: a known kind with the right apiVersion, a name, the
/// release namespace, and valid for the kind's schema. Nulls are dropped (they mean
/// "absent" to the API server) so the output is canonical.
fn check_object(mut doc: Value, namespace: &str, strict: bool) -> Result<RenderedObject, String> {
    drop_nulls(&mut doc);
    let obj = doc.as_object().ok_or("a rendered document is not an object")?;
    let kind_name = obj.get("kind").and_then(Value::as_str).ok_or("an object has no `kind`")?;
    let kind = Kind::from_kind(kind_name)
        .ok_or_else(|| format!("renders kind `{kind_name}`, which the chart may not render"))?;
    let api_version = obj.get("apiVersion").and_then(Value::as_str).ok_or("an object has no `apiVersion`")?;
    if api_version != kind.api_version() {
        return Err(format!("{kind_name} has apiVersion `{api_version}`, expected `{}`", kind.api_version()));
    }
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("a {kind_name} has no metadata.name"))?
        .to_string();
    if doc.pointer("/metadata/namespace").and_then(Value::as_str) != Some(namespace) {
        return Err(format!("{kind_name} `{name}` must set metadata.namespace to the release namespace"));
    }
    if strict {
        kind.check(&doc).map_err(|e| format!("{kind_name} `{name}` is invalid: {e}"))?;
    }
    Ok(RenderedObject { kind, name, component: Component::Release, object: doc })
}

fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// The objects as one multi-document YAML stream, as `helm template` prints it: each
/// object exactly as `serde_yaml::to_string` writes it, after a `---` line (written by
/// [`super::yaml`], several times faster).
pub fn to_yaml_stream(objects: &[RenderedObject]) -> String {
    let mut out = String::with_capacity(objects.len() * 2048);
    for o in objects {
        out.push_str("---\n");
        super::yaml::write_yaml(&mut out, &o.object);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::shards;

    #[test]
    fn a_few_applications_render_in_one_shard() {
        assert_eq!(shards(0, 8), vec![0..0]);
        assert_eq!(shards(15, 8), vec![0..15]);
    }

    #[test]
    fn many_applications_split_evenly_over_the_threads() {
        assert_eq!(shards(50, 2), vec![0..25, 25..50]);
        assert_eq!(shards(1000, 3), vec![0..333, 333..666, 666..1000]);
        assert_eq!(shards(17, 4), vec![0..8, 8..17]);
        assert_eq!(shards(16, 4), vec![0..8, 8..16]);
    }

    #[test]
    fn the_yaml_documents_are_the_yaml_stream_of_the_objects_across_chunks_and_shards() {
        let mut text = String::from(
            "apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata:\n  name: m\nspec:\n  applications:\n",
        );
        for i in 0..(3 * super::CHUNK + 1) {
            text.push_str(&format!("    app-{i}:\n      readerConfig: {{modelName: model-{i}, device: cpu}}\n"));
        }
        let doc = model_orchestra_api::parse::document_from_yaml(&text).unwrap();
        let objects = crate::render_document(&doc, None, "ns").unwrap().objects;
        let documents = crate::render_document_yaml(&doc, None, "ns").unwrap().documents;
        assert_eq!(documents.len(), objects.len());
        assert_eq!(documents.concat(), super::to_yaml_stream(&objects));
    }

    #[test]
    fn one_thread_means_one_shard() {
        assert_eq!(shards(1000, 1), vec![0..1000]);
    }
}
