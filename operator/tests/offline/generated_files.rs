//! Checked-in generated files are up to date, and the CRD schema is structural (what a
//! real API server requires of a v1 CRD).

use model_orchestra_api::crd;
use model_orchestra_api::ApiVersion;
use serde_json::Value;

fn repo_file(path: &str) -> String {
    let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

#[test]
fn checked_in_crd_is_up_to_date() {
    assert!(
        repo_file("config/crd/models.titanml.co_modelorchestras.yaml") == crd::crd_yaml(),
        "config/crd is stale: run `make generate`"
    );
}

#[test]
fn every_released_crd_version_is_generated_byte_for_byte_as_released() {
    // A released version is frozen: objects stored in it, and clients written against it,
    // must read the same. bundles/crds holds the CRD each release installed.
    let generated: Value = serde_json::to_value(crd::crd()).unwrap();
    let dir = format!("{}/../bundles/crds", env!("CARGO_MANIFEST_DIR"));
    let mut releases: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    releases.sort();
    assert!(!releases.is_empty(), "{dir} holds the released CRDs");
    for release in releases {
        let released: Value = serde_yaml::from_str(&std::fs::read_to_string(&release).unwrap()).unwrap();
        for version in released["spec"]["versions"].as_array().unwrap() {
            let name = version["name"].as_str().unwrap();
            let current = generated["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == name);
            let current =
                current.unwrap_or_else(|| panic!("{}: version {name} is no longer in the CRD", release.display()));
            assert!(
                serde_yaml::to_string(&current["schema"]).unwrap()
                    == serde_yaml::to_string(&version["schema"]).unwrap(),
                "{}: the schema of {name} changed; released versions are frozen (add a version instead)",
                release.display()
            );
            for field in ["subresources", "additionalPrinterColumns"] {
                assert_eq!(current[field], version[field], "{}: {name}'s {field} changed", release.display());
            }
        }
    }
}

#[test]
fn checked_in_values_schema_is_up_to_date() {
    assert!(
        repo_file("charts/model-orchestra/values.schema.json") == crd::values_schema_json(ApiVersion::V1alpha1),
        "values.schema.json is stale: run `make generate`"
    );
    assert!(
        repo_file("charts/model-orchestra-1.0/values.schema.json") == crd::values_schema_json(ApiVersion::V1alpha2),
        "charts/model-orchestra-1.0/values.schema.json is stale: run `make generate`"
    );
}

#[test]
fn checked_in_cluster_role_is_up_to_date() {
    assert!(
        repo_file("config/rbac/role.yaml")
            == model_orchestra_api::deploy::rbac::cluster_role_yaml("model-orchestra-operator"),
        "config/rbac/role.yaml is stale: run `make generate`"
    );
}

#[test]
fn checked_in_deploy_manifests_are_up_to_date() {
    let options = model_orchestra_api::deploy::operator::DeployOptions {
        namespace: "model-orchestra-system".into(),
        image: concat!("ghcr.io/titanml/model-orchestra-operator:", env!("CARGO_PKG_VERSION")).into(),
        routing: model_orchestra_api::lines::default_routing(env!("CARGO_PKG_VERSION"), ApiVersion::V1alpha1),
        claim_unlabeled: true,
        api_version: None,
        release: None,
    };
    assert!(
        repo_file("config/deploy/operator.yaml") == model_orchestra_api::deploy::operator::all_yaml(&options),
        "config/deploy/operator.yaml is stale: run `make generate`"
    );
}

#[test]
fn crd_names_group_version_short_name_and_printer_columns() {
    let crd = serde_json::to_value(crd::crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "modelorchestras.models.titanml.co");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["shortNames"], serde_json::json!(["mo"]));
    let versions = crd["spec"]["versions"].as_array().unwrap();
    let mut names: Vec<(&str, bool, bool)> = versions
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["served"].as_bool().unwrap(), v["storage"].as_bool().unwrap()))
        .collect();
    names.sort();
    assert_eq!(names, [("v1alpha1", true, false), ("v1alpha2", true, true)], "both served, v1alpha2 stored");
    assert!(crd["spec"].get("conversion").is_none_or(|c| c["strategy"] == "None"));
    for version in versions {
        assert_eq!(version["subresources"]["status"], serde_json::json!({}));
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        // kubectl reads the preferred (newest) version: its columns say which line serves
        // the CR and whether it reconciled the latest generation. v1alpha1's are frozen.
        let want: &[&str] = match version["name"].as_str().unwrap() {
            "v1alpha1" => &["Ready", "Applications", "Age"],
            _ => &["Ready", "Applications", "Models", "Asleep", "Line", "Served-As", "Generation", "Observed", "Age"],
        };
        assert_eq!(columns, want);
    }
}

