//! Version routing: each operator line reconciles only the CRs routed to it, so several
//! lines run side by side in one cluster, and a CR's contract (the API version it is served
//! as) is chosen once.
//!
//! In order:
//! 1. A CR labelled `operatorVersion` goes to that line (an explicit choice).
//! 2. Else an annotation `models.titanml.co/api-version` names the version it is served as
//!    (an explicit choice, and the way to move a CR).
//! 3. Else the version the serving line recorded in the status (`status.servedAs`).
//! 4. Else the version it was created with (from its managedFields).
//!
//! Writes at another version (`kubectl edit`, `patch`, `label` write at the cluster's
//! preferred version) never move a CR. Every line decides from the CR alone, so all lines
//! reach the same decision for the same resourceVersion, with no webhook.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
use model_orchestra_api::lines::{API_VERSION_ANNOTATION, ROUTING_LABEL};
use model_orchestra_api::ApiVersion;

/// Where a CR goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// To the line with this routing value (its label).
    Line(String),
    /// To the line that takes unlabelled CRs and serves this version.
    Version(ApiVersion, Why),
    /// Nowhere: the annotation names no version of this API.
    Invalid(String),
}

/// Why an unlabelled CR is served as its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The `models.titanml.co/api-version` annotation.
    Annotation,
    /// The version its serving line recorded.
    Recorded,
    /// The version it was created with.
    Created,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Line(line) => write!(f, "the {line} line (its {ROUTING_LABEL} label)"),
            Route::Version(version, why) => {
                let why = match why {
                    Why::Annotation => format!("its {API_VERSION_ANNOTATION} annotation"),
                    Why::Recorded => "the version it is served as".to_string(),
                    Why::Created => "the version it was created with".to_string(),
                };
                write!(f, "the line serving {version} that takes unlabelled CRs ({why})")
            }
            Route::Invalid(value) => write!(
                f,
                "no line: its {API_VERSION_ANNOTATION} annotation `{value}` is not a version (v1alpha1, v1alpha2)"
            ),
        }
    }
}

/// What routing reads of a CR.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoutingFacts<'a> {
    pub labels: Option<&'a BTreeMap<String, String>>,
    pub annotations: Option<&'a BTreeMap<String, String>>,
    /// `status.servedAs`.
    pub recorded: Option<&'a str>,
    /// The write that created the CR (see [`creation_write`]).
    pub creation: Option<&'a ManagedFieldsEntry>,
}

/// Where the CR goes (see the module's rules).
pub fn route(facts: &RoutingFacts) -> Route {
    if let Some(line) = facts.labels.and_then(|l| l.get(ROUTING_LABEL)).filter(|l| !l.is_empty()) {
        return Route::Line(line.clone());
    }
    if let Some(value) = facts.annotations.and_then(|a| a.get(API_VERSION_ANNOTATION)).filter(|v| !v.is_empty()) {
        return match value.parse() {
            Ok(version) => Route::Version(version, Why::Annotation),
            Err(_) => Route::Invalid(value.clone()),
        };
    }
    if let Some(version) = facts.recorded.and_then(|v| v.parse().ok()) {
        return Route::Version(version, Why::Recorded);
    }
    Route::Version(created_with(facts.creation), Why::Created)
}

/// A line: its routing value, the version it serves and whether it takes unlabelled CRs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub routing: String,
    pub serves: ApiVersion,
    pub claim_unlabeled: bool,
}

impl Line {
    /// Whether this line reconciles a CR routed so.
    pub fn takes(&self, route: &Route) -> bool {
        match route {
            Route::Line(line) => *line == self.routing,
            Route::Version(version, _) => self.claim_unlabeled && *version == self.serves,
            Route::Invalid(_) => false,
        }
    }
}

