//! The OpenAPI document, generated from the handlers (utoipa) with the ModelOrchestra
//! schemas taken from the CRD itself, so the API and `kubectl explain` describe the same
//! object. Checked in as `httpapi/openapi.json` (a test keeps it current) and served at
//! `/api/v1/openapi.json`.

use std::sync::OnceLock;

use serde_json::{json, Value};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::{ErrorBody, FieldError};
use crate::extract::{DNS_LABEL, DNS_SUBDOMAIN};
use crate::schema::{AnnotationSet, Deleted, ModelOrchestraList, RefreshRequest};
use crate::status::{ApplicationSummary, StatusSummary};
use crate::{handlers, watch};

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some("an API key")).build(),
            ),
        );
        components.add_security_scheme("apiKey", SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))));
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "model-orchestra API",
        version = "1",
        description = "ModelOrchestras for teams without cluster credentials. Each API key acts as the Kubernetes user `model-orchestra-api:<key name>`: the cluster's RBAC decides what it may do, and the API server's audit log names it on every write."
    ),
    paths(
        handlers::list, handlers::create, handlers::read, handlers::replace, handlers::remove, handlers::status,
        handlers::refresh, handlers::retry_promotion, watch::watch
    ),
    components(schemas(ErrorBody, FieldError, StatusSummary, ApplicationSummary, ModelOrchestraList, Deleted,
        RefreshRequest, AnnotationSet)),
    modifiers(&Security),
    security(("bearer" = []), ("apiKey" = [])),
    tags(
        (name = "modelorchestras", description = "ModelOrchestra objects"),
        (name = "status", description = "Status, and its changes as they happen"),
        (name = "actions", description = "The operator's annotations: refresh a model cache, retry a verified promotion")
    )
)]
struct Document;

/// A served version's schema from the CRD, as the API takes and returns it: its
/// `apiVersion` and `kind` are the version's own (so exactly one version matches an object),
/// and its `metadata` has the name (and namespace) the server checks.
fn version_schema(crd_schema: &Value, version: &str) -> Value {
    let mut schema = crd_schema.clone();
    let properties = schema["properties"].as_object_mut().expect("the CRD's schema has properties");
    properties.insert(
        "apiVersion".into(),
        json!({"type": "string", "enum": [format!("{}/{version}", model_orchestra_api::GROUP)]}),
    );
    properties.insert("kind".into(), json!({"type": "string", "enum": ["ModelOrchestra"]}));
    properties.insert(
        "metadata".into(),
        json!({
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": DNS_SUBDOMAIN, "minLength": 1, "maxLength": 253},
                "namespace": {"type": "string", "pattern": DNS_LABEL, "minLength": 1, "maxLength": 63,
                    "description": "the path's namespace (it may be left out)"},
            },
        }),
    );
    let required = schema.as_object_mut().expect("an object").entry("required").or_insert_with(|| json!([]));
    for field in ["apiVersion", "kind", "metadata"] {
        if !required.as_array().expect("a list").contains(&json!(field)) {
            required.as_array_mut().expect("a list").push(json!(field));
        }
    }
    schema
}

/// The whole document.
pub fn document() -> Value {
    let mut doc = serde_json::to_value(Document::openapi()).expect("the document serialises");
    let crd = serde_json::to_value(model_orchestra_api::crd::crd()).expect("the CRD serialises");
    let schemas = doc["components"]["schemas"].as_object_mut().expect("components");
    let mut one_of = vec![];
    let mut mapping = serde_json::Map::new();
    for version in crd["spec"]["versions"].as_array().expect("versions") {
        let name = version["name"].as_str().expect("a version name");
        let component = format!("ModelOrchestra.{name}");
        let reference = format!("#/components/schemas/{component}");
        schemas.insert(component, version_schema(&version["schema"]["openAPIV3Schema"], name));
        one_of.push(json!({"$ref": reference}));
        mapping.insert(format!("{}/{name}", model_orchestra_api::GROUP), json!(reference));
    }
    schemas.insert(
        "ModelOrchestra".into(),
        json!({
            "description": "A ModelOrchestra as `kubectl apply` takes it (the CRD's schema of each served version). Create it at the version whose contract you want: it keeps it.",
            "oneOf": one_of,
            "discriminator": {"propertyName": "apiVersion", "mapping": mapping},
        }),
    );
    schemas.insert("WatchEvent".into(), watch::event_schema());
    schemas.insert(
        "WatchDeleted".into(),
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}),
    );
    let events = &mut doc["paths"]["/api/v1/namespaces/{namespace}/watch"]["get"]["responses"]["200"];
    events["content"] = json!({"text/event-stream": {"schema": {"$ref": "#/components/schemas/WatchEvent"}}});
    doc
}

