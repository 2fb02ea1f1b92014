//! Rendering: templates → a JSON stream → checked objects in Helm's install order.
//!
//! Templates emit JSON (a subset of YAML that is fast to parse). Every value that comes from
//! the CR reaches the output through the `json` helper, a serialiser, so it stays data:
//! a hostile string cannot add, remove or retype a field. A bare `{{expr}}` is escaped as
//! a JSON string literal too, so a template mistake fails closed instead of injecting.

use std::collections::HashSet;

use handlebars::{Context, Handlebars, Helper, HelperResult, Output, RenderContext, RenderErrorReason};
use serde_json::Value;

use super::{context, Chart, Component};
use crate::api::ModelOrchestraSpec;
use crate::error::RenderError;
use crate::kinds::Kind;

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

impl Chart {
    /// Renders the objects for a ModelOrchestra named `release` in `namespace`.
    pub fn render(&self, release: &str, namespace: &str, spec: &ModelOrchestraSpec) -> Result<Vec<RenderedObject>, RenderError> {
        let values = super::resolve::resolve(&self.defaults, spec)?;
        crate::validate::resolved(&values, spec)?;
        let context::Built { context, components } = context::build(self, release, namespace, &values)?;
        // A component's objects carry its name; the ServiceAccount belongs to the release.
        let by_name: std::collections::HashMap<&str, &Component> = components.iter().map(|(n, c)| (n.as_str(), c)).collect();
        let component_of = |kind: Kind, name: &str| match kind {
            Kind::ServiceAccount => Component::Release,
            _ => by_name.get(name).map_or(Component::Release, |c| (*c).clone()),
        };
        // Wrapped once: `Handlebars::render` would re-serialise the context per template.
        let ctx = Context::from(context);
        let mut objects = Vec::new();
        let mut seen = HashSet::new();
        for template in &self.templates {
            let file = format!("templates/{template}");
            let text = self.registry.render_with_context(template, &ctx).map_err(|e| RenderError::chart(&file, e))?;
            for doc in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
                let doc = doc.map_err(|e| RenderError::chart(&file, format!("output is not valid JSON: {e}: {}", excerpt(&text, &e))))?;
                let mut object = check_object(doc, namespace, self.check_objects).map_err(|m| RenderError::chart(&file, m))?;
                object.component = component_of(object.kind, &object.name);
                if !seen.insert((object.kind, object.name.clone())) {
                    return Err(RenderError::chart(&file, format!("renders {} `{}` a second time", object.kind.kind(), object.name)));
                }
                objects.push(object);
            }
        }
        objects.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
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
    let kind = Kind::from_kind(kind_name).ok_or_else(|| format!("renders kind `{kind_name}`, which the chart may not render"))?;
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
