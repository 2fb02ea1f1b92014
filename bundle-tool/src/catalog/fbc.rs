//! File-Based Catalog objects (olm.package, olm.channel, olm.bundle) with opm's field
//! order, loading a catalog directory, and writing the way `opm` does: per package the
//! package, its channels, its bundles (each sorted by name); YAML documents each opened by
//! `---` with keys sorted (opm goes through JSON to YAML), JSON with four-space indents.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::goenc::Node;
use serde_json::Value;

use crate::error::ToolError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Icon {
    pub base64data: String,
    pub mediatype: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Package {
    pub schema: String,
    pub name: String,
    #[serde(rename = "defaultChannel", default)]
    pub default_channel: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub icon: Option<Icon>,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelEntry {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub replaces: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub skips: Vec<String>,
    #[serde(rename = "skipRange", skip_serializing_if = "String::is_empty", default)]
    pub skip_range: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    pub schema: String,
    pub name: String,
    pub package: String,
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Property {
    #[serde(rename = "type")]
    pub type_: String,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelatedImage {
    pub name: String,
    pub image: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub schema: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub package: String,
    #[serde(default)]
    pub image: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub properties: Vec<Property>,
    #[serde(rename = "relatedImages", skip_serializing_if = "Vec::is_empty", default)]
    pub related_images: Vec<RelatedImage>,
}

/// Where an object came from, for messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Origin {
    pub file: PathBuf,
    /// 1-based document index in the file.
    pub document: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (document {})", self.file.display(), self.document)
    }
}

/// A catalog: the olm.* objects plus any other schema, kept opaque.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub packages: Vec<(Package, Origin)>,
    pub channels: Vec<(Channel, Origin)>,
    pub bundles: Vec<(Bundle, Origin)>,
    pub deprecations: Vec<(Value, Origin)>,
    pub others: Vec<(Value, Origin)>,
}

pub const PACKAGE: &str = "olm.package";
pub const CHANNEL: &str = "olm.channel";
pub const BUNDLE: &str = "olm.bundle";
pub const DEPRECATIONS: &str = "olm.deprecations";

fn package_of(v: &Value) -> String {
    v.get("package").and_then(Value::as_str).unwrap_or_default().to_string()
}

impl Icon {
    fn node(&self) -> Node {
        Node::object(vec![
            ("base64data", Node::String(self.base64data.clone())),
            ("mediatype", Node::String(self.mediatype.clone())),
        ])
    }
}

impl Package {
    /// declcfg.Package in Go's field order (icon and description omitted when empty).
    pub fn node(&self) -> Node {
        let mut f = vec![
            ("schema", Node::String(self.schema.clone())),
            ("name", Node::String(self.name.clone())),
            ("defaultChannel", Node::String(self.default_channel.clone())),
        ];
        if let Some(icon) = &self.icon {
            f.push(("icon", icon.node()));
        }
        if !self.description.is_empty() {
            f.push(("description", Node::String(self.description.clone())));
        }
        Node::object(f)
    }
}

impl Channel {
    /// declcfg.Channel in Go's field order.
    pub fn node(&self) -> Node {
        let entries = self
            .entries
            .iter()
            .map(|e| {
                let mut f = vec![("name", Node::String(e.name.clone()))];
                if !e.replaces.is_empty() {
                    f.push(("replaces", Node::String(e.replaces.clone())));
                }
                if !e.skips.is_empty() {
                    f.push(("skips", Node::Array(e.skips.iter().map(|s| Node::String(s.clone())).collect())));
                }
                if !e.skip_range.is_empty() {
                    f.push(("skipRange", Node::String(e.skip_range.clone())));
                }
                Node::object(f)
            })
            .collect();
        Node::object(vec![
            ("schema", Node::String(self.schema.clone())),
            ("name", Node::String(self.name.clone())),
            ("package", Node::String(self.package.clone())),
            ("entries", Node::Array(entries)),
        ])
    }
}

impl Property {
    /// The value as opm holds it (a json.RawMessage built from Go types): olm.package and
    /// olm.csv.metadata in their struct field order, anything else with sorted keys.
    pub fn value_node(&self) -> Node {
        match self.type_.as_str() {
            "olm.package" => {
                let known = self
                    .value
                    .as_object()
                    .is_some_and(|m| m.keys().all(|k| matches!(k.as_str(), "packageName" | "version" | "release")));
                if !known {
                    return Node::from_value(&self.value);
                }
                let mut f = vec![
                    ("packageName", Node::from_value(&self.value["packageName"])),
                    ("version", Node::from_value(&self.value["version"])),
                ];
                if self.value.get("release").is_some_and(|r| r != "") {
                    f.push(("release", Node::from_value(&self.value["release"])));
                }
                Node::object(f)
            }
            "olm.csv.metadata" => super::csvmeta::node(&self.value).unwrap_or_else(|_| Node::from_value(&self.value)),
            _ => Node::from_value(&self.value),
        }
    }

    pub fn node(&self) -> Node {
        Node::object(vec![("type", Node::String(self.type_.clone())), ("value", self.value_node())])
    }

    /// opm's sort key for a property value: its compact JSON, without HTML escaping.
    pub fn sort_key(&self) -> String {
        self.value_node().compact(false)
    }
}

impl Bundle {
    /// declcfg.Bundle in Go's field order.
    pub fn node(&self) -> Node {
        let mut f = vec![("schema", Node::String(self.schema.clone()))];
        if !self.name.is_empty() {
            f.push(("name", Node::String(self.name.clone())));
        }
        if !self.package.is_empty() {
            f.push(("package", Node::String(self.package.clone())));
        }
        f.push(("image", Node::String(self.image.clone())));
        if !self.properties.is_empty() {
            f.push(("properties", Node::Array(self.properties.iter().map(Property::node).collect())));
        }
        if !self.related_images.is_empty() {
            let images = self
                .related_images
                .iter()
                .map(|r| {
                    Node::object(vec![("name", Node::String(r.name.clone())), ("image", Node::String(r.image.clone()))])
                })
                .collect();
            f.push(("relatedImages", Node::Array(images)));
        }
        Node::object(f)
    }
}

/// declcfg.Deprecation in Go's field order.
fn deprecation_node(d: &Value) -> Node {
    let entries = d["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let mut reference = vec![("schema", Node::from_value(&e["reference"]["schema"]))];
            if e["reference"]["name"].as_str().is_some_and(|n| !n.is_empty()) {
                reference.push(("name", Node::from_value(&e["reference"]["name"])));
            }
            Node::object(vec![("reference", Node::object(reference)), ("message", Node::from_value(&e["message"]))])
        })
        .collect();
    Node::object(vec![
        ("schema", Node::from_value(&d["schema"])),
        ("package", Node::from_value(&d["package"])),
        ("entries", Node::Array(entries)),
    ])
}

