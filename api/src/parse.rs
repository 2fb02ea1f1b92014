//! Reading a ModelOrchestra strictly: YAML or JSON in, its version, metadata and spec out,
//! or errors that name every field at fault. Unknown fields are errors (a typo must not be
//! silently ignored), except under `readerConfig` and `gateway.config`, which keep unknown
//! keys by design.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{InputError, InputErrors};
use crate::{ApiVersion, GROUP, KIND};

/// A ModelOrchestra document: its envelope read, its spec not yet (that takes its version's
/// types, [`strict`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub api_version: ApiVersion,
    pub metadata: ObjectMeta,
    /// `spec` as written (`{}` when absent).
    pub spec: Value,
}

impl Document {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

/// Parses one ModelOrchestra document (YAML, of which JSON is a subset).
pub fn document_from_yaml(text: &str) -> Result<Document, InputErrors> {
    let value: Value =
        serde_yaml::from_str(text).map_err(|e| InputError::new("(document)", format!("not valid YAML: {e}")))?;
    document(&value)
}

/// Checks `apiVersion`, `kind`, the metadata and that nothing else is at the top level.
pub fn document(value: &Value) -> Result<Document, InputErrors> {
    let Some(obj) = value.as_object() else {
        return Err(InputError::new("(document)", "expected a ModelOrchestra object").into());
    };
    let versions: Vec<String> = ApiVersion::ALL.iter().map(|v| format!("`{}`", v.api_version())).collect();
    let found = obj.get("apiVersion").and_then(Value::as_str);
    let Some(api_version) = found.and_then(ApiVersion::from_api_version) else {
        let message = format!("expected {}, found {}", versions.join(" or "), describe(found));
        return Err(InputError::new("apiVersion", message).into());
    };
    let mut errors = Vec::new();
    match obj.get("kind").and_then(Value::as_str) {
        Some(KIND) => {}
        other => errors.push(InputError::new("kind", format!("expected `{KIND}`, found {}", describe(other)))),
    }
    for key in obj.keys().filter(|k| !["apiVersion", "kind", "metadata", "spec", "status"].contains(&k.as_str())) {
        let message = format!("unknown field; a {KIND} ({GROUP}) has apiVersion, kind, metadata and spec");
        errors.push(InputError::new(key.as_str(), message));
    }
    let metadata = match strict::<ObjectMeta>(obj.get("metadata").unwrap_or(&Value::Null)) {
        Ok(m) => m,
        Err(e) => {
            errors.extend(e.prefixed("metadata").into_vec());
            ObjectMeta::default()
        }
    };
    InputErrors::check(errors)?;
    let spec = match obj.get("spec") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(spec) => spec.clone(),
    };
    Ok(Document { api_version, metadata, spec })
}

fn describe(found: Option<&str>) -> String {
    found.map_or_else(|| "nothing".to_string(), |s| format!("`{s}`"))
}

/// Deserialises `value` as `T`. Every unknown field becomes an error naming its path; a
/// type error (serde stops at the first) is one more.
pub fn strict<T: DeserializeOwned>(value: &Value) -> Result<T, InputErrors> {
    let mut unknown: Vec<String> = Vec::new();
    let mut on_unknown = |path: serde_ignored::Path<'_>| {
        // serde_ignored writes `?` for each Option it passes through; users see none.
        unknown.push(path.to_string().split('.').filter(|s| *s != "?").collect::<Vec<_>>().join("."));
    };
    let ignored = serde_ignored::Deserializer::new(value, &mut on_unknown);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(ignored);
    let mut errors: Vec<InputError> = unknown
        .into_iter()
        .map(|path| InputError::new(path, "unknown field; check its spelling against the values reference"))
        .collect();
    match parsed {
        Ok(v) if errors.is_empty() => Ok(v),
        Ok(_) => Err(InputErrors::check(errors).unwrap_err()),
        Err(e) => {
            let path = e.path().to_string();
            let field = if path == "." { String::new() } else { path };
            errors.push(InputError::new(field, e.into_inner().to_string()));
            Err(InputErrors::check(errors).unwrap_err())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_names_its_version_metadata_and_spec() {
        let d = document_from_yaml(
            "apiVersion: models.titanml.co/v1alpha2\nkind: ModelOrchestra\nmetadata: {name: a}\nspec: {x: 1}",
        )
        .unwrap();
        assert_eq!(d.api_version, ApiVersion::V1alpha2);
        assert_eq!(d.name(), "a");
        assert_eq!(d.spec, serde_json::json!({"x": 1}));
    }

    #[test]
    fn an_unknown_api_version_names_the_versions_there_are() {
        let e = document_from_yaml("apiVersion: models.titanml.co/v9\nkind: ModelOrchestra").unwrap_err();
        assert_eq!(
            e.to_string(),
            "apiVersion: expected `models.titanml.co/v1alpha1` or `models.titanml.co/v1alpha2`, found `models.titanml.co/v9`"
        );
    }

    #[test]
    fn every_mistake_of_the_envelope_is_reported() {
        let e =
            document_from_yaml("apiVersion: models.titanml.co/v1alpha1\nkind: Other\nspecs: {}\nmetadata: {nam: a}")
                .unwrap_err();
        let fields: Vec<&str> = e.errors().iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["kind", "specs", "metadata.nam"]);
    }

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Two {
        a: Option<i32>,
        z: Option<i32>,
    }

    #[test]
    fn every_unknown_field_is_an_error_and_a_type_error_one_more() {
        let e = strict::<Two>(&serde_json::json!({"x": 1, "y": 2, "z": "text"})).unwrap_err();
        let fields: Vec<&str> = e.errors().iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["x", "y", "z"]);
    }
}
