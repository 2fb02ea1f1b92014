//! The JSON merge patch (RFC 7386) between two documents: how the status is written
//! (see `controller::report` for why not server-side apply).

use serde_json::{Map, Value};

/// The merge patch that turns `from` into `to`: changed and new keys as in `to`, keys `to`
/// lacks set to null; objects compared key by key, anything else replaced.
pub(crate) fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = Map::new();
            for (k, v) in b {
                match a.get(k) {
                    Some(old) if old == v => {}
                    Some(old) => {
                        patch.insert(k.clone(), merge_patch(old, v));
                    }
                    None => {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                patch.insert(k.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        (_, to) => to.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_merge_patch_sets_what_changed_and_nulls_what_is_gone() {
        let from = json!({"a": 1, "b": {"c": 1, "d": 2}, "e": [1], "gone": true});
        let to = json!({"a": 1, "b": {"c": 3}, "e": [2], "new": "x"});
        assert_eq!(merge_patch(&from, &to), json!({"b": {"c": 3, "d": null}, "e": [2], "new": "x", "gone": null}));
    }

    #[test]
    fn a_merge_patch_from_nothing_is_the_whole_document() {
        let to = json!({"a": {"b": 1}});
        assert_eq!(merge_patch(&Value::Null, &to), to);
    }

    #[test]
    fn a_merge_patch_between_equal_documents_is_empty() {
        let same = json!({"a": {"b": [1, 2]}});
        assert_eq!(merge_patch(&same, &same), json!({}));
    }
}
