//! Whether one CRD can replace another on a cluster without losing or refusing what the
//! cluster holds. OLM v0 checks two things before an InstallPlan updates a CRD, and fails
//! the plan otherwise: every version in the old CRD's `status.storedVersions` is still
//! listed ("risk of data loss updating …: new CRD removes version … that is listed as a
//! stored version on the existing CRD"), and every existing object of a version served by
//! both validates against the new schema ("error validating existing CRs against new CRD's
//! schema … updated validation is too restrictive"). We check what a cluster may hold
//! without asking one: the versions an old CRD stored are those it marks as storage, and an
//! object its schema accepts must be accepted by the new one. And one more, which no OLM
//! checks: a version the old CRD served stays served (the line that reads it would stop).
//!
//! Pure: two CRDs in, the breaks out.

use std::fmt;

use serde_json::Value;

/// One way `new` would break what `old` left on a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Break {
    /// A version `old` marks as storage is not in `new`'s `spec.versions`: objects stored
    /// in it could no longer be read (OLM v0: "risk of data loss").
    StoredVersionRemoved(String),
    /// A version `old` serves is not served by `new`.
    ServedVersionDropped(String),
    /// An object `old` accepts at `version` is refused by `new` (OLM v0: "updated
    /// validation is too restrictive"). `path` is the field, `change` what changed.
    Narrowed { version: String, path: String, change: String },
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Break::StoredVersionRemoved(v) => {
                write!(
                    f,
                    "CRD version {v} was the storage version and must stay in spec.versions (it may stop being served)"
                )
            }
            Break::ServedVersionDropped(v) => write!(f, "CRD version {v} is no longer served"),
            Break::Narrowed { version, path, change } => write!(f, "{version}: {} {change}", display(path)),
        }
    }
}

impl Break {
    /// What OLM v0 does with a bundle whose CRD (named `crd`) breaks so, in its words.
    pub fn olm_v0(&self, crd: &str) -> String {
        match self {
            Break::StoredVersionRemoved(v) => format!(
                "OLM v0 fails the InstallPlan: \"risk of data loss updating {crd:?}: new CRD removes version {v} that is listed as a stored version on the existing CRD\""
            ),
            Break::Narrowed { .. } => format!(
                "OLM v0 fails the InstallPlan when an object is affected: \"error validating existing CRs against new CRD's schema for {crd:?}: … updated validation is too restrictive\""
            ),
            Break::ServedVersionDropped(v) => {
                format!("OLM installs it, and the line that serves {v} can no longer read or write its objects")
            }
        }
    }
}

/// The number of versions `crd` marks as storage (a CRD must mark exactly one).
pub fn storage_versions(crd: &Value) -> Vec<&str> {
    versions(crd).filter(|v| v["storage"] == true).filter_map(|v| v["name"].as_str()).collect()
}

/// The versions `crd` serves.
pub fn served(crd: &Value) -> Vec<&str> {
    versions(crd).filter(|v| v["served"] == true).filter_map(|v| v["name"].as_str()).collect()
}

fn versions(crd: &Value) -> impl Iterator<Item = &Value> {
    crd["spec"]["versions"].as_array().into_iter().flatten()
}

fn version<'a>(crd: &'a Value, name: &str) -> Option<&'a Value> {
    versions(crd).find(|v| v["name"] == name)
}

/// Every way `new` breaks what `old` left on a cluster (none: it may replace it).
pub fn replacing(old: &Value, new: &Value) -> Vec<Break> {
    let mut breaks = Vec::new();
    let listed: Vec<&str> = versions(new).filter_map(|v| v["name"].as_str()).collect();
    for stored in storage_versions(old) {
        if !listed.contains(&stored) {
            breaks.push(Break::StoredVersionRemoved(stored.to_string()));
        }
    }
    let now_served = served(new);
    for name in served(old) {
        if !now_served.contains(&name) {
            breaks.push(Break::ServedVersionDropped(name.to_string()));
            continue;
        }
        let schema =
            |crd: &Value| version(crd, name).map(|v| v["schema"]["openAPIV3Schema"].clone()).unwrap_or_default();
        let mut changes = Vec::new();
        narrowed(&schema(old), &schema(new), "", &mut changes);
        breaks.extend(changes.into_iter().map(|(path, change)| Break::Narrowed {
            version: name.to_string(),
            path,
            change,
        }));
    }
    breaks
}

