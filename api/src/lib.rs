//! The ModelOrchestra API, a leaf crate: the served versions ([`v1alpha1`], frozen, and
//! [`v1alpha2`]), the CRD generated from them ([`crd`]), the kinds the chart may render
//! ([`kinds`]), Kubernetes' name rules ([`names`]), strict parsing ([`parse`]), how CRs
//! reach an operator line ([`lines`]) and the operator's own install manifests
//! ([`deploy`]). It depends on the Kubernetes types and serde only, so tools that need the
//! API (bundle-tool) do not link the controller.

#[macro_use]
mod component;
pub mod crd;
pub mod deploy;
pub mod error;
pub mod keys;
pub mod kinds;
pub mod lines;
pub mod names;
pub mod parse;
pub mod v1alpha1;
pub mod v1alpha2;
pub mod values;
mod version;

pub use error::{InputError, InputErrors};
pub use version::ApiVersion;

pub const GROUP: &str = "models.titanml.co";
pub const KIND: &str = "ModelOrchestra";
/// The resource name of ModelOrchestras (URLs, RBAC).
pub const PLURAL: &str = "modelorchestras";
