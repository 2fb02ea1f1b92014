//! Version routing: each operator version reconciles only the CRs labelled for it, so
//! several versions can run side by side in one cluster.

use std::collections::BTreeMap;

/// The label a CR carries to choose its operator version line (e.g. `v1`).
pub use crate::api::ROUTING_LABEL;

/// `v<MAJOR>` of an operator version such as `1.4.2` (or `0.1.0` → `v0`).
pub fn default_routing_value(version: &str) -> String {
    let major = version.split('.').next().unwrap_or("0");
    format!("v{major}")
}

/// Whether an operator with `routing` reconciles a CR with these labels. A CR without the
/// label (or with it empty) belongs to the one instance started with `claim_unlabeled`.
pub fn is_routed_here(labels: Option<&BTreeMap<String, String>>, routing: &str, claim_unlabeled: bool) -> bool {
    match labels.and_then(|l| l.get(ROUTING_LABEL)).map(String::as_str) {
        None | Some("") => claim_unlabeled,
        Some(value) => value == routing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(ROUTING_LABEL.to_string(), v.to_string())])
    }

    #[test]
    fn the_default_routing_value_is_v_and_the_major_version() {
        assert_eq!(default_routing_value("0.1.0"), "v0");
        assert_eq!(default_routing_value("12.3.4-rc.1"), "v12");
    }

    #[test]
    fn a_labelled_cr_goes_only_to_its_version() {
        assert!(is_routed_here(Some(&labels("v1")), "v1", false));
        assert!(!is_routed_here(Some(&labels("v0")), "v1", true));
    }

    #[test]
    fn an_unlabelled_cr_goes_only_to_the_instance_that_claims_unlabelled_crs() {
        assert!(!is_routed_here(None, "v1", false));
        assert!(is_routed_here(None, "v1", true));
        assert!(is_routed_here(Some(&labels("")), "v0", true));
    }
}
