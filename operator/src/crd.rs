//! Generated artifacts from the API types: the CRD and the chart's `values.schema.json`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::api::{ModelOrchestra, ModelOrchestraSpec};

/// Fields whose schema comes from Kubernetes' own types. Their (long) upstream descriptions
/// are dropped from the CRD, as `controller-gen crd:maxDescLen=0` does, which keeps the CRD
/// a fraction of the size; `kubectl explain` of the core types still has them.
const KUBERNETES_TYPED_FIELDS: [&str; 15] = [
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
    "behavior",
    "cudaVisibleDevices",
    "conditions",
];

/// The ModelOrchestra CRD.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(ModelOrchestra::crd()).expect("the CRD serialises");
    trim_descriptions(&mut crd, false);
    serde_json::from_value(crd).expect("trimming keeps a valid CRD")
}

/// The CRD serving `v1alpha1` (storage) and `v1alpha2`, as the operator will ship it once
/// `v1alpha2` renders; today only the CRD-versions tests install it.
pub fn crd_with_v1alpha2() -> CustomResourceDefinition {
    use crate::api::v1alpha2;
    let mut second = serde_json::to_value(v1alpha2::ModelOrchestra::crd()).expect("the CRD serialises");
    trim_descriptions(&mut second, false);
    let second: CustomResourceDefinition = serde_json::from_value(second).expect("trimming keeps a valid CRD");
    kube::core::crd::merge_crds(vec![crd(), second], crate::api::v1alpha1::VERSION).expect("both versions describe the same kind")
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

/// JSON Schema (draft 2020-12) of the `v1alpha1` chart's values, from the same types as
/// the CRD.
pub fn values_schema() -> Value {
    values_schema_for(crate::chart::Contract::V1alpha1)
}

/// JSON Schema (draft 2020-12) of the values of the chart for `contract`.
pub fn values_schema_for(contract: crate::chart::Contract) -> Value {
    let (schema, title) = match contract {
        crate::chart::Contract::V1alpha1 => (schemars::schema_for!(ModelOrchestraSpec), "model-orchestra chart values"),
        crate::chart::Contract::V1alpha2 => {
            (schemars::schema_for!(crate::api::v1alpha2::ModelOrchestraSpec), "model-orchestra chart values (ModelOrchestra v1alpha2)")
        }
    };
    let mut schema = serde_json::to_value(schema).expect("schema serialises");
    schema["title"] = title.into();
    schema
}

pub fn values_schema_json() -> String {
    values_schema_json_for(crate::chart::Contract::V1alpha1)
}

pub fn values_schema_json_for(contract: crate::chart::Contract) -> String {
    let mut text = serde_json::to_string_pretty(&values_schema_for(contract)).expect("schema serialises");
    text.push('\n');
    text
}
