//! Errors as the API answers them: a status code users expect, a stable `reason` a program
//! can branch on, and a message a person can act on.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ErrorBody {
    /// The HTTP status code.
    pub code: u16,
    /// Stable, machine-readable: `Unauthorized`, `Forbidden`, `NotFound`, `Conflict`,
    /// `AlreadyExists`, `Invalid`, `MalformedJson`, `BadRequest`, `PayloadTooLarge`,
    /// `TooManyRequests`, `MethodNotAllowed`, `Timeout`, `Unavailable`, `InternalError`.
    pub reason: String,
    /// What went wrong and what to do about it.
    pub message: String,
    /// Each field at fault (`Invalid`), in the order found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

/// One field at fault.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct FieldError {
    /// Dotted path into the ModelOrchestra, e.g. `spec.applications.chat.readerConfig.device`.
    pub field: String,
    pub message: String,
}

/// An error response.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub reason: &'static str,
    pub message: String,
    pub errors: Vec<FieldError>,
    /// Seconds, for 429.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, reason, message: message.into(), errors: vec![], retry_after: None }
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "no valid API key: send `Authorization: Bearer <key>` or `X-API-Key: <key>` \
             (an administrator creates keys with `model-orchestra-operator api-key create`)",
        )
    }

    pub fn bad_request(reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, reason, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    pub fn invalid(errors: Vec<FieldError>) -> ApiError {
        let message = match errors.as_slice() {
            [one] => format!("invalid ModelOrchestra: {}: {}", one.field, one.message),
            many => format!("invalid ModelOrchestra: {} errors; see `errors`", many.len()),
        };
        ApiError { errors, ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message) }
    }

    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PayloadTooLarge",
            format!("the request body is over the limit of {limit} bytes (a ModelOrchestra is far smaller)"),
        )
    }

    pub fn rate_limited(retry_after: u64) -> ApiError {
        ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TooManyRequests",
                format!("this key's request rate is over its limit; retry after {retry_after} s"),
            )
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.status.as_u16(),
            reason: self.reason.to_string(),
            message: self.message.clone(),
            errors: self.errors.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The API server's answer, as ours: its status code where a user can act on it (the
/// message names the key's user and what it lacks), a 502 where the fault is upstream.
impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> ApiError {
        match e {
            kube::Error::Api(status) => {
                let reason = match status.code {
                    400 => "BadRequest",
                    403 => "Forbidden",
                    404 => "NotFound",
                    409 if status.reason == "AlreadyExists" => "AlreadyExists",
                    409 => "Conflict",
                    410 => "Expired",
                    422 => "Invalid",
                    429 => "TooManyRequests",
                    _ => "UpstreamError",
                };
                let code = match status.code {
                    400 | 403 | 404 | 409 | 410 | 422 | 429 => {
                        StatusCode::from_u16(status.code).expect("a status code")
                    }
                    _ => StatusCode::BAD_GATEWAY,
                };
                let mut message = status.message.clone();
                if status.code == 409 && reason == "Conflict" {
                    message.push_str(
                        " (the object changed since you read it: GET it again and send its new metadata.resourceVersion)",
                    );
                }
                let errors = status
                    .details
                    .as_ref()
                    .map(|d| {
                        d.causes
                            .iter()
                            .filter(|c| !c.field.is_empty())
                            .map(|c| FieldError { field: c.field.clone(), message: c.message.clone() })
                            .collect()
                    })
                    .unwrap_or_default();
                ApiError { errors, ..ApiError::new(code, reason, message) }
            }
            other => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                format!("the Kubernetes API server could not be reached: {other}"),
            ),
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
