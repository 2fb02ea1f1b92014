//! Helpers shared by the integration tests.
#![allow(dead_code)]

use model_orchestra::chart::{Chart, RenderedObject};
use model_orchestra::error::RenderError;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::ApiVersion;
use serde_json::Value;

pub fn chart() -> &'static Chart {
    model_orchestra::embedded_chart(ApiVersion::V1alpha1).expect("the embedded chart loads")
}

pub fn data(name: &str) -> String {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn sample() -> String {
    let path = format!("{}/../config/samples/modelorchestra.yaml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("sample")
}

/// Renders a ModelOrchestra manifest (of any version) with its version's chart.
pub fn try_render(yaml: &str) -> Result<Vec<RenderedObject>, RenderError> {
    model_orchestra::render_manifest(yaml, "default").map(|r| r.objects)
}

/// The warnings a render of the manifest gives (it must render).
pub fn warnings(yaml: &str) -> Vec<model_orchestra_api::InputError> {
    model_orchestra::render_manifest(yaml, "default").unwrap_or_else(|e| panic!("render failed: {e}")).warnings
}

pub fn render(yaml: &str) -> Vec<RenderedObject> {
    try_render(yaml).unwrap_or_else(|e| panic!("render failed: {e}"))
}

/// A minimal CR named `demo` whose spec is the given YAML (indented under `spec:`).
pub fn cr(spec: &str) -> String {
    let indented: String = spec.lines().map(|l| format!("  {l}\n")).collect();
    format!("apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata:\n  name: demo\nspec:\n{indented}")
}

pub fn find<'a>(objects: &'a [RenderedObject], kind: Kind, name: &str) -> &'a Value {
    &objects
        .iter()
        .find(|o| o.kind == kind && o.name == name)
        .unwrap_or_else(|| panic!("no {kind:?} {name}; rendered: {:?}", names(objects)))
        .object
}

pub fn has(objects: &[RenderedObject], kind: Kind, name: &str) -> bool {
    objects.iter().any(|o| o.kind == kind && o.name == name)
}

pub fn names(objects: &[RenderedObject]) -> Vec<(Kind, String)> {
    objects.iter().map(|o| (o.kind, o.name.clone())).collect()
}

/// The first container of a Deployment.
pub fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

pub fn env_pairs(deployment: &Value) -> Vec<(String, String)> {
    container(deployment)["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e["value"].as_str().unwrap_or("<valueFrom>").to_string()))
        .collect()
}

pub fn checksum(deployment: &Value) -> String {
    deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"].as_str().unwrap().to_string()
}

/// The embedded `v1alpha2` chart.
pub fn chart_v1alpha2() -> &'static Chart {
    model_orchestra::embedded_chart(ApiVersion::V1alpha2).expect("the embedded v1alpha2 chart loads")
}

/// Renders a `v1alpha2` ModelOrchestra manifest.
pub fn try_render_v1alpha2(yaml: &str) -> Result<Vec<RenderedObject>, RenderError> {
    assert!(yaml.contains("models.titanml.co/v1alpha2"), "not a v1alpha2 manifest");
    try_render(yaml)
}

pub fn render_v1alpha2(yaml: &str) -> Vec<RenderedObject> {
    try_render_v1alpha2(yaml).unwrap_or_else(|e| panic!("render failed: {e}"))
}

/// A minimal `v1alpha2` CR named `demo` whose spec is the given YAML.
pub fn cr_v1alpha2(spec: &str) -> String {
    cr(spec).replace("models.titanml.co/v1alpha1", "models.titanml.co/v1alpha2")
}
