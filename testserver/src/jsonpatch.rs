//! RFC 6902 JSON patch: add, remove, replace and test (what clients such as kube-runtime's
//! finalizer helper send).

use serde_json::Value;

pub fn apply(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let ops = patch.as_array().ok_or("a JSON patch is an array of operations")?;
    for op in ops {
        let path = op["path"].as_str().ok_or("every operation needs a path")?;
        let tokens: Vec<String> = path.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
        match op["op"].as_str() {
            Some("test") => {
                if pointer(doc, &tokens) != Some(&op["value"]) {
                    return Err(format!("test operation failed at {path}"));
                }
            }
            Some("remove") => {
                remove(doc, &tokens).ok_or_else(|| format!("remove: no value at {path}"))?;
            }
            Some("add") => add(doc, &tokens, op["value"].clone(), false).ok_or_else(|| format!("add: cannot add at {path}"))?,
            Some("replace") => add(doc, &tokens, op["value"].clone(), true).ok_or_else(|| format!("replace: no value at {path}"))?,
            other => return Err(format!("unsupported JSON patch operation {other:?}")),
        }
    }
    Ok(())
}

fn pointer<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get(t),
        Value::Array(a) => a.get(t.parse::<usize>().ok()?),
        _ => None,
    })
}

fn parent<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get_mut(t),
        Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?),
        _ => None,
    })
}

fn remove(doc: &mut Value, tokens: &[String]) -> Option<Value> {
    let (last, init) = tokens.split_last()?;
    match parent(doc, init)? {
        Value::Object(m) => m.remove(last),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok().filter(|i| *i < a.len())?;
            Some(a.remove(i))
        }
        _ => None,
    }
}

fn add(doc: &mut Value, tokens: &[String], value: Value, replace: bool) -> Option<()> {
    let Some((last, init)) = tokens.split_last() else {
        *doc = value;
        return Some(());
    };
    match parent(doc, init)? {
        Value::Object(m) => {
            if replace && !m.contains_key(last) {
                return None;
            }
            m.insert(last.clone(), value);
        }
        Value::Array(a) if last == "-" && !replace => a.push(value),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok()?;
            if replace {
                *a.get_mut(i)? = value;
            } else if i <= a.len() {
                a.insert(i, value);
            } else {
                return None;
            }
        }
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn test_then_remove_a_finalizer() {
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        super::apply(&mut doc, &json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "a"}, {"op": "remove", "path": "/metadata/finalizers/0"}]))
            .unwrap();
        assert_eq!(doc, json!({"metadata": {"finalizers": ["b"]}}));
    }

    #[test]
    fn a_failed_test_is_an_error() {
        let mut doc = json!({"a": 1});
        assert!(super::apply(&mut doc, &json!([{"op": "test", "path": "/a", "value": 2}])).is_err());
    }
}
