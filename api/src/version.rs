//! The ModelOrchestra versions this API defines, as a value.

use std::fmt;
use std::str::FromStr;

/// A version of the ModelOrchestra API. Declared oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiVersion {
    /// Released with 0.1.0 and frozen: the model-orchestra 0.3 chart's values.
    V1alpha1,
    /// The inference-stack 1.0 contract, the model cache and what comes after.
    V1alpha2,
}

impl ApiVersion {
    pub const ALL: [ApiVersion; 2] = [ApiVersion::V1alpha1, ApiVersion::V1alpha2];
    /// The version the API server stores: every field of every version fits its schema.
    pub const STORAGE: ApiVersion = ApiVersion::V1alpha2;

    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1alpha1 => "v1alpha1",
            ApiVersion::V1alpha2 => "v1alpha2",
        }
    }

    /// `models.titanml.co/<version>`.
    pub fn api_version(self) -> String {
        format!("{}/{}", crate::GROUP, self.as_str())
    }

    /// The version of `models.titanml.co/<version>`, if it is one of ours.
    pub fn from_api_version(api_version: &str) -> Option<ApiVersion> {
        api_version.strip_prefix(crate::GROUP)?.strip_prefix('/')?.parse().ok()
    }

    /// The ModelOrchestra resource at this version, for dynamic API clients.
    pub fn resource(self) -> kube::core::ApiResource {
        kube::core::ApiResource {
            group: crate::GROUP.into(),
            version: self.as_str().into(),
            api_version: self.api_version(),
            kind: crate::KIND.into(),
            plural: crate::PLURAL.into(),
        }
    }

    /// The first major release of the operator that serves this version: its line's routing
    /// value by default (`v0` serves `v1alpha1`, `v1` — release 1.0.0 — `v1alpha2`).
    pub fn first_major(self) -> u64 {
        match self {
            ApiVersion::V1alpha1 => 0,
            ApiVersion::V1alpha2 => 1,
        }
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Not a version of this API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a ModelOrchestra version (v1alpha1, v1alpha2)")]
pub struct UnknownVersion(pub String);

impl FromStr for ApiVersion {
    type Err = UnknownVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApiVersion::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| UnknownVersion(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_reads_back_from_its_name_and_its_api_version() {
        for v in ApiVersion::ALL {
            assert_eq!(v.as_str().parse::<ApiVersion>(), Ok(v));
            assert_eq!(ApiVersion::from_api_version(&v.api_version()), Some(v));
        }
        assert!("v2".parse::<ApiVersion>().is_err());
        assert_eq!(ApiVersion::from_api_version("other.io/v1alpha1"), None);
    }

    #[test]
    fn the_storage_version_is_the_newest() {
        assert_eq!(Some(&ApiVersion::STORAGE), ApiVersion::ALL.iter().max());
    }
}