/// The write that created the CR, from its managedFields: of the writes by someone other
/// than the operators (`operator_manager`) to the object itself (not its status), those
/// owning spec fields if any do, the one whose time is the CR's creation (to the second),
/// else the oldest. Its `apiVersion` is the version the CR was created with (until that
/// writer writes again at another version, which the serving line's record makes moot).
pub fn creation_write<'a>(
    managed_fields: &'a [ManagedFieldsEntry],
    operator_manager: &str,
    created: Option<&Time>,
) -> Option<&'a ManagedFieldsEntry> {
    let users: Vec<&ManagedFieldsEntry> = managed_fields
        .iter()
        .filter(|e| e.manager.as_deref() != Some(operator_manager))
        .filter(|e| e.subresource.as_deref().unwrap_or_default().is_empty())
        .collect();
    let owns_spec = |e: &&ManagedFieldsEntry| e.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").is_some());
    let spec_writers: Vec<&ManagedFieldsEntry> = users.iter().copied().filter(owns_spec).collect();
    let candidates = if spec_writers.is_empty() { users } else { spec_writers };
    let second = |t: Option<&Time>| t.map(|t| t.0.as_second());
    let at_creation =
        candidates.iter().copied().find(|e| created.is_some() && second(e.time.as_ref()) == second(created));
    at_creation.or_else(|| candidates.iter().copied().min_by_key(|e| e.time.as_ref().map(|t| t.0)))
}

