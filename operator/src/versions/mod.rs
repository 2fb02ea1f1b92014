//! The served API versions, one module each: its vendored chart, how its CRs (and its
//! chart's `values.yaml`) become the model's [`Values`], and the rules of its contract that
//! the renderer computes. Adding a version is one module here, its chart, and its types in
//! the API crate; no code outside this module asks which version a CR was written in.

mod v1alpha1;
mod v1alpha2;

use include_dir::Dir;
use model_orchestra_api::{ApiVersion, InputErrors};
use serde_json::Value;

use crate::model::{ContractRules, Values};

/// A chart compiled into the binary: its templates, and its `Chart.yaml` and `values.yaml`
/// as JSON (parsed at build time, see `build.rs`).
pub struct EmbeddedChart {
    /// Its directory in the repository (`charts/model-orchestra-1.0`).
    pub dir: &'static str,
    pub templates: Dir<'static>,
    pub chart_json: &'static str,
    pub values_json: &'static str,
}

/// One served version of the ModelOrchestra API.
pub trait ServedVersion: Sync {
    fn api_version(&self) -> ApiVersion;
    /// The chart its CRs are rendered with.
    fn embedded_chart(&self) -> &'static EmbeddedChart;
    /// A spec (or its chart's `values.yaml`) read strictly as this version's, with this
    /// version's own rules checked, as values.
    fn values(&self, spec: &Value) -> Result<Values, InputErrors>;
    /// What the renderer computes by this version's contract.
    fn rules(&self) -> &'static ContractRules;
    /// The defaults its chart's `values.yaml` must give beyond those every render needs
    /// (found when the chart loads rather than when a CR needs them).
    fn check_defaults(&self, _defaults: &Values) -> Result<(), String> {
        Ok(())
    }
}

static VERSIONS: [&dyn ServedVersion; 2] = [&v1alpha1::V1alpha1, &v1alpha2::V1alpha2];

/// The module of `version`.
pub fn served(version: ApiVersion) -> &'static dyn ServedVersion {
    *VERSIONS.iter().find(|v| v.api_version() == version).expect("every API version has a module")
}

/// Names, among the mistakes `serves` found in a spec, the fields that are another
/// version's: a write at another version (kubectl writes at the cluster's preferred one)
/// that carries fields the CR's own version does not have. Their message says how to remove
/// them or move the CR; the rest are left as they are.
pub fn name_foreign_fields(serves: ApiVersion, spec: &Value, errors: InputErrors, name: &str) -> InputErrors {
    let others: Vec<(ApiVersion, Vec<String>)> = ApiVersion::ALL
        .into_iter()
        .filter(|v| *v != serves)
        .map(|v| {
            let unknown = match served(v).values(spec) {
                Ok(_) => vec![],
                Err(e) => e.into_vec().into_iter().map(|e| e.field).collect(),
            };
            (v, unknown)
        })
        .collect();
    let named = errors.into_vec().into_iter().map(|e| {
        let unknown = e.message.starts_with("unknown field");
        match others.iter().find(|(_, unknown_there)| unknown && !unknown_there.contains(&e.field)) {
            Some((other, _)) => model_orchestra_api::InputError::new(
                e.field,
                format!(
                    "a field of {other}, but this ModelOrchestra is served as {serves} (the version it was created \
                     with, or chose): remove it, or move the CR to {other} with `kubectl annotate modelorchestra/{name} \
                     {}={other}` (docs: Moving a CR between versions)",
                    model_orchestra_api::lines::API_VERSION_ANNOTATION
                ),
            ),
            None => e,
        }
    });
    InputErrors::check(named.collect()).expect_err("there were errors")
}

/// The contract rules of `version`.
pub fn rules(version: ApiVersion) -> &'static ContractRules {
    served(version).rules()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_version_has_exactly_one_module() {
        for version in ApiVersion::ALL {
            assert_eq!(VERSIONS.iter().filter(|v| v.api_version() == version).count(), 1, "{version}");
        }
    }
}
