//! Who is asking: the key a request presents (a header, or the status page's cookie for
//! reads), checked against the live keys and the key's rate, and the [`Caller`] the
//! handlers act as.

use std::time::Instant;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kube::Client;

use crate::error::ApiError;
use crate::keys::KeyRecord;
use crate::state::Shared;

/// The cookie the status page keeps the key in (HttpOnly, SameSite=Strict).
pub(crate) const COOKIE: &str = "mo_api_key";

/// The key's record and a client acting as its user: present on requests with a valid key.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) record: KeyRecord,
    pub(crate) client: Client,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(ApiError::unauthorized)
    }
}

/// The key's name, for the request log (never the key).
#[derive(Clone)]
pub(crate) struct KeyName(pub(crate) String);

/// The key a request presents: `Authorization: Bearer`, `X-API-Key`, or — for reads only,
/// so no other site can make a browser write with it — the status page's cookie.
fn presented_key<'a>(headers: &'a HeaderMap, method: &Method) -> Option<Presented<'a>> {
    if let Some(auth) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let (scheme, token) = auth.trim().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| Presented::Header(token.trim()));
    }
    if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(Presented::Header(key.trim()));
    }
    if method == Method::GET || method == Method::HEAD {
        return cookie(headers, COOKIE).map(Presented::Cookie);
    }
    None
}

/// Where a key came from: a stale cookie (a revoked key) leaves the request unauthenticated,
/// so the page shows its sign-in form rather than an error.
enum Presented<'a> {
    Header(&'a str),
    Cookie(&'a str),
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|c| {
        let (k, v) = c.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// Checks the key (when one is presented) and the key's rate; puts a [`Caller`] in the
/// request for the handlers. Requests without a key go on: each handler that needs one
/// answers 401 (the page shows its sign-in form instead).
pub(crate) async fn authenticate(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    let (presented, from_cookie) = match presented_key(request.headers(), request.method()) {
        None => return next.run(request).await,
        Some(Presented::Header(key)) => (key.to_string(), false),
        Some(Presented::Cookie(key)) => (key.to_string(), true),
    };
    let Some(record) = state.keys.verify(&presented) else {
        if from_cookie {
            return next.run(request).await;
        }
        return ApiError::unauthorized().into_response();
    };
    let name = record.name.clone();
    if let Err(wait) = state.limiter.take(&name, Instant::now()) {
        let mut response = ApiError::rate_limited(wait.as_secs_f64().ceil().max(1.0) as u64).into_response();
        response.extensions_mut().insert(KeyName(name));
        return response;
    }
    let client = match state.clients.for_user(&record.user()) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    request.extensions_mut().insert(Caller { record, client });
    let mut response = next.run(request).await;
    response.extensions_mut().insert(KeyName(name));
    response
}
