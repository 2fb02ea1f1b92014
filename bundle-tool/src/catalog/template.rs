//! The semver catalog template (`schema: olm.semver`), read with opm's rules (olm.md §4.1,
//! §4.2): keys matched case-insensitively like Go's encoding/json, unknown keys and
//! duplicate keys rejected, both generate flags false meaning minor channels, and the
//! default-channel preference checked against the generated kinds.

use std::path::Path;

use serde_yaml::Value;

use crate::error::ToolError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Archetype {
    Candidate,
    Fast,
    Stable,
}

impl Archetype {
    pub const ALL: [Archetype; 3] = [Archetype::Candidate, Archetype::Fast, Archetype::Stable];

    pub fn as_str(self) -> &'static str {
        match self {
            Archetype::Candidate => "candidate",
            Archetype::Fast => "fast",
            Archetype::Stable => "stable",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChannelKind {
    Major,
    Minor,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SemverTemplate {
    pub generate_major: bool,
    pub generate_minor: bool,
    pub preference: ChannelKind,
    /// Bundle image references per archetype, as written.
    pub bundles: Vec<(Archetype, Vec<String>)>,
}

impl SemverTemplate {
    /// Every distinct image, in first-seen order (candidate, fast, stable).
    pub fn images(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for (_, images) in &self.bundles {
            for i in images {
                if !seen.contains(i) {
                    seen.push(i.clone());
                }
            }
        }
        seen
    }
}

fn err(file: &Path, field: &str, message: impl Into<String>, fix: &str) -> ToolError {
    ToolError::Field { file: file.to_path_buf(), field: field.into(), message: message.into(), fix: fix.into() }
}

/// The fields of a mapping by lower-cased key, rejecting keys not in `known`.
fn fields<'a>(
    file: &Path,
    at: &str,
    value: &'a Value,
    known: &[&'static str],
) -> Result<Vec<(&'static str, &'a Value)>, ToolError> {
    let Some(map) = value.as_mapping() else {
        return Err(err(file, at, "must be a mapping", "see catalog/operator_catalog.yaml for the shape"));
    };
    let mut out = Vec::new();
    for (k, v) in map {
        let key = k.as_str().ok_or_else(|| err(file, at, format!("key {k:?} is not a string"), "use string keys"))?;
        let Some(&name) = known.iter().find(|n| n.eq_ignore_ascii_case(key)) else {
            return Err(err(
                file,
                &format!("{at}{key}"),
                format!("json: unknown field \"{key}\""),
                &format!("known fields: {}", known.join(", ")),
            ));
        };
        // Go's decoder lets a later key that differs only in case win; so do we.
        out.retain(|(n, _)| *n != name);
        out.push((name, v));
    }
    Ok(out)
}

/// Parses the template text; `file` names it in errors.
pub fn parse(text: &str, file: &Path) -> Result<SemverTemplate, ToolError> {
    // serde_yaml refuses duplicate keys, like sigs.k8s.io/yaml's strict mode.
    let doc: Value = serde_yaml::from_str(text)
        .map_err(|e| err(file, "(document)", format!("not valid YAML: {e}"), "fix the YAML syntax"))?;
    let top = fields(
        file,
        "",
        &doc,
        &[
            "schema",
            "generateMajorChannels",
            "generateMinorChannels",
            "defaultChannelTypePreference",
            "candidate",
            "fast",
            "stable",
        ],
    )?;
    let get = |name: &str| top.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let schema = get("schema").and_then(Value::as_str).unwrap_or_default();
    if schema != "olm.semver" {
        return Err(err(
            file,
            "schema",
            format!("readFile: input file has unknown schema, should be \"olm.semver\" (found {schema:?})"),
            "set `schema: olm.semver`",
        ));
    }
    let flag = |name: &str| -> Result<bool, ToolError> {
        match get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => {
                Err(err(file, name, format!("must be true or false, found {other:?}"), "write true or false"))
            }
        }
    };
    let generate_major = flag("generateMajorChannels")?;
    let mut generate_minor = flag("generateMinorChannels")?;
    if !generate_major && !generate_minor {
        generate_minor = true;
    }
    let preference = match get("defaultChannelTypePreference").map(|v| v.as_str().unwrap_or("?")) {
        None | Some("") => {
            if generate_minor {
                ChannelKind::Minor
            } else {
                ChannelKind::Major
            }
        }
        Some("minor") if generate_minor => ChannelKind::Minor,
        Some("major") if generate_major => ChannelKind::Major,
        Some(p @ ("minor" | "major")) => {
            return Err(err(
                file,
                "defaultChannelTypePreference",
                format!("schema attribute mismatch: DefaultChannelTypePreference set to '{p}' doesn't make sense if not generating {p}-version channels"),
                &format!("set generate{}Channels: true or drop the preference", if p == "major" { "Major" } else { "Minor" }),
            ))
        }
        Some(other) => return Err(err(file, "defaultChannelTypePreference", format!("unknown DefaultChannelTypePreference: {other:?}"), "use major or minor")),
    };
    let mut bundles = Vec::new();
    for archetype in Archetype::ALL {
        let Some(section) = get(archetype.as_str()) else { continue };
        if section.is_null() {
            continue;
        }
        let section_fields = fields(file, &format!("{}.", archetype.as_str()), section, &["bundles"])?;
        let mut images = Vec::new();
        if let Some((_, list)) = section_fields.iter().find(|(n, _)| *n == "bundles") {
            let items = match list {
                Value::Null => &[][..],
                Value::Sequence(s) => s.as_slice(),
                _ => {
                    return Err(err(
                        file,
                        &format!("{}.bundles", archetype.as_str()),
                        "must be a list",
                        "write `- image: REF` items",
                    ))
                }
            };
            for (i, item) in items.iter().enumerate() {
                let at = format!("{}.bundles[{i}]", archetype.as_str());
                let item_fields = fields(file, &format!("{at}."), item, &["image"])?;
                let image =
                    item_fields.iter().find(|(n, _)| *n == "image").and_then(|(_, v)| v.as_str()).unwrap_or_default();
                if image.is_empty() {
                    return Err(err(
                        file,
                        &format!("{at}.image"),
                        "missing bundle image",
                        "write `image: registry/repo:tag`",
                    ));
                }
                images.push(image.to_string());
            }
        }
        bundles.push((archetype, images));
    }
    Ok(SemverTemplate { generate_major, generate_minor, preference, bundles })
}
