//! A registry+v1 bundle as an `olm.bundle`, derived as `opm render` does (olm.md §2.4):
//! `olm.package`, one `olm.gvk` per CRD version in the bundle, one `olm.bundle.object` per
//! manifest (compact, key-sorted, HTML-escaped JSON like Go's json.Marshal), properties
//! sorted by type then value with the objects last, and relatedImages = the CSV's, the
//! bundle image and the deployments' container images, de-duplicated and sorted.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{json, Value};

use super::fbc::{Bundle, Icon, Property, RelatedImage, BUNDLE};
use super::semver::BundleFacts;

use crate::bundle::annotations;

#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct BundleError {
    pub source_name: String,
    pub message: String,
}

/// A rendered bundle.
#[derive(Debug, Clone)]
pub struct RenderedBundle {
    pub bundle: Bundle,
    pub facts: BundleFacts,
    pub description: String,
    pub icon: Option<Icon>,
}

/// The bundle's files (paths relative to the image root or bundle directory) plus the
/// labels/annotations that say where the manifests are and which package it is.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BundleContent {
    pub annotations: BTreeMap<String, String>,
    pub files: BTreeMap<String, String>,
}

impl BundleContent {
    /// Reads `metadata/annotations.yaml` from the files when the labels are not given.
    pub fn annotations_from_files(files: BTreeMap<String, String>, source_name: &str) -> Result<BundleContent, BundleError> {
        let fail = |message: String| BundleError { source_name: source_name.into(), message };
        let text = files.get("metadata/annotations.yaml").ok_or_else(|| fail("no metadata/annotations.yaml (fix: run `bundle-tool bundle generate`)".into()))?;
        let annotations = annotations::parse(text).map_err(|e| fail(format!("metadata/annotations.yaml: {e}")))?;
        Ok(BundleContent { annotations, files })
    }
}

/// Go's json.Marshal output for a value: compact, keys sorted, `<`, `>`, `&`, U+2028 and
/// U+2029 escaped.
pub fn go_json(value: &Value) -> String {
    let compact = serde_json::to_string(value).expect("JSON");
    let mut out = String::with_capacity(compact.len());
    for c in compact.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// How bundle manifests are carried (opm's `--migrate-level`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Objects {
    /// One `olm.bundle.object` per manifest (opm's default).
    #[default]
    BundleObjects,
    /// `bundle-object-to-csv-metadata`: one `olm.csv.metadata` instead.
    CsvMetadata,
}

