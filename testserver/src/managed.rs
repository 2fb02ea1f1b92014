//! `metadata.managedFields`: who owns which fields, updated by applies (with conflict
//! detection) and by ordinary writes (which take ownership of what they change).

use serde_json::{json, Value};

use crate::fields::{self, FieldSet};

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager && self.operation == operation && self.subresource.as_deref() == subresource
    }
}

/// A field another manager owns with a different value than an apply wants.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    pub path: String,
}

pub fn read(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or_default().into(),
                    operation: e["operation"].as_str().unwrap_or("Update").into(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
                    time: e["time"].as_str().unwrap_or_default().into(),
                    subresource: e["subresource"].as_str().map(String::from),
                    fields: fields::from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn write(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": fields::to_fields_v1(&e.fields),
            });
            if let Some(s) = &e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    obj["metadata"]["managedFields"] = Value::Array(list);
}

/// An ordinary write (create, update, merge patch) by `manager`: it takes ownership of
/// every field it changed, and every other manager loses those fields.
pub fn record_update(entries: &mut Vec<Entry>, manager: &str, subresource: Option<&str>, api_version: &str, now: &str, old: &Value, new: &Value) {
    let changed = fields::changed(old, new);
    if changed.is_empty() {
        return;
    }
    for e in entries.iter_mut() {
        e.fields.retain(|p| !changed.iter().any(|c| fields::overlaps(c, p)));
    }
    let present: FieldSet = changed.into_iter().filter(|p| fields::get(new, p).is_some()).collect();
    if !present.is_empty() {
        let entry = entry_mut(entries, manager, "Update", subresource, api_version);
        entry.fields.extend(present);
        entry.time = now.into();
    }
    entries.retain(|e| !e.fields.is_empty());
}

/// Server-side apply of `applied` (already restricted to the fields the endpoint may touch)
/// onto `live`. Returns the merged object; `entries` is updated. Without `force`, a field
/// another manager owns with a different value is a conflict and nothing changes.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    entries: &mut Vec<Entry>,
    live: &Value,
    applied: &Value,
    manager: &str,
    subresource: Option<&str>,
    api_version: &str,
    now: &str,
    force: bool,
) -> Result<Value, Vec<Conflict>> {
    let wanted = fields::leaves(applied);
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !e.is(manager, "Apply", subresource)) {
        for q in &wanted {
            if e.fields.iter().any(|p| clash(p, q, live, applied)) {
                conflicts.push(Conflict { manager: e.manager.clone(), api_version: e.api_version.clone(), path: format!(".{}", q.join(".")) });
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    if force {
        for e in entries.iter_mut().filter(|e| !e.is(manager, "Apply", subresource)) {
            e.fields.retain(|p| !wanted.iter().any(|q| clash(p, q, live, applied)));
        }
    }
    let previous = entries.iter().find(|e| e.is(manager, "Apply", subresource)).map(|e| e.fields.clone()).unwrap_or_default();
    let mut merged = live.clone();
    for p in previous.difference(&wanted) {
        let owned_by_other = entries.iter().filter(|e| !e.is(manager, "Apply", subresource)).any(|e| e.fields.iter().any(|o| fields::overlaps(o, p)));
        if !owned_by_other {
            fields::remove(&mut merged, p);
        }
    }
    for q in &wanted {
        let value = fields::get(applied, q).cloned().unwrap_or(Value::Null);
        // An empty map in an applied config claims the map, not the absence of its keys.
        if is_empty_map(&value) && fields::get(&merged, q).is_some_and(Value::is_object) {
            continue;
        }
        fields::set(&mut merged, q, value);
    }
    let changed = !fields::changed(live, &merged).is_empty() || previous != wanted;
    let entry = entry_mut(entries, manager, "Apply", subresource, api_version);
    entry.fields = wanted;
    if changed || entry.time.is_empty() {
        entry.time = now.into();
    }
    entries.retain(|e| !e.fields.is_empty());
    Ok(merged)
}

fn is_empty_map(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.is_empty())
}

/// Whether another manager's field `owned` stops this apply from setting `wanted` as given.
fn clash(owned: &[String], wanted: &[String], live: &Value, applied: &Value) -> bool {
    if !fields::overlaps(owned, wanted) {
        return false;
    }
    let want = fields::get(applied, wanted);
    if want.is_some_and(is_empty_map) {
        return false;
    }
    if owned.len() < wanted.len() {
        // The other manager owns a leaf above: only an empty map there can take children.
        return !fields::get(live, owned).is_some_and(is_empty_map);
    }
    // Same field, or a map whose field the other manager owns: a different value clashes.
    fields::get(live, wanted) != want
}

fn entry_mut<'a>(entries: &'a mut Vec<Entry>, manager: &str, operation: &str, subresource: Option<&str>, api_version: &str) -> &'a mut Entry {
    let i = match entries.iter().position(|e| e.is(manager, operation, subresource)) {
        Some(i) => i,
        None => {
            entries.push(Entry {
                manager: manager.into(),
                operation: operation.into(),
                api_version: api_version.into(),
                time: String::new(),
                subresource: subresource.map(String::from),
                fields: FieldSet::new(),
            });
            entries.len() - 1
        }
    };
    entries[i].api_version = api_version.into();
    &mut entries[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn a_second_manager_changing_an_owned_field_conflicts_unless_forced() {
        let mut entries = vec![];
        let live = apply(&mut entries, &json!({}), &json!({"spec": {"replicas": 1}}), "a", None, "v1", NOW, false).unwrap();
        let err = apply(&mut entries, &live, &json!({"spec": {"replicas": 2}}), "b", None, "v1", NOW, false).unwrap_err();
        assert_eq!(err[0].manager, "a");
        assert_eq!(err[0].path, ".spec.replicas");
        let forced = apply(&mut entries, &live, &json!({"spec": {"replicas": 2}}), "b", None, "v1", NOW, true).unwrap();
        assert_eq!(forced["spec"]["replicas"], 2);
        assert_eq!(entries.len(), 1, "a lost its only field: {entries:?}");
        assert_eq!(entries[0].manager, "b");
    }

    #[test]
    fn the_same_value_is_shared_not_a_conflict() {
        let mut entries = vec![];
        let live = apply(&mut entries, &json!({}), &json!({"spec": {"x": 1}}), "a", None, "v1", NOW, false).unwrap();
        apply(&mut entries, &live, &json!({"spec": {"x": 1}}), "b", None, "v1", NOW, false).unwrap();
        assert_eq!(entries.len(), 2);
    }

    #[test]
    fn a_field_dropped_from_the_applied_config_is_removed_unless_someone_else_owns_it() {
        let mut entries = vec![];
        let live = apply(&mut entries, &json!({}), &json!({"data": {"a": "1", "b": "2"}}), "a", None, "v1", NOW, false).unwrap();
        let live = apply(&mut entries, &live, &json!({"data": {"b": "2"}}), "other", None, "v1", NOW, false).unwrap();
        let live = apply(&mut entries, &live, &json!({"data": {}}), "a", None, "v1", NOW, false).unwrap();
        assert_eq!(live, json!({"data": {"b": "2"}}));
    }

    #[test]
    fn updates_take_ownership_of_what_they_change() {
        let mut entries = vec![];
        let live = apply(&mut entries, &json!({}), &json!({"spec": {"replicas": 1}}), "a", None, "v1", NOW, false).unwrap();
        let edited = json!({"spec": {"replicas": 3}});
        record_update(&mut entries, "kubectl-edit", None, "v1", NOW, &live, &edited);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].manager, "kubectl-edit");
    }
}
