//! Field ownership, as server-side apply tracks it in `metadata.managedFields`.
//!
//! A field set is the set of leaf paths of an object: maps are descended into; scalars,
//! empty maps and **lists** are leaves (every list is treated as atomic — a real API server
//! merges associative lists such as `containers` by key; see the README). The set is
//! stored in `fieldsV1` form: nested `{"f:<key>": {...}}` objects, a leaf being `{}`.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

pub type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// Metadata the server owns; never part of anyone's field set.
const SERVER_METADATA: [&str; 9] =
    ["name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"];

/// The leaf paths of `obj` that a manager can own (identity and server fields left out).
pub fn leaves(obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    if let Value::Object(map) = obj {
        for (k, v) in map {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if k == "metadata" {
                if let Value::Object(meta) = v {
                    for (mk, mv) in meta.iter().filter(|(mk, _)| !SERVER_METADATA.contains(&mk.as_str())) {
                        collect(mv, &mut vec!["metadata".into(), mk.clone()], &mut out);
                    }
                }
                continue;
            }
            collect(v, &mut vec![k.clone()], &mut out);
        }
    }
    out
}

fn collect(v: &Value, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                path.push(k.clone());
                collect(child, path, out);
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

pub fn get<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.as_object()?.get(k))
}

/// Two paths overlap when one is a prefix of the other (the same field, or a map and a
/// field inside it).
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Removes the field at `path` and then every map on the way up that it left empty.
pub fn remove(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    if let Some(Value::Object(m)) = get_mut(obj, parents) {
        m.remove(last);
        if m.is_empty() && parents.len() > 1 {
            remove(obj, parents);
        }
    }
}

fn get_mut<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(obj, |v, k| v.as_object_mut()?.get_mut(k))
}

/// Sets `path` to `value`, creating maps on the way.
pub fn set(obj: &mut Value, path: &[String], value: Value) {
    let mut cur = obj;
    for k in &path[..path.len() - 1] {
        if !cur.get(k).is_some_and(Value::is_object) {
            cur[k.as_str()] = json!({});
        }
        cur = cur.get_mut(k).expect("just ensured");
    }
    cur[path[path.len() - 1].as_str()] = value;
}

/// The leaf paths whose values differ between `old` and `new` (including removed ones).
pub fn changed(old: &Value, new: &Value) -> FieldSet {
    let (a, b) = (leaves(old), leaves(new));
    a.union(&b).filter(|p| get(old, p) != get(new, p)).cloned().collect()
}

pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for k in path {
            cur = cur.entry(format!("f:{k}")).or_insert_with(|| json!({})).as_object_mut().expect("fieldsV1 nodes are objects");
        }
    }
    Value::Object(root)
}

pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(v: &Value, path: &mut Path, out: &mut FieldSet) {
        let children: Vec<(&String, &Value)> = v.as_object().map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect()).unwrap_or_default();
        if children.is_empty() {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            return;
        }
        for (k, child) in children {
            path.push(k[2..].to_string());
            walk(child, path, out);
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    walk(v, &mut vec![], &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Path {
        s.split('.').map(String::from).collect()
    }

    #[test]
    fn lists_and_empty_maps_are_leaves_and_server_metadata_is_nobodys() {
        let obj = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n", "uid": "u", "labels": {"a": "1"}},
                          "spec": {"list": [1, 2], "empty": {}, "n": 1}});
        let want: FieldSet = ["metadata.labels.a", "spec.list", "spec.empty", "spec.n"].map(p).into();
        assert_eq!(leaves(&obj), want);
    }

    #[test]
    fn fields_v1_round_trips() {
        let set: FieldSet = ["metadata.labels.a", "spec.x.y", "spec.z"].map(p).into();
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn removing_the_last_field_of_a_map_removes_the_map_but_not_the_top_level() {
        let mut obj = json!({"spec": {"a": {"b": 1}, "c": 2}});
        remove(&mut obj, &p("spec.a.b"));
        assert_eq!(obj, json!({"spec": {"c": 2}}));
    }
}
