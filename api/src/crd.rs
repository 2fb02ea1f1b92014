//! Generated artifacts from the API types: the CRD and the chart's `values.schema.json`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::v1alpha1::{ModelOrchestra, ModelOrchestraSpec};
use crate::ApiVersion;

/// Fields whose schema comes from Kubernetes' own types. Their (long) upstream descriptions
/// are dropped from the CRD, as `controller-gen crd:maxDescLen=0` does, which keeps the CRD
/// a fraction of the size; `kubectl explain` of the core types still has them.
const KUBERNETES_TYPED_FIELDS: [&str; 18] = [
    "affinity",
    "env",
    "imagePullSecrets",
    "livenessProbe",
    "readinessProbe",
    "podSecurityContext",
    "securityContext",
    "ports",
    "resources",
    "tolerations",
    "volumes",
    "volumeMounts",
    "modelsVolume",
    "tokenSecret",
    "behavior",
    "cudaVisibleDevices",
    "conditions",
    "strategy",
];

/// The ModelOrchestra CRD the operator ships: `v1alpha1` and `v1alpha2` served, `v1alpha2`
/// stored, conversion `None`.
///
/// Why that works without a conversion webhook: the stored schema holds every field of both
/// versions (`v1alpha2`'s, plus `v1alpha1`'s per-application `service` and `ingress`, which
/// `v1alpha2` writers are refused by a CEL rule), so an object written in either version is
/// stored whole; and a CR is rendered by the contract of the version it was written in (the
/// lines route it so, `reconcile::routing`), so it means what its writer meant whichever
/// version it is read at. See the book's "API versions" (docs/src/user-guide/api-versions.md) for what this does not cover.
pub fn crd() -> CustomResourceDefinition {
    use crate::v1alpha2;
    let v1alpha1 = serde_json::to_value(crd_v1alpha1()).expect("the CRD serialises");
    let mut second = serde_json::to_value(v1alpha2::ModelOrchestra::crd()).expect("the CRD serialises");
    trim_descriptions(&mut second, false);
    keep_v1alpha1_network_fields(&mut second, &v1alpha1);
    let second: CustomResourceDefinition = serde_json::from_value(second).expect("trimming keeps a valid CRD");
    let first: CustomResourceDefinition = serde_json::from_value(v1alpha1).expect("a valid CRD");
    kube::core::crd::merge_crds(vec![first, second], v1alpha2::VERSION).expect("both versions describe the same kind")
}

/// The CRD as release 0.1.0 installed it: `v1alpha1` alone. Its schema is frozen (see
/// `bundles/crds`).
pub fn crd_v1alpha1() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(ModelOrchestra::crd()).expect("the CRD serialises");
    trim_descriptions(&mut crd, false);
    serde_json::from_value(crd).expect("trimming keeps a valid CRD")
}

/// Adds `v1alpha1`'s per-application `service` and `ingress` to `v1alpha2`'s schema (of the
/// template and of each application), so a `v1alpha1` object stored as `v1alpha2` keeps
/// them; a CEL rule refuses them to `v1alpha2` writers (validation ratcheting lets an
/// unchanged one through an update).
fn keep_v1alpha1_network_fields(v1alpha2_crd: &mut Value, v1alpha1_crd: &Value) {
    let spec_of = |crd: &Value| {
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].clone()
    };
    let old = spec_of(v1alpha1_crd);
    let spec =
        &mut v1alpha2_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    for (path, old_props) in [
        (&["applicationTemplate", "properties"][..], &old["applicationTemplate"]["properties"]),
        (
            &["applications", "additionalProperties", "properties"][..],
            &old["applications"]["additionalProperties"]["properties"],
        ),
    ] {
        let mut props = &mut *spec;
        for key in path {
            props = &mut props[*key];
        }
        for field in ["service", "ingress"] {
            let mut schema = old_props[field].clone();
            schema["description"] = Value::from(format!(
                "v1alpha1 only: kept for CRs written as v1alpha1. v1alpha2 readers are reached through the gateway (spec.gateway.{field})."
            ));
            schema["x-kubernetes-validations"] = serde_json::json!([{
                "rule": "false",
                "message": format!("v1alpha2 has no per-application {field}: readers are reached only through the gateway (use spec.gateway.{field})")
            }]);
            props[field] = schema;
        }
    }
}

pub fn crd_yaml() -> String {
    serde_yaml::to_string(&crd()).expect("the CRD serialises")
}

/// Walks a schema; below a Kubernetes-typed property, removes every `description` except
/// the property's own.
fn trim_descriptions(node: &mut Value, inside: bool) {
    match node {
        Value::Object(map) => {
            if inside {
                map.remove("description");
            }
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                for (name, prop) in props.iter_mut() {
                    let typed = inside || KUBERNETES_TYPED_FIELDS.contains(&name.as_str());
                    if typed && !inside {
                        // Keep the field's own description, drop those inside it.
                        if let Value::Object(p) = prop {
                            for (k, v) in p.iter_mut() {
                                if k != "description" {
                                    trim_descriptions(v, true);
                                }
                            }
                        }
                    } else {
                        trim_descriptions(prop, typed);
                    }
                }
            }
            for (k, v) in map.iter_mut() {
                if k != "properties" {
                    trim_descriptions(v, inside);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| trim_descriptions(v, inside)),
        _ => {}
    }
}

/// JSON Schema (draft 2020-12) of the values of `version`'s chart, from the same types as
/// the CRD.
pub fn values_schema(version: ApiVersion) -> Value {
    let (schema, title) = match version {
        ApiVersion::V1alpha1 => (schemars::schema_for!(ModelOrchestraSpec), "model-orchestra chart values"),
        ApiVersion::V1alpha2 => (
            schemars::schema_for!(crate::v1alpha2::ModelOrchestraSpec),
            "model-orchestra chart values (ModelOrchestra v1alpha2)",
        ),
    };
    let mut schema = serde_json::to_value(schema).expect("schema serialises");
    schema["title"] = title.into();
    schema
}

pub fn values_schema_json(version: ApiVersion) -> String {
    let mut text = serde_json::to_string_pretty(&values_schema(version)).expect("schema serialises");
    text.push('\n');
    text
}
