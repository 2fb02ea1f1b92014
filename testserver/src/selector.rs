//! Label selectors (`a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`) and the field
//! selectors clients use (`metadata.name`, `metadata.namespace`, with `=`/`==`/`!=`).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().into())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, set)) = split_set(part, " notin ") {
                Requirement::NotIn(k, set)
            } else if let Some((k, set)) = split_set(part, " in ") {
                Requirement::In(k, set)
            } else if part.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
                Requirement::Exists(part.into())
            } else {
                return Err(format!("unable to parse requirement: {part:?}"));
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, set) => get(k).is_some_and(|x| set.iter().any(|s| s == x)),
            Requirement::NotIn(k, set) => !get(k).is_some_and(|x| set.iter().any(|s| s == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

/// Splits at commas that are not inside `( … )`.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn split_set(part: &str, op: &str) -> Option<(String, Vec<String>)> {
    let (k, rest) = part.split_once(op)?;
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some((k.trim().into(), inner.split(',').map(|s| s.trim().to_string()).collect()))
}

/// A field selector on `metadata.name` / `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!("invalid field selector: {part:?}"));
            };
            if !matches!(field, "metadata.name" | "metadata.namespace") {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push((field.to_string(), equal, value.to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = match field.as_str() {
                "metadata.name" => obj["metadata"]["name"].as_str(),
                _ => obj["metadata"]["namespace"].as_str(),
            }
            .unwrap_or_default();
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn equality_and_existence_requirements_all_apply() {
        let s = LabelSelector::parse("app=a,!gone,tier").unwrap();
        assert!(s.matches(&obj(json!({"app": "a", "tier": "x"}))));
        assert!(!s.matches(&obj(json!({"app": "a"}))));
        assert!(!s.matches(&obj(json!({"app": "a", "tier": "x", "gone": "y"}))));
    }

    #[test]
    fn set_requirements_split_only_at_top_level_commas() {
        let s = LabelSelector::parse("v in (v1,v2),w notin (z)").unwrap();
        assert!(s.matches(&obj(json!({"v": "v2"}))));
        assert!(!s.matches(&obj(json!({"v": "v3"}))));
        assert!(!s.matches(&obj(json!({"v": "v1", "w": "z"}))));
    }

    #[test]
    fn field_selectors_match_name_and_reject_other_fields() {
        assert!(FieldSelector::parse("metadata.name=x").unwrap().matches(&obj(json!({}))));
        assert!(!FieldSelector::parse("metadata.name!=x").unwrap().matches(&obj(json!({}))));
        assert!(FieldSelector::parse("spec.x=1").is_err());
    }
}
