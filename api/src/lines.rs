//! Operator lines: each installed operator line reconciles the CRs routed to it, so several
//! lines run side by side in one cluster. A line is named by its routing value (`v0`,
//! `v1`, …), which names its Deployment, RBAC and Lease, and serves one API version.

use crate::ApiVersion;

/// The label a CR carries to choose its line explicitly (e.g. `v1`). Always wins.
pub const ROUTING_LABEL: &str = "operatorVersion";
/// The annotation a user sets to choose, or change, the API version an unlabelled CR is
/// served as (`v1alpha2`); without it, a CR is served as the version it was created with.
pub use crate::keys::API_VERSION_ANNOTATION;

/// The routing value a line takes when none is given: `v<MAJOR>` of its release, but never
/// below the first major release that serves its API version — so a 0.x binary started
/// for `v1alpha2` is the `v1` line, not a second `v0` line waiting for the `v0` Lease.
pub fn default_routing(release: &str, api_version: ApiVersion) -> String {
    let major: u64 = release.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    format!("v{}", major.max(api_version.first_major()))
}

/// `model-orchestra-operator-<routing>`: the name of a line's Deployment, ServiceAccount,
/// ClusterRole and binding, and of its Lease.
pub fn line_name(routing: &str) -> String {
    format!("model-orchestra-operator-{}", routing.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_routing_value_is_v_and_the_major_version() {
        assert_eq!(default_routing("0.1.0", ApiVersion::V1alpha1), "v0");
        assert_eq!(default_routing("12.3.4-rc.1", ApiVersion::V1alpha2), "v12");
    }

    #[test]
    fn a_release_below_the_first_line_of_its_api_version_takes_that_line() {
        assert_eq!(default_routing("0.1.0", ApiVersion::V1alpha2), "v1");
        assert_eq!(default_routing("1.0.0", ApiVersion::V1alpha2), "v1");
    }

    #[test]
    fn line_names_carry_the_routing_value() {
        assert_eq!(line_name("V1"), "model-orchestra-operator-v1");
    }
}
