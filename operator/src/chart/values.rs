//! Values: `values.yaml` deep-merged with the CR's `spec`, as Helm merges them.

use serde_json::Value;

/// Merges `overlay` into `base`: objects merge key by key (recursively); any other value
/// in `overlay` (lists, scalars) replaces the one in `base`. `null` in `overlay` leaves
/// `base` untouched, like an absent key.
pub fn deep_merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (_, Value::Null) => {}
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => deep_merge(slot, v),
                    None => {
                        if !v.is_null() {
                            b.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// `lowerCamelCase` → `snake_case` (`maxBatchSize` → `max_batch_size`; keys already in
/// snake_case are unchanged).
pub fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for (i, ch) in key.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_merge_recursively_and_lists_replace() {
        let mut base = json!({"a": {"x": 1, "y": [1, 2]}, "b": "keep"});
        deep_merge(&mut base, &json!({"a": {"y": [3], "z": true}}));
        assert_eq!(base, json!({"a": {"x": 1, "y": [3], "z": true}, "b": "keep"}));
    }

    #[test]
    fn null_overlay_keeps_the_default() {
        let mut base = json!({"a": 1});
        deep_merge(&mut base, &json!({"a": null, "b": null}));
        assert_eq!(base, json!({"a": 1}));
    }

    #[test]
    fn camel_case_keys_become_snake_case() {
        assert_eq!(snake_case("maxBatchSize"), "max_batch_size");
        assert_eq!(snake_case("modelName"), "model_name");
        assert_eq!(snake_case("already_snake"), "already_snake");
        assert_eq!(snake_case("internalPort"), "internal_port");
    }
}
