//! `kubectl get`'s server-side printing: a `meta.k8s.io/v1` Table with Name, the CRD's
//! printer columns, and Age.

use serde_json::{json, Value};

use crate::resources::ResourceType;
use crate::time;

pub fn table(rt: &ResourceType, objects: &[Value], rv: u64) -> Value {
    let mut columns = vec![json!({"name": "Name", "type": "string", "format": "name", "description": "Name of the object", "priority": 0})];
    for (name, _) in &rt.printer_columns {
        columns.push(json!({"name": name, "type": "string", "format": "", "description": "", "priority": 0}));
    }
    let has_age = rt.printer_columns.iter().any(|(n, _)| n == "Age");
    if !has_age {
        columns.push(json!({"name": "Age", "type": "string", "format": "", "description": "Time since creation", "priority": 0}));
    }
    let now = time::unix_nanos() as i64 / 1_000_000_000;
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            for (name, path) in &rt.printer_columns {
                let v = json_path(o, path).cloned().unwrap_or(json!(""));
                cells.push(if name == "Age" { age(&v, now) } else { v });
            }
            if !has_age {
                cells.push(age(&o["metadata"]["creationTimestamp"], now));
            }
            json!({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv.to_string()}, "columnDefinitions": columns, "rows": rows})
}

fn age(ts: &Value, now: i64) -> Value {
    let Some(secs) = ts.as_str().and_then(time::parse) else { return json!("<unknown>") };
    let d = (now - secs).max(0);
    json!(match d {
        d if d < 120 => format!("{d}s"),
        d if d < 7200 => format!("{}m", d / 60),
        d if d < 172_800 => format!("{}h", d / 3600),
        d => format!("{}d", d / 86_400),
    })
}

/// The JSONPath subset printer columns use: `.a.b`, `[0]`, and `[?(@.key=="value")]`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("[?(@.") {
            let end = r.find(")]")?;
            let (key, want) = r[..end].split_once("==")?;
            let want = want.trim_matches(|c| c == '"' || c == '\'');
            cur = cur.as_array()?.iter().find(|item| item.get(key).and_then(Value::as_str) == Some(want))?;
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            cur = cur.get(r[..end].parse::<usize>().ok()?)?;
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_follows_fields_indexes_and_equality_filters() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"), Some(&json!("True")));
        assert_eq!(json_path(&o, ".status.conditions[0].type"), Some(&json!("A")));
        assert_eq!(json_path(&o, ".status.missing"), None);
    }
}
