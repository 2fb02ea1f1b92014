//! The API's bodies as the OpenAPI document names them, and the errors each operation can
//! answer: one description per status code, wherever it is answered, with the error body.

use std::borrow::Cow;
use std::collections::BTreeMap;

use model_orchestra_api::ApiVersion;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder};
use utoipa::openapi::{Content, Ref, RefOr, Response, ResponseBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// A ModelOrchestra at any served version (`oneOf`, by `apiVersion`): what a client sends,
/// and gets back from a write.
pub(crate) struct ModelOrchestraRef;

impl PartialSchema for ModelOrchestraRef {
    fn schema() -> RefOr<Schema> {
        RefOr::Ref(Ref::from_schema_name("ModelOrchestra"))
    }
}

impl ToSchema for ModelOrchestraRef {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ModelOrchestra")
    }
}

/// A ModelOrchestra as reads return it: at the storage version, which holds every
/// version's fields.
pub(crate) struct StoredModelOrchestra;

impl PartialSchema for StoredModelOrchestra {
    fn schema() -> RefOr<Schema> {
        RefOr::Ref(Ref::from_schema_name(format!("ModelOrchestra.{}", ApiVersion::STORAGE.as_str())))
    }
}

impl ToSchema for StoredModelOrchestra {
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("ModelOrchestra.{}", ApiVersion::STORAGE.as_str()))
    }
}

/// A replacement: a ModelOrchestra with the `metadata.resourceVersion` it was read at.
pub(crate) struct Replacement;

impl PartialSchema for Replacement {
    fn schema() -> RefOr<Schema> {
        let metadata = ObjectBuilder::new()
            .schema_type(Type::Object)
            .required("name")
            .required("resourceVersion")
            .property("resourceVersion", ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)));
        AllOfBuilder::new()
            .item(ModelOrchestraRef::schema())
            .item(ObjectBuilder::new().required("metadata").property("metadata", metadata))
            .into()
    }
}

impl ToSchema for Replacement {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ModelOrchestraReplacement")
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelOrchestraList {
    /// `models.titanml.co/v1alpha2`: items are read at the storage version, which holds
    /// every version's fields.
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) resource_version: Option<String>,
    #[schema(value_type = Vec<StoredModelOrchestra>)]
    pub(crate) items: Vec<Value>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub(crate) struct Deleted {
    pub(crate) name: String,
    pub(crate) namespace: String,
    /// `Deleted`, or `Deleting` while finalizers run.
    pub(crate) status: String,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefreshRequest {
    /// The applications whose models to download again; none: every cached application.
    #[serde(default)]
    pub(crate) applications: Vec<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub(crate) struct AnnotationSet {
    pub(crate) annotation: String,
    pub(crate) value: String,
}

/// What each error status means, wherever it is answered (`reason` values in backticks).
fn describe(status: u16) -> &'static str {
    match status {
        400 => "`BadRequest`: a path parameter, the query or the body is not what the operation takes (the message says which); `MalformedJson`: the body is not JSON",
        401 => "`Unauthorized`: no valid API key (send `Authorization: Bearer <key>` or `X-API-Key: <key>`)",
        403 => "`Forbidden`: the key's Kubernetes user may not do this in this namespace (its RBAC); the message names the user and what it lacks",
        404 => "`NotFound`: no such ModelOrchestra (or namespace)",
        409 => "`AlreadyExists`: a ModelOrchestra of that name exists; `Conflict`: it changed since the `metadata.resourceVersion` sent was read",
        413 => "`PayloadTooLarge`: the body is over the server's limit",
        422 => "`Invalid`: the body is JSON but not what the operator accepts (its own validation goes beyond the schema); `errors` names each field at fault",
        429 => "`TooManyRequests`: this key's request rate is over its limit (`Retry-After` says when to retry), or the API server's",
        500 => "`InternalError`: the server failed on this request (a bug: please report it with the request)",
        502 => "`UpstreamError`: the Kubernetes API server answered with an error the API does not pass on",
        503 => "`Unavailable`: the Kubernetes API server could not be reached",
        504 => "`Timeout`: the Kubernetes API server did not answer in time",
        _ => unreachable!("no operation answers {status}"),
    }
}

fn error_response(status: u16) -> Response {
    let mut response = ResponseBuilder::new()
        .description(describe(status))
        .content("application/json", Content::new(Some(Ref::from_schema_name("ErrorBody"))));
    if status == 429 {
        let seconds = HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)))
            .description(Some("seconds to wait (this key's own limit; not on the API server's 429)"));
        response = response.header("Retry-After", seconds.build());
    }
    if status == 401 {
        let scheme = HeaderBuilder::new().schema(ObjectBuilder::new().schema_type(Type::String));
        response = response.header("WWW-Authenticate", scheme.build());
    }
    response.build()
}

pub(crate) fn errors(statuses: &[u16]) -> BTreeMap<String, RefOr<Response>> {
    statuses.iter().map(|s| (s.to_string(), RefOr::T(error_response(*s)))).collect()
}

/// Declares the errors of a kind of operation. Each set is what its operations' parts can
/// answer: the key check (401, 429), the path and body checks (400, 413, 422), the
/// Kubernetes API server acting for the key (403, 404, 409, 422, 502, 503), the request
/// timeout (504) and the panic guard (500).
macro_rules! error_set {
    ($(#[$doc:meta])* $name:ident: $($status:literal),+) => {
        $(#[$doc])*
        pub(crate) struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                errors(&[$($status),+])
            }
        }
    };
}

error_set!(
    /// A list, or the watch: no object named, so no 404.
    ListErrors: 400, 401, 403, 429, 500, 502, 503, 504
);
error_set!(
    /// A read of one object, its deletion, or an annotation without a body.
    ObjectErrors: 400, 401, 403, 404, 429, 500, 502, 503, 504
);
error_set!(
    /// A create or replace: a body the operator validates (404: no such namespace, or object).
    WriteErrors: 400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503, 504
);
error_set!(
    /// The refresh: an optional body naming applications.
    RefreshErrors: 400, 401, 403, 404, 413, 422, 429, 500, 502, 503, 504
);
