//! File-Based Catalog objects (olm.package, olm.channel, olm.bundle) with opm's field
//! order, loading a catalog directory, and writing the way `opm` does: per package the
//! package, its channels, its bundles (each sorted by name); YAML documents each opened by
//! `---` with keys sorted (opm goes through JSON to YAML), JSON with four-space indents.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
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

/// One document to write, serialised in struct field order.
#[derive(Serialize)]
#[serde(untagged)]
enum Doc<'a> {
    Package(&'a Package),
    Channel(&'a Channel),
    Bundle(&'a Bundle),
    Raw(&'a Value),
}

impl Catalog {
    /// Documents in opm's write order.
    fn documents(&self) -> Vec<Doc<'_>> {
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
            let packages = self.packages.iter().map(|(p, _)| p).filter(|p| &p.name == pkg);
            let mut channels: Vec<&Channel> = self.channels.iter().map(|(c, _)| c).filter(|c| &c.package == pkg).collect();
            channels.sort_by(|a, b| a.name.cmp(&b.name));
            let mut bundles: Vec<&Bundle> = self.bundles.iter().map(|(b, _)| b).filter(|b| &b.package == pkg).collect();
            bundles.sort_by(|a, b| a.name.cmp(&b.name));
            let mut others: Vec<&Value> = self.others.iter().map(|(o, _)| o).filter(|o| &package_of(o) == pkg).collect();
            others.sort_by(|a, b| a["schema"].as_str().cmp(&b["schema"].as_str()));
            docs.extend(packages.map(Doc::Package));
            docs.extend(channels.into_iter().map(Doc::Channel));
            docs.extend(bundles.into_iter().map(Doc::Bundle));
            docs.extend(self.deprecations.iter().map(|(d, _)| d).filter(|d| &package_of(d) == pkg).map(Doc::Raw));
            docs.extend(others.into_iter().map(Doc::Raw));
        }
        docs
    }

    /// YAML as `opm … -o yaml` writes it (through JSON, so keys come out sorted).
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for doc in self.documents() {
            out.push_str("---\n");
            let yaml = serde_yaml::to_string(&sorted(serde_json::to_value(&doc).expect("FBC objects serialise"))).expect("YAML");
            out.push_str(&go_yaml_empty_strings(&yaml));
        }
        out
    }

    /// JSON as `opm … -o json` writes it: one object per document, four-space indents,
    /// struct field order for olm.* objects.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        for doc in self.documents() {
            let mut buf = Vec::new();
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, serde_json::ser::PrettyFormatter::with_indent(b"    "));
            doc.serialize(&mut ser).expect("JSON");
            out.push_str(std::str::from_utf8(&buf).expect("UTF-8"));
            out.push('\n');
        }
        out
    }
}

/// Go's YAML writer spells the empty string `""` where serde_yaml writes `''`; rewrite
/// plain-value positions (`key: ''`, `- ''`), never lines inside block scalars.
fn go_yaml_empty_strings(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    let mut block_indent: Option<usize> = None;
    for line in yaml.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let content = line.trim_end_matches('\n');
        if let Some(parent) = block_indent {
            if content.trim().is_empty() || indent > parent {
                out.push_str(line);
                continue;
            }
            block_indent = None;
        }
        let trimmed = content.trim_end();
        let header = trimmed.rsplit_once(": ").map(|(_, v)| v).or_else(|| trimmed.trim_start().strip_prefix("- ")).unwrap_or("");
        if header.starts_with(['|', '>']) && header[1..].chars().all(|c| matches!(c, '-' | '+' | '0'..='9')) {
            block_indent = Some(indent);
        }
        match content.strip_suffix("''") {
            Some(head) if head.ends_with(": ") || head.trim_start() == "- " => {
                out.push_str(head);
                out.push_str("\"\"");
                out.push_str(&line[content.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Keys sorted at every level, whatever serde_json's map order is.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let ordered: BTreeMap<String, Value> = m.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(ordered.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
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
        let patterns = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect();
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
            .map(|(i, doc)| Value::deserialize(doc).map_err(|e| ToolError::Invalid(format!("{}: not YAML: {e}", origin(i)))))
            .collect::<Result<_, _>>()?
    };
    for (i, value) in values.into_iter().enumerate() {
        let origin = origin(i);
        if value.is_null() {
            continue;
        }
        let Some(obj) = value.as_object() else { return Err(ToolError::Invalid(format!("{origin}: a catalog document must be an object"))) };
        let schema = obj
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("schema"))
            .and_then(|(_, v)| v.as_str())
            .ok_or_else(|| ToolError::Invalid(format!("{origin}: object is missing root schema field (fix: add `schema: olm.package|olm.channel|olm.bundle`)")))?
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_strings_are_written_the_way_go_writes_them_outside_block_scalars() {
        let yaml = "a: ''\nlist:\n- ''\n- image: x\n  name: ''\ndescription: |\n  keep: ''\n  - ''\nb: ''\n";
        assert_eq!(go_yaml_empty_strings(yaml), "a: \"\"\nlist:\n- \"\"\n- image: x\n  name: \"\"\ndescription: |\n  keep: ''\n  - ''\nb: \"\"\n");
    }
}
