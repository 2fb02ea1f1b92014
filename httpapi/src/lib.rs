//! The ModelOrchestra HTTP API, for teams without cluster credentials: API keys
//! ([`keys`], managed by [`admin`]), JSON endpoints under `/api/v1` with an OpenAPI document
//! ([`openapi`]), a watch of status changes as Server-Sent Events and a status page at `/`.
//!
//! The server holds no rights of its own over ModelOrchestras: every call is made as the
//! key's Kubernetes user (`model-orchestra-api:<name>`) by impersonation, so RBAC decides
//! and the audit log names the key. It runs as its own Deployment and ServiceAccount
//! (`model-orchestra-operator serve-api`); see the book's "HTTP API" (docs/src/http-api.md).

#![warn(unreachable_pub)]

pub mod admin;
mod cache;
pub mod error;
pub mod keys;
pub mod openapi;
mod page;
mod ratelimit;
mod routes;
pub mod server;
pub mod status;

pub use server::{serve, ServeOptions, TlsFiles, Validator};