/// What `new` refuses that `old` accepts, field by field: `(path, change)`. Conservative:
/// a validation keyword added or tightened counts even when no stored object would meet it.
fn narrowed(old: &Value, new: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let mut say = |change: String| out.push((path.to_string(), change));
    if !old["type"].is_null() && old["type"] != new["type"] {
        say(format!("changed type from {} to {}", old["type"], new["type"]));
        return;
    }
    let old_required: Vec<&Value> = old["required"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    for r in new["required"].as_array().into_iter().flatten().filter(|r| !old_required.contains(r)) {
        say(format!("gained the required field {r}"));
    }
    if old["default"] != new["default"] {
        say(format!("changed its default from {} to {}", old["default"], new["default"]));
    }
    match (old["enum"].as_array(), new["enum"].as_array()) {
        (None, Some(_)) => say("gained an enum".into()),
        (Some(o), Some(n)) => {
            for gone in o.iter().filter(|v| !n.contains(v)) {
                say(format!("no longer allows {gone}"));
            }
        }
        _ => {}
    }
    for (bound, lower) in [
        ("minimum", true),
        ("minLength", true),
        ("minItems", true),
        ("minProperties", true),
        ("maximum", false),
        ("maxLength", false),
        ("maxItems", false),
        ("maxProperties", false),
    ] {
        let tighter = match (old[bound].as_f64(), new[bound].as_f64()) {
            (None, Some(_)) => true,
            (Some(o), Some(n)) => (lower && n > o) || (!lower && n < o),
            _ => false,
        };
        if tighter {
            say(format!("tightened {bound} from {} to {}", old[bound], new[bound]));
        }
    }
    // Keywords whose every change (or addition) may refuse a value the old schema took.
    for keyword in
        ["pattern", "format", "multipleOf", "exclusiveMinimum", "exclusiveMaximum", "oneOf", "anyOf", "allOf", "not"]
    {
        if !new[keyword].is_null() && old[keyword] != new[keyword] {
            say(format!("changed {keyword} from {} to {}", old[keyword], new[keyword]));
        }
    }
    for (keyword, loosening) in [("nullable", true), ("uniqueItems", false)] {
        let (o, n) = (old[keyword].as_bool().unwrap_or(false), new[keyword].as_bool().unwrap_or(false));
        if (loosening && o && !n) || (!loosening && !o && n) {
            say(format!("changed {keyword} from {o} to {n}"));
        }
    }
    if old["x-kubernetes-list-type"] != new["x-kubernetes-list-type"]
        && matches!(new["x-kubernetes-list-type"].as_str(), Some("set" | "map"))
    {
        say(format!("became a list of type {} (duplicates refused)", new["x-kubernetes-list-type"]));
    }
    let rules = |s: &Value| s["x-kubernetes-validations"].as_array().cloned().unwrap_or_default();
    let old_rules = rules(old);
    for rule in rules(new).iter().filter(|r| !old_rules.iter().any(|o| o["rule"] == r["rule"])) {
        say(format!("gained the validation rule {}", rule["rule"]));
    }
    if old["x-kubernetes-preserve-unknown-fields"] == true && new["x-kubernetes-preserve-unknown-fields"] != true {
        say("no longer preserves unknown fields (they would be pruned)".into());
    }
    if let Some(props) = old["properties"].as_object() {
        for (k, sub) in props {
            let p = format!("{path}.{k}");
            match new["properties"].get(k) {
                None => out.push((p, "was removed".into())),
                Some(n) => narrowed(sub, n, &p, out),
            }
        }
    }
    if old["items"].is_object() {
        narrowed(&old["items"], &new["items"], &format!("{path}[]"), out);
    }
    if old["additionalProperties"].is_object() {
        narrowed(&old["additionalProperties"], &new["additionalProperties"], &format!("{path}.*"), out);
    }
}

fn display(path: &str) -> &str {
    if path.is_empty() {
        "(root)"
    } else {
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(versions: Value) -> Value {
        json!({"spec": {"versions": versions}})
    }

    fn version(name: &str, served: bool, storage: bool, schema: Value) -> Value {
        json!({"name": name, "served": served, "storage": storage, "schema": {"openAPIV3Schema": schema}})
    }

    fn object(properties: Value) -> Value {
        json!({"type": "object", "properties": properties})
    }

    #[test]
    fn the_same_crd_replaces_itself() {
        let c = crd(json!([version("v1", true, true, object(json!({"a": {"type": "string"}})))]));
        assert_eq!(replacing(&c, &c), vec![]);
    }

    #[test]
    fn dropping_the_storage_version_loses_what_is_stored_in_it() {
        let old =
            crd(json!([version("v1", true, true, object(json!({}))), version("v2", true, false, object(json!({})))]));
        let new = crd(json!([version("v2", true, true, object(json!({})))]));
        assert_eq!(
            replacing(&old, &new),
            vec![Break::StoredVersionRemoved("v1".into()), Break::ServedVersionDropped("v1".into())]
        );
    }

    #[test]
    fn a_storage_version_kept_listed_but_not_served_only_stops_serving() {
        let old = crd(json!([version("v1", true, true, object(json!({})))]));
        let new =
            crd(json!([version("v1", false, false, object(json!({}))), version("v2", true, true, object(json!({})))]));
        assert_eq!(replacing(&old, &new), vec![Break::ServedVersionDropped("v1".into())]);
    }

    #[test]
    fn a_new_required_field_refuses_the_objects_already_there() {
        let old =
            crd(json!([version("v1", true, true, object(json!({"spec": object(json!({"a": {"type": "string"}}))})))]));
        let mut new = old.clone();
        new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] = json!(["a"]);
        assert_eq!(
            replacing(&old, &new),
            vec![Break::Narrowed {
                version: "v1".into(),
                path: ".spec".into(),
                change: "gained the required field \"a\"".into()
            }]
        );
    }

    #[test]
    fn a_new_pattern_a_new_rule_and_a_removed_field_each_narrow() {
        let old =
            crd(json!([version("v1", true, true, object(json!({"a": {"type": "string"}, "b": {"type": "string"}})))]));
        let new = crd(json!([version(
            "v1",
            true,
            true,
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "has(self.a)"}],
                "properties": {"a": {"type": "string", "pattern": "^x$"}}})
        )]));
        let changes: Vec<String> = replacing(&old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(
            changes,
            [
                "v1: (root) gained the validation rule \"has(self.a)\"",
                "v1: .a changed pattern from null to \"^x$\"",
                "v1: .b was removed",
            ]
        );
    }

    #[test]
    fn a_loosened_schema_replaces_the_old_one() {
        let old = crd(json!([version(
            "v1",
            true,
            true,
            object(json!({"a": {"type": "string", "maxLength": 3, "enum": ["x"]}}))
        )]));
        let new = crd(json!([version(
            "v1",
            true,
            true,
            object(json!({"a": {"type": "string", "maxLength": 9, "enum": ["x", "y"]}, "b": {"type": "integer"}}))
        )]));
        assert_eq!(replacing(&old, &new), vec![]);
    }
}
