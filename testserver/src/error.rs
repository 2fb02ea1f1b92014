//! API errors as `Status` objects with the codes and reasons a real API server uses.

use serde_json::{json, Value};

use crate::managed::Conflict;
use crate::resources::ResourceType;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String, details: Value) -> Self {
        ApiError { code, reason, message, details }
    }

    fn details(rt: &ResourceType, name: &str) -> Value {
        json!({"name": name, "group": rt.group, "kind": rt.plural})
    }

    fn resource(rt: &ResourceType) -> String {
        if rt.group.is_empty() {
            rt.plural.clone()
        } else {
            format!("{}.{}", rt.plural, rt.group)
        }
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", Self::resource(rt)), Self::details(rt, name))
    }

    pub fn namespace_not_found(ns: &str) -> Self {
        Self::new(404, "NotFound", format!("namespaces \"{ns}\" not found"), json!({"name": ns, "kind": "namespaces"}))
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", Self::resource(rt)), Self::details(rt, name))
    }

    pub fn conflict_rv(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                Self::resource(rt)
            ),
            Self::details(rt, name),
        )
    }

    pub fn apply_conflict(rt: &ResourceType, name: &str, conflicts: &[Conflict]) -> Self {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|c| json!({"type": "FieldManagerConflict", "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version), "field": c.path}))
            .collect();
        let lines: Vec<String> = conflicts.iter().map(|c| format!("- conflict with \"{}\" using {}: {}", c.manager, c.api_version, c.path)).collect();
        let mut details = Self::details(rt, name);
        details["causes"] = json!(causes);
        Self::new(409, "Conflict", format!("Apply failed with {} conflict(s):\n{}", conflicts.len(), lines.join("\n")), details)
    }

    pub fn precondition_failed(rt: &ResourceType, name: &str, field: &str, want: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": Precondition failed: {field}: {want}", Self::resource(rt)),
            Self::details(rt, name),
        )
    }

    pub fn invalid(rt: &ResourceType, name: &str, message: &str) -> Self {
        Self::new(422, "Invalid", format!("{} \"{name}\" is invalid: {message}", Self::resource(rt)), Self::details(rt, name))
    }

    pub fn forbidden(rt: &ResourceType, name: &str, message: &str) -> Self {
        Self::new(403, "Forbidden", format!("{} \"{name}\" is forbidden: {message}", Self::resource(rt)), Self::details(rt, name))
    }

    pub fn gone(rv: u64) -> Self {
        Self::new(410, "Expired", format!("too old resource version: {rv}"), json!({}))
    }

    pub fn bad_request(message: &str) -> Self {
        Self::new(400, "BadRequest", message.into(), json!({}))
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/apply-patch+yaml, application/merge-patch+json (got {content_type:?})"), json!({}))
    }

    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(405, "MethodNotAllowed", format!("the server does not allow this method on the requested resource ({method})"), json!({}))
    }

    pub fn path_not_found(path: &str) -> Self {
        Self::new(404, "NotFound", format!("the server could not find the requested resource ({path})"), json!({}))
    }

    pub fn injected() -> Self {
        Self::new(500, "InternalError", "Internal error occurred: injected fault (kube-testserver)".into(), json!({}))
    }

    pub fn status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        })
    }
}
