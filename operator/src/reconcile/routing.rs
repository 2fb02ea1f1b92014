//! Version routing: each operator version line reconciles only the CRs routed to it, so
//! several lines can run side by side in one cluster. A CR labelled `operatorVersion` goes
//! to that line; an unlabelled one to the lines that claim unlabelled CRs and serve the
//! apiVersion the CR was written with. Every line decides from the CR alone (its labels
//! and its managedFields), so all lines reach the same decision for the same CR.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

/// The label a CR carries to choose its operator version line (e.g. `v1`).
pub use model_orchestra_api::lines::ROUTING_LABEL;

/// `v<MAJOR>` of an operator version such as `1.4.2` (or `0.1.0` → `v0`).
pub fn default_routing_value(version: &str) -> String {
    let major = version.split('.').next().unwrap_or("0");
    format!("v{major}")
}

/// The oldest ModelOrchestra version: what a CR whose writes record no version was
/// written with (before versions were recorded, only it existed).
const FIRST_VERSION: &str = "v1alpha1";

/// The API server's record of the last write to a CR's spec by someone other than the
/// operators (`operator_manager`): of the managedFields entries that own spec fields, the
/// latest. Its `apiVersion` is the version the user wrote the spec with. Writes of only
/// labels or annotations (`kubectl label`, which writes at the cluster's preferred version)
/// and status writes do not count.
pub fn user_write<'a>(
    managed_fields: &'a [ManagedFieldsEntry],
    operator_manager: &str,
) -> Option<&'a ManagedFieldsEntry> {
    managed_fields
        .iter()
        .filter(|e| e.manager.as_deref() != Some(operator_manager))
        .filter(|e| e.subresource.as_deref().unwrap_or_default().is_empty())
        .filter(|e| e.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").is_some()))
        .max_by(|a, b| a.time.as_ref().map(|t| t.0).cmp(&b.time.as_ref().map(|t| t.0)))
}

/// The version (`v1alpha2`) of `models.titanml.co/v1alpha2`, as a write recorded it.
pub fn written_version(entry: Option<&ManagedFieldsEntry>) -> &str {
    entry
        .and_then(|e| e.api_version.as_deref())
        .and_then(|v| v.rsplit_once('/'))
        .map_or(FIRST_VERSION, |(_, version)| version)
}

/// Whether the line `routing`, serving `serves`, reconciles a CR with these labels that was
/// written at `written` (see [`written_version`]). A labelled CR goes to its line. An
/// unlabelled one (or labelled empty) goes to the lines started with `claim_unlabeled` that
/// serve the version it was written with.
pub fn is_routed_here(
    labels: Option<&BTreeMap<String, String>>,
    written: &str,
    routing: &str,
    serves: &str,
    claim_unlabeled: bool,
) -> bool {
    match labels.and_then(|l| l.get(ROUTING_LABEL)).map(String::as_str) {
        None | Some("") => claim_unlabeled && written == serves,
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
    fn a_labelled_cr_goes_only_to_its_line_whatever_it_was_written_with() {
        assert!(is_routed_here(Some(&labels("v1")), "v1alpha1", "v1", "v1alpha2", false));
        assert!(!is_routed_here(Some(&labels("v0")), "v1alpha1", "v1", "v1alpha1", true));
    }

    #[test]
    fn an_unlabelled_cr_goes_only_to_the_lines_that_claim_unlabelled_crs() {
        assert!(!is_routed_here(None, "v1alpha1", "v0", "v1alpha1", false));
        assert!(is_routed_here(None, "v1alpha1", "v0", "v1alpha1", true));
        assert!(is_routed_here(Some(&labels("")), "v1alpha1", "v0", "v1alpha1", true));
    }

    #[test]
    fn an_unlabelled_cr_goes_to_the_line_serving_the_version_it_was_written_with() {
        assert!(is_routed_here(None, "v1alpha2", "v1", "v1alpha2", true));
        assert!(!is_routed_here(None, "v1alpha2", "v0", "v1alpha1", true));
        assert!(!is_routed_here(None, "v1alpha1", "v1", "v1alpha2", true));
    }

    fn entry(manager: &str, api_version: &str, second: i64, subresource: Option<&str>) -> ManagedFieldsEntry {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            api_version: Some(api_version.into()),
            time: Some(Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())),
            subresource: subresource.map(Into::into),
            fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                serde_json::json!({"f:spec": {}}),
            )),
            ..Default::default()
        }
    }

    #[test]
    fn the_version_written_with_is_the_users_latest_write_not_the_operators_or_a_status_write() {
        let fields = [
            entry("kubectl", "models.titanml.co/v1alpha1", 10, None),
            entry("helm", "models.titanml.co/v1alpha2", 20, None),
            entry("model-orchestra-operator", "models.titanml.co/v1alpha1", 30, None),
            entry("someone", "models.titanml.co/v1alpha1", 40, Some("status")),
        ];
        assert_eq!(written_version(user_write(&fields, "model-orchestra-operator")), "v1alpha2");
        assert_eq!(written_version(user_write(&fields[..1], "model-orchestra-operator")), "v1alpha1");
    }

    #[test]
    fn a_write_of_labels_only_does_not_change_the_version_written_with() {
        let mut label = entry("kubectl-label", "models.titanml.co/v1alpha2", 20, None);
        label.fields_v1 = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
            serde_json::json!({"f:metadata": {"f:labels": {}}}),
        ));
        let fields = [entry("kubectl", "models.titanml.co/v1alpha1", 10, None), label];
        assert_eq!(written_version(user_write(&fields, "model-orchestra-operator")), "v1alpha1");
    }

    #[test]
    fn a_cr_with_no_recorded_write_was_written_with_the_first_version() {
        assert_eq!(written_version(user_write(&[], "model-orchestra-operator")), "v1alpha1");
    }
}