impl Catalog {
    /// Documents in opm's write order: per package (sorted) the package, its channels and
    /// its bundles (each sorted by name), its deprecations, then other schemas.
    pub fn documents(&self) -> Vec<Node> {
        let mut names: Vec<String> = self
            .packages
            .iter()
            .map(|(p, _)| p.name.clone())
            .chain(self.channels.iter().map(|(c, _)| c.package.clone()))
            .chain(self.bundles.iter().map(|(b, _)| b.package.clone()))
            .chain(self.deprecations.iter().map(|(d, _)| package_of(d)))
            .chain(self.others.iter().map(|(o, _)| package_of(o)))
            .collect();
        names.sort();
        names.dedup();
        let mut docs = Vec::new();
        for pkg in names.iter().filter(|n| !n.is_empty()) {
            docs.extend(self.packages.iter().map(|(p, _)| p).filter(|p| &p.name == pkg).map(Package::node));
            let mut channels: Vec<&Channel> =
                self.channels.iter().map(|(c, _)| c).filter(|c| &c.package == pkg).collect();
            channels.sort_by(|a, b| a.name.cmp(&b.name));
            docs.extend(channels.into_iter().map(Channel::node));
            let mut bundles: Vec<&Bundle> = self.bundles.iter().map(|(b, _)| b).filter(|b| &b.package == pkg).collect();
            bundles.sort_by(|a, b| a.name.cmp(&b.name));
            docs.extend(bundles.into_iter().map(Bundle::node));
            docs.extend(
                self.deprecations.iter().map(|(d, _)| d).filter(|d| &package_of(d) == pkg).map(deprecation_node),
            );
            let mut others: Vec<&Value> =
                self.others.iter().map(|(o, _)| o).filter(|o| &package_of(o) == pkg).collect();
            others.sort_by(|a, b| a["schema"].as_str().cmp(&b["schema"].as_str()));
            docs.extend(others.into_iter().map(Node::from_value));
        }
        docs
    }

