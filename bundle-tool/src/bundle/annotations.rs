//! `metadata/annotations.yaml`, whose keys are also the bundle image's labels.

use std::collections::BTreeMap;

use serde_json::Value;

pub const MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
pub const MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
pub const METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";
pub const PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
pub const CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
pub const DEFAULT_CHANNEL: &str = "operators.operatorframework.io.bundle.channel.default.v1";

/// Keys every bundle must have.
pub const REQUIRED: [&str; 5] = [MEDIATYPE, MANIFESTS, METADATA, PACKAGE, CHANNELS];

pub fn for_bundle(package: &str, channels: &[String], default_channel: Option<&str>) -> BTreeMap<String, String> {
    let mut a = BTreeMap::from([
        (MEDIATYPE.to_string(), "registry+v1".to_string()),
        (MANIFESTS.to_string(), "manifests/".to_string()),
        (METADATA.to_string(), "metadata/".to_string()),
        (PACKAGE.to_string(), package.to_string()),
        (CHANNELS.to_string(), channels.join(",")),
    ]);
    if let Some(d) = default_channel {
        a.insert(DEFAULT_CHANNEL.to_string(), d.to_string());
    }
    a
}

/// The string entries of a JSON object (image-config labels, the `annotations:` map).
pub fn string_map(object: &Value) -> BTreeMap<String, String> {
    object
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

/// The annotations of a `metadata/annotations.yaml` text.
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, serde_yaml::Error> {
    let doc: Value = serde_yaml::from_str(text)?;
    Ok(string_map(&doc["annotations"]))
}