/// The document as served and checked in.
pub fn json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| serde_json::to_string_pretty(&document()).expect("serialises") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_in_openapi_is_up_to_date() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
        let checked_in = std::fs::read_to_string(path).unwrap_or_default();
        assert!(checked_in == json(), "httpapi/openapi.json is stale: run `make generate`");
    }

    #[test]
    fn every_endpoint_is_described_and_bodies_use_the_crd_schemas() {
        let doc = document();
        for path in [
            "/api/v1/namespaces/{namespace}/modelorchestras",
            "/api/v1/namespaces/{namespace}/modelorchestras/{name}",
            "/api/v1/namespaces/{namespace}/modelorchestras/{name}/status",
            "/api/v1/namespaces/{namespace}/modelorchestras/{name}/refresh",
            "/api/v1/namespaces/{namespace}/modelorchestras/{name}/retry-promotion",
            "/api/v1/namespaces/{namespace}/watch",
        ] {
            assert!(doc["paths"][path].is_object(), "{path}");
        }
        let body = &doc["paths"]["/api/v1/namespaces/{namespace}/modelorchestras"]["post"]["requestBody"];
        assert_eq!(body["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ModelOrchestra");
        let v2 = &doc["components"]["schemas"]["ModelOrchestra.v1alpha2"];
        assert!(v2["properties"]["spec"]["properties"]["applications"].is_object());
    }

    fn operations(doc: &Value) -> Vec<(String, &Value)> {
        let paths = doc["paths"].as_object().unwrap();
        paths
            .iter()
            .flat_map(|(path, methods)| {
                methods.as_object().unwrap().iter().map(move |(method, op)| (format!("{method} {path}"), op))
            })
            .collect()
    }

    #[test]
    fn every_operation_documents_the_errors_any_request_can_meet_with_the_error_body() {
        let doc = document();
        for (operation, op) in operations(&doc) {
            // A bad path, no key, over the rate, a panic, the API server away or slow.
            for status in ["400", "401", "429", "500", "503", "504"] {
                let schema = &op["responses"][status]["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(schema, "#/components/schemas/ErrorBody", "{operation} {status}");
            }
        }
    }

    #[test]
    fn path_parameters_carry_the_patterns_and_lengths_the_server_checks() {
        let doc = document();
        for (operation, op) in operations(&doc) {
            for parameter in op["parameters"].as_array().unwrap().iter().filter(|p| p["in"] == "path") {
                let (pattern, max) = match parameter["name"].as_str().unwrap() {
                    "namespace" => (DNS_LABEL, 63),
                    "name" => (DNS_SUBDOMAIN, 253),
                    other => panic!("{operation}: an undocumented path parameter {other}"),
                };
                assert_eq!(parameter["schema"]["pattern"], pattern, "{operation}");
                assert_eq!(parameter["schema"]["maxLength"], max, "{operation}");
            }
        }
    }

    #[test]
    fn an_object_of_one_version_cannot_match_the_others_schema() {
        let doc = document();
        let one_of = doc["components"]["schemas"]["ModelOrchestra"]["oneOf"].as_array().unwrap();
        let versions: Vec<&Value> = one_of
            .iter()
            .map(|r| {
                let name = r["$ref"].as_str().unwrap().trim_start_matches("#/components/schemas/");
                &doc["components"]["schemas"][name]["properties"]["apiVersion"]["enum"]
            })
            .collect();
        assert_eq!(versions.len(), 2);
        assert_ne!(versions[0], versions[1]);
        assert_eq!(versions[0].as_array().unwrap().len(), 1);
    }
}