#[test]
fn the_stored_version_keeps_every_field_of_v1alpha1() {
    // Conversion is None: an object written as v1alpha1 is stored as v1alpha2, pruned to
    // v1alpha2's schema. Every field v1alpha1 has must be there too.
    let crd = serde_json::to_value(crd::crd()).unwrap();
    let schema = |name: &str| {
        let versions = crd["spec"]["versions"].as_array().unwrap();
        versions.iter().find(|v| v["name"] == name).unwrap()["schema"]["openAPIV3Schema"].clone()
    };
    let mut missing = Vec::new();
    fields_missing(&schema("v1alpha1"), &schema("v1alpha2"), "", &mut missing);
    assert!(missing.is_empty(), "v1alpha2 cannot store: {missing:?}");
}

/// The property paths of `old` that `new` does not have.
fn fields_missing(old: &Value, new: &Value, path: &str, missing: &mut Vec<String>) {
    if new.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    if let Some(Value::Object(props)) = old.get("properties") {
        for (k, v) in props {
            match new["properties"].get(k) {
                Some(n) => fields_missing(v, n, &format!("{path}.{k}"), missing),
                None => missing.push(format!("{path}.{k}")),
            }
        }
    }
    for key in ["additionalProperties", "items"] {
        if let Some(v @ Value::Object(_)) = old.get(key) {
            fields_missing(v, &new[key], &format!("{path}.{key}"), missing);
        }
    }
}

/// The rules of a structural schema (Kubernetes "Specifying a structural schema"): every
/// node has a type unless int-or-string or preserve-unknown-fields; no `$ref`,
/// `definitions`; `additionalProperties` and `properties` never together; logical
/// junctors carry no types or defaults; no spec-wide preserve-unknown-fields.
fn check_structural(node: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(map) = node.as_object() else { return };
    for forbidden in ["$ref", "definitions", "$schema", "patternProperties", "dependencies", "additionalItems"] {
        if map.contains_key(forbidden) {
            errors.push(format!("{path}: has `{forbidden}`"));
        }
    }
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !map.contains_key("type") && !int_or_string && !preserve {
        errors.push(format!("{path}: no type"));
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        errors.push(format!("{path}: both properties and additionalProperties"));
    }
    for junctor in ["anyOf", "oneOf", "allOf", "not"] {
        if let Some(j) = map.get(junctor) {
            let text = j.to_string();
            if text.contains("\"type\"") || text.contains("\"default\"") || text.contains("\"description\"") {
                errors.push(format!("{path}: {junctor} specifies type/default/description"));
            }
        }
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (k, v) in props {
            check_structural(v, &format!("{path}.{k}"), errors);
        }
    }
    if let Some(v @ Value::Object(_)) = map.get("additionalProperties") {
        check_structural(v, &format!("{path}.*"), errors);
    }
    if let Some(v) = map.get("items") {
        check_structural(v, &format!("{path}[]"), errors);
    }
}

#[test]
fn crd_schema_is_structural() {
    let crd = serde_json::to_value(crd::crd()).unwrap();
    for version in crd["spec"]["versions"].as_array().unwrap() {
        let schema = &version["schema"]["openAPIV3Schema"];
        let mut errors = Vec::new();
        check_structural(schema, "", &mut errors);
        assert!(errors.is_empty(), "{} is not structural:\n{}", version["name"], errors.join("\n"));
        let spec = &schema["properties"]["spec"];
        assert!(spec.get("x-kubernetes-preserve-unknown-fields").is_none(), "spec must not preserve unknown fields");
    }
}

#[test]
fn crd_validates_device_and_counts() {
    let crd = serde_json::to_value(crd::crd()).unwrap();
    for version in crd["spec"]["versions"].as_array().unwrap() {
        let app = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["applications"]
            ["additionalProperties"];
        let device = &app["properties"]["readerConfig"]["properties"]["device"];
        let allowed: Vec<&str> = device["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(allowed, ["cpu", "cuda"]);
        assert_eq!(app["properties"]["replicaCount"]["minimum"], 0.0);
        assert_eq!(app["properties"]["readerConfig"]["x-kubernetes-preserve-unknown-fields"], true);
    }
}

#[test]
fn checked_in_http_api_manifests_are_up_to_date() {
    let options = model_orchestra_api::deploy::operator::DeployOptions {
        namespace: "model-orchestra-system".into(),
        image: concat!("ghcr.io/titanml/model-orchestra-operator:", env!("CARGO_PKG_VERSION")).into(),
        routing: model_orchestra_api::lines::default_routing(env!("CARGO_PKG_VERSION"), ApiVersion::V1alpha1),
        claim_unlabeled: false,
        api_version: None,
        release: None,
    };
    assert!(
        repo_file("config/deploy/http-api.yaml") == model_orchestra_api::deploy::httpapi::all_yaml(&options),
        "config/deploy/http-api.yaml is stale: run `make generate`"
    );
}

#[test]
fn checked_in_values_reference_is_up_to_date() {
    for (version, page) in
        [(ApiVersion::V1alpha1, "docs/src/values/v1alpha1.md"), (ApiVersion::V1alpha2, "docs/src/values/v1alpha2.md")]
    {
        assert!(
            repo_file(page) == model_orchestra::reference::values_reference(version),
            "{page} is stale: run `make generate`"
        );
    }
}
