//! What a request carries, checked before a handler runs: the namespace and name in its
//! path (a 400 naming the one at fault), its JSON body (413 over the limit, 400 when it is
//! not JSON). The OpenAPI document describes the path with these checks' own patterns.

use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header;
use axum::http::request::Parts;
use model_orchestra_api::names::{is_dns_label, is_dns_subdomain};
use serde_json::{json, Value};
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::{ObjectBuilder, Required, Type};
use utoipa::IntoParams;

use crate::error::{ApiError, ApiResult};
use crate::state::Shared;

/// A DNS-1123 label (a namespace): what `is_dns_label` accepts, as a JSON Schema pattern.
pub(crate) const DNS_LABEL: &str = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";
/// A DNS-1123 subdomain (an object's name): dot-separated labels, as `is_dns_subdomain`.
pub(crate) const DNS_SUBDOMAIN: &str = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$";
const NAMESPACE_MAX: usize = 63;
const NAME_MAX: usize = 253;

pub(crate) fn check_namespace(namespace: &str) -> ApiResult<()> {
    if is_dns_label(namespace) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "BadRequest",
            format!("`{namespace}` is not a namespace name (a DNS label: lowercase letters, digits and `-`)"),
        ))
    }
}

pub(crate) fn check_name(name: &str) -> ApiResult<()> {
    if is_dns_subdomain(name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "BadRequest",
            format!("`{name}` is not a ModelOrchestra name (lowercase letters, digits, `-` and `.`)"),
        ))
    }
}

/// The path's `{namespace}`, a namespace name.
pub(crate) struct Namespace(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for Namespace {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(namespace) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request("BadRequest", e.body_text()))?;
        check_namespace(&namespace)?;
        Ok(Namespace(namespace))
    }
}

/// The path's `{namespace}` and `{name}`: one ModelOrchestra.
pub(crate) struct Object {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Object {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path((namespace, name)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request("BadRequest", e.body_text()))?;
        check_namespace(&namespace)?;
        check_name(&name)?;
        Ok(Object { namespace, name })
    }
}

/// A string parameter as the server checks it: its pattern and length.
fn string_parameter(
    name: &str,
    within: ParameterIn,
    (pattern, max): (&str, usize),
    example: &str,
    description: &str,
) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(within.clone())
        .required(if within == ParameterIn::Path { Required::True } else { Required::False })
        .description(Some(description))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(pattern))
                .min_length(Some(1))
                .max_length(Some(max))
                .build(),
        ))
        .example(Some(json!(example)))
        .build()
}

fn namespace_parameter() -> Parameter {
    string_parameter(
        "namespace",
        ParameterIn::Path,
        (DNS_LABEL, NAMESPACE_MAX),
        "team-a",
        "The namespace: a DNS-1123 label (lowercase letters, digits and `-`, at most 63).",
    )
}

/// A ModelOrchestra's name where `within` (the path, or the watch's query) carries it.
pub(crate) fn name_parameter(within: ParameterIn) -> Parameter {
    string_parameter(
        "name",
        within,
        (DNS_SUBDOMAIN, NAME_MAX),
        "chat",
        "The ModelOrchestra's name: a DNS-1123 subdomain (labels of lowercase letters, digits and `-`, joined by `.`; at most 253).",
    )
}

impl IntoParams for Namespace {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![namespace_parameter()]
    }
}

impl IntoParams for Object {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![namespace_parameter(), name_parameter(ParameterIn::Path)]
    }
}

/// A JSON body within the size limit: 413 over it, 400 when it is not JSON; `None` when it
/// is empty (or `null`).
pub(crate) struct JsonBody(pub(crate) Option<Value>);

impl FromRequest<Shared> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Shared) -> Result<Self, Self::Rejection> {
        let limit = state.max_body;
        let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
        if declared.and_then(|v| v.parse::<u64>().ok()).is_some_and(|n| n > limit as u64) {
            return Err(ApiError::too_large(limit));
        }
        let bytes = axum::body::to_bytes(request.into_body(), limit).await.map_err(|e| {
            let inner = e.into_inner();
            if inner.downcast_ref::<http_body_util::LengthLimitError>().is_some()
                || inner.source().is_some_and(|s| s.downcast_ref::<http_body_util::LengthLimitError>().is_some())
            {
                ApiError::too_large(limit)
            } else {
                ApiError::bad_request("BadRequest", format!("reading the request body: {inner}"))
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(None));
        }
        serde_json::from_slice::<Value>(&bytes)
            .map(|v| JsonBody(Some(v).filter(|v| !v.is_null())))
            .map_err(|e| ApiError::bad_request("MalformedJson", format!("the request body is not valid JSON: {e}")))
    }
}

impl JsonBody {
    pub(crate) fn required(self) -> ApiResult<Value> {
        self.0.ok_or_else(|| {
            ApiError::bad_request("BadRequest", "the request body is empty: send a ModelOrchestra as JSON")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string of up to `len` characters from `alphabet`.
    fn strings(alphabet: &[char], len: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..len {
            last = last.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    fn matches(pattern: &str, max: usize, s: &str) -> bool {
        regex::Regex::new(pattern).unwrap().is_match(s) && s.chars().count() <= max && !s.is_empty()
    }

    #[test]
    fn the_documented_namespace_pattern_accepts_exactly_the_namespaces_the_server_does() {
        let mut samples = strings(&['a', '0', '-', '.', 'A'], 4);
        samples.extend(["a".repeat(63), "a".repeat(64), format!("a{}a", "-".repeat(61)), "é".into()]);
        for s in samples {
            assert_eq!(matches(DNS_LABEL, NAMESPACE_MAX, &s), is_dns_label(&s), "`{s}`");
        }
    }

    #[test]
    fn the_documented_name_pattern_accepts_exactly_the_names_the_server_does() {
        let mut samples = strings(&['a', '0', '-', '.', 'A'], 5);
        let label = "a".repeat(63);
        samples.extend([
            label.clone(),
            "a".repeat(64),
            format!("{label}.{label}.{label}.{}", "a".repeat(61)),
            format!("{label}.{label}.{label}.{}", "a".repeat(62)),
            format!("b.{}", "a".repeat(64)),
            "chat\n".into(),
        ]);
        for s in samples {
            assert_eq!(matches(DNS_SUBDOMAIN, NAME_MAX, &s), is_dns_subdomain(&s), "`{s}`");
        }
    }
}
