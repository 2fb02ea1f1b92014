//! Reading a ModelOrchestra strictly: YAML or JSON in, a typed resource out, or an error
//! that names the field. Unknown fields are errors (a typo must not be silently ignored),
//! except under `readerConfig` and `gateway.config`, which keep unknown keys by design.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{ModelOrchestra, GROUP, KIND, VERSION};
use crate::error::InputError;

/// Parses one ModelOrchestra document (YAML, of which JSON is a subset).
pub fn parse_model_orchestra(text: &str) -> Result<ModelOrchestra, InputError> {
    let value: Value =
        serde_yaml::from_str(text).map_err(|e| InputError::new("(document)", format!("not valid YAML: {e}")))?;
    from_value(&value)
}

/// Checks `apiVersion`/`kind` and deserialises strictly.
pub fn from_value(value: &Value) -> Result<ModelOrchestra, InputError> {
    let Some(obj) = value.as_object() else {
        return Err(InputError::new("(document)", "expected a ModelOrchestra object"));
    };
    let expected_api = format!("{GROUP}/{VERSION}");
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v == expected_api => {}
        other => {
            return Err(InputError::new("apiVersion", format!("expected `{expected_api}`, found {}", describe(other))))
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some(KIND) => {}
        other => return Err(InputError::new("kind", format!("expected `{KIND}`, found {}", describe(other)))),
    }
    // The derived root type handles apiVersion/kind itself, so metadata and spec are read
    // strictly one by one (status is the operator's and is not checked).
    let metadata =
        strict_from_value(obj.get("metadata").unwrap_or(&Value::Null)).map_err(|e| e.prefixed("metadata"))?;
    let spec = match obj.get("spec") {
        None | Some(Value::Null) => Default::default(),
        Some(spec) => strict_from_value(spec).map_err(|e| e.prefixed("spec"))?,
    };
    if let Some(key) = obj.keys().find(|k| !["apiVersion", "kind", "metadata", "spec", "status"].contains(&k.as_str()))
    {
        return Err(InputError::new(
            key.as_str(),
            "unknown field; a ModelOrchestra has apiVersion, kind, metadata and spec",
        ));
    }
    let mut mo = ModelOrchestra::new("", spec);
    mo.metadata = metadata;
    Ok(mo)
}

/// A ModelOrchestra of any version this binary renders (boxed: the typed specs are large).
#[derive(Debug, Clone)]
pub enum Versioned {
    V1alpha1(Box<ModelOrchestra>),
    V1alpha2(Box<crate::api::v1alpha2::ModelOrchestra>),
}

/// Parses one ModelOrchestra document of any version this binary renders, by its
/// `apiVersion`.
pub fn parse_versioned(text: &str) -> Result<Versioned, InputError> {
    let value: Value =
        serde_yaml::from_str(text).map_err(|e| InputError::new("(document)", format!("not valid YAML: {e}")))?;
    versioned_from_value(&value)
}

/// Checks `apiVersion`/`kind` and deserialises strictly as the version `apiVersion` names.
pub fn versioned_from_value(value: &Value) -> Result<Versioned, InputError> {
    let v1alpha2 = format!("{GROUP}/{}", crate::api::v1alpha2::VERSION);
    match value.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v == v1alpha2 => {
            let mut plain = value.clone();
            plain["apiVersion"] = Value::String(format!("{GROUP}/{VERSION}"));
            // Same envelope rules as v1alpha1 (kind, metadata, no other top-level field)...
            let envelope = from_value(&Value::Object(
                plain
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| *k != "spec")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ))?;
            // ...and the spec read strictly as v1alpha2.
            let spec = match value.get("spec") {
                None | Some(Value::Null) => Default::default(),
                Some(spec) => strict_from_value(spec).map_err(|e| e.prefixed("spec"))?,
            };
            let mut mo = crate::api::v1alpha2::ModelOrchestra::new("", spec);
            mo.metadata = envelope.metadata;
            Ok(Versioned::V1alpha2(Box::new(mo)))
        }
        Some(v) if v == format!("{GROUP}/{VERSION}") => from_value(value).map(|mo| Versioned::V1alpha1(Box::new(mo))),
        other => Err(InputError::new(
            "apiVersion",
            format!("expected `{GROUP}/{VERSION}` or `{v1alpha2}`, found {}", describe(other)),
        )),
    }
}

fn describe(found: Option<&str>) -> String {
    found.map_or_else(|| "nothing".to_string(), |s| format!("`{s}`"))
}

/// Deserialises `value` as `T`; an unknown field or a type error becomes an [`InputError`]
/// naming the field's path.
pub fn strict_from_value<T: DeserializeOwned>(value: &Value) -> Result<T, InputError> {
    let mut unknown: Option<String> = None;
    let mut on_unknown = |path: serde_ignored::Path<'_>| {
        // serde_ignored writes `?` for each Option it passes through; users see none.
        unknown.get_or_insert_with(|| path.to_string().split('.').filter(|s| *s != "?").collect::<Vec<_>>().join("."));
    };
    let ignored = serde_ignored::Deserializer::new(value, &mut on_unknown);
    let parsed = serde_path_to_error::deserialize(ignored);
    match parsed {
        Err(e) => {
            let path = e.path().to_string();
            let field = if path == "." { String::new() } else { path };
            Err(InputError::new(field, e.into_inner().to_string()))
        }
        Ok(v) => match unknown {
            Some(path) => Err(InputError::new(path, "unknown field; check its spelling against the values reference")),
            None => Ok(v),
        },
    }
}