/// The version of a creating write (`models.titanml.co/v1alpha2` → `v1alpha2`); a CR with
/// no recorded write was created as `v1alpha1` (before versions were recorded, only it
/// existed).
pub fn created_with(entry: Option<&ManagedFieldsEntry>) -> ApiVersion {
    entry.and_then(|e| e.api_version.as_deref()).and_then(ApiVersion::from_api_version).unwrap_or(ApiVersion::V1alpha1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;

    const OPERATOR: &str = "model-orchestra-operator";

    fn map(k: &str, v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(k.to_string(), v.to_string())])
    }

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
    }

    fn entry(manager: &str, version: &str, second: i64, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            api_version: Some(format!("models.titanml.co/{version}")),
            time: Some(at(second)),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    fn spec_write(manager: &str, version: &str, second: i64) -> ManagedFieldsEntry {
        entry(manager, version, second, serde_json::json!({"f:spec": {}}))
    }

    fn line(routing: &str, serves: ApiVersion, claim_unlabeled: bool) -> Line {
        Line { routing: routing.into(), serves, claim_unlabeled }
    }

    #[test]
    fn a_labelled_cr_goes_only_to_its_line_whatever_else_it_carries() {
        let labels = map(ROUTING_LABEL, "v1");
        let annotations = map(API_VERSION_ANNOTATION, "v1alpha1");
        let r = route(&RoutingFacts { labels: Some(&labels), annotations: Some(&annotations), ..Default::default() });
        assert_eq!(r, Route::Line("v1".into()));
        assert!(line("v1", ApiVersion::V1alpha2, false).takes(&r));
        assert!(!line("v0", ApiVersion::V1alpha1, true).takes(&r));
    }

    #[test]
    fn an_unlabelled_cr_goes_only_to_a_line_that_claims_unlabelled_crs_of_its_version() {
        let r = Route::Version(ApiVersion::V1alpha1, Why::Created);
        assert!(line("v0", ApiVersion::V1alpha1, true).takes(&r));
        assert!(!line("v0", ApiVersion::V1alpha1, false).takes(&r));
        assert!(!line("v1", ApiVersion::V1alpha2, true).takes(&r));
    }

    #[test]
    fn a_label_removed_leaves_the_cr_with_the_line_that_recorded_serving_it() {
        // Created at v1alpha2 (the v1 line's), labelled operatorVersion=v0: the v0 line serves
        // it and records v1alpha1. The label removed, that record routes it: still v0.
        let created = spec_write("kubectl-client-side-apply", "v1alpha2", 10);
        let (v0, v1) = (line("v0", ApiVersion::V1alpha1, true), line("v1", ApiVersion::V1alpha2, true));
        let labels = map(ROUTING_LABEL, "v0");
        let labelled = route(&RoutingFacts {
            labels: Some(&labels),
            recorded: Some("v1alpha2"),
            creation: Some(&created),
            ..Default::default()
        });
        assert!(v0.takes(&labelled) && !v1.takes(&labelled));
        let unlabelled =
            route(&RoutingFacts { recorded: Some("v1alpha1"), creation: Some(&created), ..Default::default() });
        assert_eq!(unlabelled, Route::Version(ApiVersion::V1alpha1, Why::Recorded));
        assert!(v0.takes(&unlabelled) && !v1.takes(&unlabelled));
    }

    #[test]
    fn an_empty_label_is_no_label() {
        let labels = map(ROUTING_LABEL, "");
        let r = route(&RoutingFacts { labels: Some(&labels), ..Default::default() });
        assert_eq!(r, Route::Version(ApiVersion::V1alpha1, Why::Created));
    }

    #[test]
    fn the_annotation_chooses_the_version_over_the_recorded_and_the_created_one() {
        let annotations = map(API_VERSION_ANNOTATION, "v1alpha2");
        let created = spec_write("kubectl", "v1alpha1", 10);
        let facts = RoutingFacts {
            annotations: Some(&annotations),
            recorded: Some("v1alpha1"),
            creation: Some(&created),
            ..Default::default()
        };
        assert_eq!(route(&facts), Route::Version(ApiVersion::V1alpha2, Why::Annotation));
    }

    #[test]
    fn an_annotation_naming_no_version_routes_nowhere() {
        let annotations = map(API_VERSION_ANNOTATION, "v2");
        let r = route(&RoutingFacts { annotations: Some(&annotations), ..Default::default() });
        assert_eq!(r, Route::Invalid("v2".into()));
        assert!(!line("v0", ApiVersion::V1alpha1, true).takes(&r));
    }

    #[test]
    fn the_recorded_version_wins_over_the_created_one() {
        let created = spec_write("kubectl", "v1alpha2", 10);
        let facts = RoutingFacts { recorded: Some("v1alpha1"), creation: Some(&created), ..Default::default() };
        assert_eq!(route(&facts), Route::Version(ApiVersion::V1alpha1, Why::Recorded));
    }

    #[test]
    fn without_a_record_a_cr_is_served_as_the_version_it_was_created_with() {
        let created = spec_write("kubectl-client-side-apply", "v1alpha2", 10);
        let facts = RoutingFacts { creation: Some(&created), ..Default::default() };
        assert_eq!(route(&facts), Route::Version(ApiVersion::V1alpha2, Why::Created));
        assert_eq!(route(&RoutingFacts::default()), Route::Version(ApiVersion::V1alpha1, Why::Created));
    }

    #[test]
    fn the_creating_write_is_the_one_at_the_creation_time_not_a_later_edit_at_another_version() {
        let fields = [
            spec_write("kubectl-patch", "v1alpha2", 30),
            spec_write("kubectl-client-side-apply", "v1alpha1", 10),
            spec_write("kubectl-edit", "v1alpha2", 20),
        ];
        let found = creation_write(&fields, OPERATOR, Some(&at(10))).unwrap();
        assert_eq!(found.manager.as_deref(), Some("kubectl-client-side-apply"));
    }

    #[test]
    fn when_the_creator_wrote_again_the_oldest_spec_write_counts() {
        let fields = [spec_write("kubectl-edit", "v1alpha2", 30), spec_write("helm", "v1alpha1", 20)];
        assert_eq!(created_with(creation_write(&fields, OPERATOR, Some(&at(10)))), ApiVersion::V1alpha1);
    }

    #[test]
    fn operator_status_and_label_only_writes_are_not_the_creation() {
        let mut status = spec_write("someone", "v1alpha2", 5);
        status.subresource = Some("status".into());
        let label = entry("kubectl-label", "v1alpha2", 1, serde_json::json!({"f:metadata": {"f:labels": {}}}));
        let fields = [spec_write(OPERATOR, "v1alpha2", 1), status, label, spec_write("kubectl", "v1alpha1", 9)];
        assert_eq!(created_with(creation_write(&fields, OPERATOR, Some(&at(1)))), ApiVersion::V1alpha1);
    }
}
