//! The shared CRD, installed once per cluster, outside the bundles (the rule that a new
//! release keeps it compatible with every released one: [`crate::bundle::released_crds`]).

use serde_json::Value;

/// The CRD with every version this build serves.
pub fn crd() -> Value {
    serde_json::to_value(model_orchestra_api::crd::crd()).expect("the CRD serialises")
}
