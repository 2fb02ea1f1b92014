//! A registry+v1 bundle as an `olm.bundle`, derived as `opm render` does (olm.md §2.4):
//! `olm.package`, one `olm.gvk` per CRD version in the bundle, one `olm.bundle.object` per
//! manifest (compact, key-sorted, HTML-escaped JSON like Go's json.Marshal), properties
//! sorted by type then value with the objects last, and relatedImages = the CSV's, the
//! bundle image and the deployments' container images, de-duplicated and sorted.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{json, Value};

use super::fbc::{Bundle, Icon, Property, RelatedImage, BUNDLE};
use super::goenc::Node;
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
    pub fn annotations_from_files(
        files: BTreeMap<String, String>,
        source_name: &str,
    ) -> Result<BundleContent, BundleError> {
        let fail = |message: String| BundleError { source_name: source_name.into(), message };
        let text = files
            .get("metadata/annotations.yaml")
            .ok_or_else(|| fail("no metadata/annotations.yaml (fix: run `bundle-tool bundle generate`)".into()))?;
        let annotations = annotations::parse(text).map_err(|e| fail(format!("metadata/annotations.yaml: {e}")))?;
        Ok(BundleContent { annotations, files })
    }
}

/// Go's json.Marshal output for a decoded manifest: compact, keys sorted, numbers as
/// Go re-encodes them, `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub fn go_json(value: &Value) -> String {
    Node::from_value(value).compact(true)
}

/// How bundle manifests are carried (opm's `--migrate-level`, whose names it takes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Objects {
    /// One `olm.bundle.object` per manifest (opm's default).
    #[default]
    #[value(name = "none")]
    BundleObjects,
    /// `bundle-object-to-csv-metadata`: one `olm.csv.metadata` instead.
    #[value(name = "bundle-object-to-csv-metadata")]
    CsvMetadata,
}

/// The first YAML or JSON document of a manifest file as opm's bundle parser decodes it
/// into an unstructured object: None when it is not an object with a `kind` (opm skips
/// such files with a warning).
fn decode_manifest(text: &str) -> Option<Value> {
    let first = serde_yaml::Deserializer::from_str(text).next()?;
    let value = <Value as serde::Deserialize>::deserialize(first).ok()?;
    value["kind"].as_str().is_some_and(|k| !k.is_empty()).then_some(value)
}

fn gvk(group: &str, kind: &str, version: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// The CSV's `spec.release` as opm reads it: a string, or a number written as an integer
/// when whole.
fn release(csv: &Value) -> Option<String> {
    match &csv["spec"]["release"] {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => {
            let f = n.as_f64()?;
            Some(if f == (f as i64) as f64 { (f as i64).to_string() } else { super::goenc::format_float(f, 'g') })
        }
        _ => None,
    }
}

/// The package's icon as the semver template copies it: the first CSV icon, its data
/// decoded as base64 (line breaks ignored) and encoded again; an icon list Go cannot
/// decode gives no icon.
fn first_icon(csv: &Value) -> Option<Icon> {
    let icons = csv["spec"].get("icon")?.as_array()?;
    let mut decoded = Vec::new();
    for icon in icons {
        let object = icon.as_object()?;
        let data = match object.get("base64data") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => {
                let clean: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
                let bytes = base64::engine::general_purpose::STANDARD.decode(clean).ok()?;
                base64::engine::general_purpose::STANDARD.encode(bytes)
            }
            Some(_) => return None,
        };
        let mediatype = match object.get("mediatype") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return None,
        };
        decoded.push(Icon { base64data: data, mediatype });
    }
    decoded.into_iter().next()
}

