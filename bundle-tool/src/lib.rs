//! bundle-tool: OLM artifacts for model-orchestra without Docker, operator-sdk or opm.
//! The bundle's CSV is built from the operator library's own Deployment and ClusterRole.

pub mod bundle;
pub mod catalog;
pub mod crd_compat;
pub mod crds;
pub mod error;
pub mod image;
pub mod metadata;
pub mod subscriptions;