    /// YAML as `opm … -o yaml` writes it: each document opened by `---`, converted from
    /// its JSON by yaml.v2 (see [`super::goenc`]).
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for doc in self.documents() {
            out.push_str("---\n");
            out.push_str(&doc.to_yaml());
        }
        out
    }

    /// JSON as `opm … -o json` writes it: one object per document, four-space indents,
    /// struct field order for olm.* objects, no HTML escaping.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        for doc in self.documents() {
            out.push_str(&doc.indented("    "));
            out.push('\n');
        }
        out
    }
}

/// Loads every file under `root` (any name) as a stream of YAML or JSON documents, as
/// opm does; paths listed in `.indexignore` files are skipped.
pub fn load_dir(root: &Path) -> Result<Catalog, ToolError> {
    let mut files = Vec::new();
    collect(root, &mut Vec::new(), &mut files)?;
    files.sort();
    let mut catalog = Catalog::default();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| ToolError::io(&file, e))?;
        load_text(&text, &file, &mut catalog)?;
    }
    Ok(catalog)
}

fn collect(dir: &Path, ignores: &mut Vec<(PathBuf, Vec<String>)>, out: &mut Vec<PathBuf>) -> Result<(), ToolError> {
    let ignore_file = dir.join(".indexignore");
    let pushed = ignore_file.exists();
    if pushed {
        let text = std::fs::read_to_string(&ignore_file).map_err(|e| ToolError::io(&ignore_file, e))?;
        let patterns =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect();
        ignores.push((dir.to_path_buf(), patterns));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| ToolError::io(dir, e))?;
    for entry in entries {
        let path = entry.map_err(|e| ToolError::io(dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == ".indexignore" || ignored(&path, ignores) {
            continue;
        }
        if path.is_dir() {
            collect(&path, ignores, out)?;
        } else {
            out.push(path);
        }
    }
    if pushed {
        ignores.pop();
    }
    Ok(())
}

/// The common subset of gitignore patterns: `name`, `dir/name`, `*.ext`, trailing `/`.
fn ignored(path: &Path, ignores: &[(PathBuf, Vec<String>)]) -> bool {
    ignores.iter().any(|(base, patterns)| {
        let Ok(rel) = path.strip_prefix(base) else { return false };
        let rel = rel.to_string_lossy();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        patterns.iter().any(|p| {
            let p = p.trim_end_matches('/').trim_start_matches('/');
            if let Some(ext) = p.strip_prefix('*') {
                name.ends_with(ext)
            } else if p.contains('/') {
                rel == p
            } else {
                name == p
            }
        })
    })
}

/// Parses one file's documents into `catalog`: a stream of JSON objects or of YAML
/// documents, as opm's YAML-or-JSON decoder reads them.
pub fn load_text(text: &str, file: &Path, catalog: &mut Catalog) -> Result<(), ToolError> {
    let origin = |i: usize| Origin { file: file.to_path_buf(), document: i + 1 };
    let values: Vec<Value> = if text.trim_start().starts_with('{') {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
            .map(|(i, v)| v.map_err(|e| ToolError::Invalid(format!("{}: not JSON: {e}", origin(i)))))
            .collect::<Result<_, _>>()?
    } else {
        serde_yaml::Deserializer::from_str(text)
            .enumerate()
            .map(|(i, doc)| {
                Value::deserialize(doc).map_err(|e| ToolError::Invalid(format!("{}: not YAML: {e}", origin(i))))
            })
            .collect::<Result<_, _>>()?
    };
    for (i, value) in values.into_iter().enumerate() {
        let origin = origin(i);
        if value.is_null() {
            continue;
        }
        let Some(obj) = value.as_object() else {
            return Err(ToolError::Invalid(format!("{origin}: a catalog document must be an object")));
        };
        let schema = obj
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("schema"))
            .and_then(|(_, v)| v.as_str())
            .ok_or_else(|| {
                ToolError::Invalid(format!("{origin}: object is missing root schema field (fix: add `schema: olm.package|olm.channel|olm.bundle`)"))
            })?
            .to_string();
        let typed = |what: &str, e: serde_json::Error| ToolError::Invalid(format!("{origin}: invalid {what}: {e}"));
        match schema.as_str() {
            PACKAGE => catalog.packages.push((serde_json::from_value(value).map_err(|e| typed(PACKAGE, e))?, origin)),
            CHANNEL => catalog.channels.push((serde_json::from_value(value).map_err(|e| typed(CHANNEL, e))?, origin)),
            BUNDLE => catalog.bundles.push((serde_json::from_value(value).map_err(|e| typed(BUNDLE, e))?, origin)),
            DEPRECATIONS => catalog.deprecations.push((value, origin)),
            _ => catalog.others.push((value, origin)),
        }
    }
    Ok(())
}