/// The `olm.csv.metadata` value opm builds from a CSV: these fields, empty ones left
/// out except the three struct-typed ones Go always writes.
fn csv_metadata(csv: &Value) -> Value {
    let mut m = serde_json::Map::new();
    let mut put = |key: &str, v: &Value, always: bool| {
        let empty = match v {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        if !empty {
            m.insert(key.into(), v.clone());
        } else if always {
            m.insert(key.into(), json!({}));
        }
    };
    let spec = &csv["spec"];
    put("annotations", &csv["metadata"]["annotations"], false);
    put("apiServiceDefinitions", &spec["apiservicedefinitions"], true);
    put("crdDescriptions", &spec["customresourcedefinitions"], true);
    put("description", &spec["description"], false);
    put("displayName", &spec["displayName"], false);
    put("installModes", &spec["installModes"], false);
    put("keywords", &spec["keywords"], false);
    put("labels", &csv["metadata"]["labels"], false);
    put("links", &spec["links"], false);
    put("maintainers", &spec["maintainers"], false);
    put("maturity", &spec["maturity"], false);
    put("minKubeVersion", &spec["minKubeVersion"], false);
    put("nativeAPIs", &spec["nativeAPIs"], false);
    put("provider", &spec["provider"], true);
    Value::Object(m)
}

/// Renders `content` as the olm.bundle for `image` (the reference exactly as given).
pub fn render(content: &BundleContent, image: &str, objects_as: Objects) -> Result<RenderedBundle, BundleError> {
    let fail = |message: String| BundleError { source_name: image.into(), message };
    let package = content
        .annotations
        .get(annotations::PACKAGE)
        .cloned()
        .ok_or_else(|| fail(format!("not a bundle: no {} label/annotation (fix: build it with `bundle-tool bundle build`)", annotations::PACKAGE)))?;
    let manifests_dir = content.annotations.get(annotations::MANIFESTS).map(String::as_str).unwrap_or("manifests/").trim_matches('/').to_string() + "/";

    let mut objects = Vec::new();
    for (path, text) in content.files.iter().filter(|(p, _)| p.starts_with(&manifests_dir) && !p[manifests_dir.len()..].contains('/')) {
        // opm reads only the first document of each manifest file.
        let first = serde_yaml::Deserializer::from_str(text).next().ok_or_else(|| fail(format!("{path}: empty manifest")))?;
        let value = <Value as serde::Deserialize>::deserialize(first).map_err(|e| fail(format!("{path}: {e}")))?;
        if value.is_object() {
            objects.push((path.clone(), value));
        }
    }
    let csvs: Vec<&(String, Value)> = objects.iter().filter(|(_, o)| o["kind"] == "ClusterServiceVersion").collect();
    let [(csv_path, csv)] = csvs.as_slice() else {
        return Err(fail(format!("expected exactly one ClusterServiceVersion in {manifests_dir}, found {}", csvs.len())));
    };
    let name = csv["metadata"]["name"].as_str().ok_or_else(|| fail(format!("{csv_path}: metadata.name is missing")))?.to_string();
    let version = match &csv["spec"]["version"] {
        Value::String(s) => s.clone(),
        Value::Null => return Err(fail(format!("{csv_path}: spec.version is missing"))),
        other => other.to_string(),
    };

    let mut properties = vec![Property { type_: "olm.package".into(), value: json!({"packageName": package, "version": version}) }];
    let mut gvks = std::collections::BTreeSet::new();
    for (_, o) in objects.iter().filter(|(_, o)| o["kind"] == "CustomResourceDefinition") {
        let group = o["spec"]["group"].as_str().unwrap_or_default();
        let kind = o["spec"]["names"]["kind"].as_str().unwrap_or_default();
        for v in o["spec"]["versions"].as_array().into_iter().flatten() {
            gvks.insert((group.to_string(), kind.to_string(), v["name"].as_str().unwrap_or_default().to_string()));
        }
    }
    properties.extend(gvks.into_iter().map(|(group, kind, version)| Property { type_: "olm.gvk".into(), value: json!({"group": group, "kind": kind, "version": version}) }));
    for required in csv["spec"]["customresourcedefinitions"]["required"].as_array().into_iter().flatten() {
        let group = required["name"].as_str().and_then(|n| n.split_once('.')).map(|(_, g)| g).unwrap_or_default();
        properties.push(Property { type_: "olm.gvk.required".into(), value: json!({"group": group, "kind": required["kind"], "version": required["version"]}) });
    }
    // Sort keys are serialised once per property, not once per comparison.
    properties.sort_by_cached_key(|p| (p.type_.clone(), go_json(&p.value)));
    match objects_as {
        Objects::BundleObjects => {
            let mut object_props: Vec<Property> = objects
                .iter()
                .map(|(_, o)| Property { type_: "olm.bundle.object".into(), value: json!({"data": base64::engine::general_purpose::STANDARD.encode(go_json(o))}) })
                .collect();
            object_props.sort_by_cached_key(|p| go_json(&p.value));
            properties.extend(object_props);
        }
        Objects::CsvMetadata => properties.push(Property { type_: "olm.csv.metadata".into(), value: csv_metadata(csv) }),
    }

    let mut images: Vec<RelatedImage> = Vec::new();
    let mut add = |name: &str, image: &str| {
        if !image.is_empty() && !images.iter().any(|r| r.image == image) {
            images.push(RelatedImage { name: name.into(), image: image.into() });
        }
    };
    for r in csv["spec"]["relatedImages"].as_array().into_iter().flatten() {
        add(r["name"].as_str().unwrap_or_default(), r["image"].as_str().unwrap_or_default());
    }
    add("", image);
    for d in csv["spec"]["install"]["spec"]["deployments"].as_array().into_iter().flatten() {
        let pod = &d["spec"]["template"]["spec"];
        for c in pod["containers"].as_array().into_iter().flatten().chain(pod["initContainers"].as_array().into_iter().flatten()) {
            add("", c["image"].as_str().unwrap_or_default());
        }
    }
    images.sort_by(|a, b| a.image.cmp(&b.image));

    let icon = csv["spec"]["icon"][0]
        .as_object()
        .map(|i| Icon { base64data: i.get("base64data").and_then(Value::as_str).unwrap_or_default().into(), mediatype: i.get("mediatype").and_then(Value::as_str).unwrap_or_default().into() });
    Ok(RenderedBundle {
        bundle: Bundle { schema: BUNDLE.into(), name: name.clone(), package: package.clone(), image: image.into(), properties, related_images: images },
        facts: BundleFacts { name, package, version },
        description: csv["spec"]["description"].as_str().unwrap_or_default().to_string(),
        icon,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_json_escapes_html_characters_like_encoding_json() {
        assert_eq!(go_json(&json!({"b": "<a&b>", "a": 1})), r#"{"a":1,"b":"\u003ca\u0026b\u003e"}"#);
    }
}
