//! registry+v1 bundles: generate a bundle directory and validate one.

pub mod annotations;
pub mod beside;
mod finding;
pub mod generate;
pub mod install;
pub mod release;
pub mod released_crds;
pub mod validate;

/// The CSV's file name in `manifests/`.
pub const CSV_FILE: &str = "model-orchestra-operator.clusterserviceversion.yaml";
/// The CRD's file name in `manifests/` (owned mode).
pub const CRD_FILE: &str = "models.titanml.co_modelorchestras.yaml";
/// The CSV annotation naming the CRD version a shared-CRD bundle serves (the catalog reads it).
pub use model_orchestra_api::keys::CRD_VERSION_ANNOTATION;

/// Where the CRD lives. OLM v1 lets only one ClusterExtension own a CRD, so versions that
/// install side by side share a CRD installed once per cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CrdMode {
    /// The bundle carries no CRD (`make install` / `bundle-tool crds` installs it).
    Shared,
    /// The CRD is in the bundle (single-version installs).
    Owned,
}

impl CrdMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CrdMode::Shared => "shared",
            CrdMode::Owned => "owned",
        }
    }
}
