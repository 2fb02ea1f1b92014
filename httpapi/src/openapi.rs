//! The OpenAPI document, generated from the handlers (utoipa) with the ModelOrchestra
//! schemas taken from the CRD itself, so the API and `kubectl explain` describe the same
//! object. Checked in as `httpapi/openapi.json` (a test keeps it current) and served at
//! `/api/v1/openapi.json`.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::{json, Value};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use crate::error::{ErrorBody, FieldError};
use crate::routes;
use crate::status::{ApplicationSummary, StatusSummary};

/// A ModelOrchestra (either version): a reference to the CRD's schemas, filled in below.
pub struct ModelOrchestraRef;

impl PartialSchema for ModelOrchestraRef {
    fn schema() -> RefOr<Schema> {
        RefOr::Ref(utoipa::openapi::Ref::from_schema_name("ModelOrchestra"))
    }
}

impl ToSchema for ModelOrchestraRef {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ModelOrchestra")
    }
}

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
        routes::list, routes::create, routes::read, routes::replace, routes::remove, routes::status,
        routes::refresh, routes::retry_promotion, routes::watch
    ),
    components(schemas(ErrorBody, FieldError, StatusSummary, ApplicationSummary, routes::ModelOrchestraList, routes::Deleted,
        routes::RefreshRequest, routes::AnnotationSet)),
    modifiers(&Security),
    tags(
        (name = "modelorchestras", description = "ModelOrchestra objects"),
        (name = "status", description = "Status, and its changes as they happen"),
        (name = "actions", description = "The operator's annotations: refresh a model cache, retry a verified promotion")
    )
)]
struct Document;

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
        schemas.insert(component, version["schema"]["openAPIV3Schema"].clone());
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
}
