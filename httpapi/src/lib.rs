//! The ModelOrchestra HTTP API, for teams without cluster credentials: API keys
//! ([`keys`], managed by [`admin`]), JSON endpoints under `/api/v1` with an OpenAPI document
//! ([`openapi`]), a watch of status changes as Server-Sent Events and a status page at `/`.
//!
//! The server holds no rights of its own over ModelOrchestras: every call is made as the
//! key's Kubernetes user (`model-orchestra-api:<name>`) by impersonation, so RBAC decides
//! and the audit log names the key. It runs as its own Deployment and ServiceAccount
//! (`model-orchestra-operator serve-api`); see the book's "HTTP API" (docs/src/http-api.md).
//!
//! The modules, from the top: [`server`] (listener, TLS, connections) serves the `router`
//! (which path reaches which handler: the JSON API in `handlers` and `watch`, the status
//! page in `page`, the document in [`openapi`]); handlers take what `extract` checked and
//! the `auth` layer's caller, share the `state`, and answer the bodies of `schema` or an
//! [`error`].

#![warn(unreachable_pub)]

pub mod admin;
mod auth;
mod cache;
pub mod error;
mod extract;
mod handlers;
pub mod keys;
pub mod openapi;
pub mod options;
mod page;
mod ratelimit;
mod router;
mod schema;
pub mod server;
mod state;
pub mod status;
mod watch;

pub use options::{check_options, ServeOptions, TlsFiles};
#[doc(hidden)]
pub use router::test_router;
pub use server::serve;
pub use state::Validator;
