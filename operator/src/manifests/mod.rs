//! Deployment manifests of the operator itself, generated from code so that each has one
//! source of truth.

pub mod deploy;
pub mod rbac;