/// Renders `content` as the olm.bundle for `image` (the reference exactly as given; ""
/// for a bundle directory, as `opm render DIR`).
pub fn render(content: &BundleContent, image: &str, objects_as: Objects) -> Result<RenderedBundle, BundleError> {
    let source = if image.is_empty() { "bundle directory" } else { image };
    let fail = |message: String| BundleError { source_name: source.into(), message };
    let package = content.annotations.get(annotations::PACKAGE).cloned().ok_or_else(|| {
        fail(format!(
            "not a bundle: no {} label/annotation (fix: build it with `bundle-tool bundle build`)",
            annotations::PACKAGE
        ))
    })?;

    // opm reads manifests/ (whatever the annotation says), file by file in name order,
    // skipping dotfiles, subdirectories and what does not decode, and keeps only the
    // first CSV.
    let mut objects: Vec<(String, Value)> = Vec::new();
    let mut csv: Option<(String, Value)> = None;
    for (path, text) in content
        .files
        .iter()
        .filter(|(p, _)| p.strip_prefix("manifests/").is_some_and(|n| !n.contains('/') && !n.starts_with('.')))
    {
        let Some(value) = decode_manifest(text) else { continue };
        if value["kind"] == "ClusterServiceVersion" {
            if csv.is_some() {
                continue;
            }
            csv = Some((path.clone(), value.clone()));
        }
        objects.push((path.clone(), value));
    }
    let Some((csv_path, csv)) = csv else {
        return Err(fail("no csv in bundle: manifests/ has no ClusterServiceVersion".into()));
    };
    let name = csv["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let version = match &csv["spec"]["version"] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => return Err(fail(format!("{csv_path}: spec.version must be a string, found {other}"))),
    };

    // Provided APIs: every version of every CRD in the bundle, and owned API services.
    let mut provided = std::collections::BTreeSet::new();
    for (_, o) in objects.iter().filter(|(_, o)| o["kind"] == "CustomResourceDefinition") {
        let group = o["spec"]["group"].as_str().unwrap_or_default();
        let kind = o["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let plural = o["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let mut versions: Vec<&str> =
            o["spec"]["versions"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
        if o["apiVersion"] == "apiextensions.k8s.io/v1beta1" {
            versions.extend(o["spec"]["version"].as_str().filter(|v| !v.is_empty()));
        }
        for v in versions {
            provided.insert((group.to_string(), v.to_string(), kind.to_string(), plural.to_string()));
        }
    }
    for (i, owned) in csv["spec"]["customresourcedefinitions"]["owned"].as_array().into_iter().flatten().enumerate() {
        let crd_name = owned["name"].as_str().unwrap_or_default();
        let Some((plural, group)) = crd_name.split_once('.') else {
            return Err(fail(format!("{csv_path}: couldn't parse plural.group from crd name: {crd_name}")));
        };
        let key = (
            group.to_string(),
            owned["version"].as_str().unwrap_or_default().to_string(),
            owned["kind"].as_str().unwrap_or_default().to_string(),
            plural.to_string(),
        );
        if !provided.contains(&key) {
            return Err(fail(format!("{csv_path}: spec.customresourcedefinitions.owned[{i}] ({crd_name} {}) is not in the bundle (fix: add its CRD to manifests/, or use --crd-mode shared)", key.1)));
        }
    }
    let mut gvks: Vec<Value> = provided.iter().map(|(g, v, k, _)| gvk(g, k, v)).collect();
    let api_services = &csv["spec"]["apiservicedefinitions"];
    gvks.extend(api_services["owned"].as_array().into_iter().flatten().map(|a| {
        gvk(
            a["group"].as_str().unwrap_or_default(),
            a["kind"].as_str().unwrap_or_default(),
            a["version"].as_str().unwrap_or_default(),
        )
    }));
    let mut required: Vec<Value> = Vec::new();
    for r in csv["spec"]["customresourcedefinitions"]["required"].as_array().into_iter().flatten() {
        let crd_name = r["name"].as_str().unwrap_or_default();
        let Some((_, group)) = crd_name.split_once('.') else {
            return Err(fail(format!("{csv_path}: couldn't parse plural.group from crd name: {crd_name}")));
        };
        required.push(gvk(group, r["kind"].as_str().unwrap_or_default(), r["version"].as_str().unwrap_or_default()));
    }
    required.extend(api_services["required"].as_array().into_iter().flatten().map(|a| {
        gvk(
            a["group"].as_str().unwrap_or_default(),
            a["kind"].as_str().unwrap_or_default(),
            a["version"].as_str().unwrap_or_default(),
        )
    }));

    let mut package_value = json!({"packageName": package, "version": version});
    if let Some(r) = release(&csv).filter(|r| !r.is_empty()) {
        package_value["release"] = json!(r);
    }
    let mut properties = vec![Property { type_: "olm.package".into(), value: package_value }];
    properties.extend(gvks.into_iter().map(|value| Property { type_: "olm.gvk".into(), value }));
    properties.extend(required.into_iter().map(|value| Property { type_: "olm.gvk.required".into(), value }));
    // Sorted by type, then by the value's JSON; keys are serialised once per property.
    properties.sort_by_cached_key(|p| (p.type_.clone(), p.sort_key()));
    properties.dedup();
    // opm's migration leaves a bundle without an image (a bundle directory) as it is.
    let objects_as = if image.is_empty() { Objects::BundleObjects } else { objects_as };
    match objects_as {
        Objects::BundleObjects => {
            // In manifest order, after everything else (opm moves them to the end).
            let mut object_props: Vec<Property> = objects
                .iter()
                .map(|(_, o)| Property {
                    type_: "olm.bundle.object".into(),
                    value: json!({"data": base64::engine::general_purpose::STANDARD.encode(go_json(o))}),
                })
                .collect();
            object_props.sort_by_cached_key(Property::sort_key);
            properties.extend(object_props);
        }
        Objects::CsvMetadata => {
            let meta = super::csvmeta::from_csv(&csv).map_err(|e| fail(format!("{csv_path}: migrate: {e}")))?;
            properties.push(Property { type_: "olm.csv.metadata".into(), value: super::csvmeta::to_value(&meta) });
        }
    }

    // relatedImages: the CSV's list as written, the bundle image unless listed, then
    // every deployment container and init container image not yet seen; sorted by image.
    let mut images: Vec<RelatedImage> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for r in csv["spec"]["relatedImages"].as_array().into_iter().flatten() {
        let image = r["image"].as_str().unwrap_or_default().to_string();
        seen.insert(image.clone());
        images.push(RelatedImage { name: r["name"].as_str().unwrap_or_default().into(), image });
    }
    if !image.is_empty() && !seen.contains(image) {
        images.push(RelatedImage { name: String::new(), image: image.into() });
    }
    if csv["spec"]["install"]["strategy"] == "deployment" {
        let mut operator_images = std::collections::BTreeSet::new();
        for d in csv["spec"]["install"]["spec"]["deployments"].as_array().into_iter().flatten() {
            let pod = &d["spec"]["template"]["spec"];
            for c in pod["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(pod["initContainers"].as_array().into_iter().flatten())
            {
                operator_images.insert(c["image"].as_str().unwrap_or_default().to_string());
            }
        }
        for i in operator_images {
            if seen.insert(i.clone()) {
                images.push(RelatedImage { name: String::new(), image: i });
            }
        }
    }
    images.sort_by(|a, b| a.image.cmp(&b.image));

    let description = match &csv["spec"]["description"] {
        Value::String(s) => s.clone(),
        _ => String::new(),
    };
    Ok(RenderedBundle {
        bundle: Bundle {
            schema: BUNDLE.into(),
            name: name.clone(),
            package: package.clone(),
            image: image.into(),
            properties,
            related_images: images,
        },
        facts: BundleFacts { name, package, version },
        description,
        icon: first_icon(&csv),
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
