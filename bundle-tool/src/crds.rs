//! The shared CRD (installed once per cluster, outside the bundles) and the rule that a new
//! release keeps it compatible with every released bundle.

use std::path::Path;

use serde_json::Value;

use crate::bundle::{CRD_FILE, CSV_FILE};
use crate::error::ToolError;

/// The CRD with every version this build serves.
pub fn crd() -> Value {
    serde_json::to_value(model_orchestra_api::crd::crd()).expect("the CRD serialises")
}

/// Where the shared CRD each release installed is kept, under the bundles directory
/// (`bundles/releases.yaml` records them).
pub const RELEASED_CRDS_DIR: &str = "crds";

/// Checks `new` against every release under `bundles_dir` with the rules OLM applies when
/// a CRD is replaced (olm.md §6.5, §7.2): exactly one storage version; each CRD version a
/// released bundle serves is still served; every version a released CRD stored stays
/// listed (objects may be stored in it); and no released schema loses or retypes a field,
/// gains a required field, narrows an enum, tightens a bound or changes a default. The
/// released CRDs are those the bundles own and the shared ones kept in
/// [`RELEASED_CRDS_DIR`]. Returns every violation.
pub fn check_compatible(new: &Value, bundles_dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let versions = || new["spec"]["versions"].as_array().into_iter().flatten();
    let storage: Vec<&str> = versions().filter(|v| v["storage"] == true).filter_map(|v| v["name"].as_str()).collect();
    if storage.len() != 1 {
        problems.push(format!(
            "the new CRD must mark exactly one version as storage, it marks {}: {storage:?}",
            storage.len()
        ));
    }
    let listed: Vec<&str> = versions().filter_map(|v| v["name"].as_str()).collect();
    let served: Vec<(&str, &Value)> = versions()
        .filter(|v| v["served"] == true)
        .filter_map(|v| Some((v["name"].as_str()?, &v["schema"]["openAPIV3Schema"])))
        .collect();
    let Ok(entries) = std::fs::read_dir(bundles_dir) else { return problems };
    let mut dirs: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let mut released: Vec<(String, Value)> = Vec::new();
    for dir in dirs {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if name == RELEASED_CRDS_DIR {
            let mut files: Vec<_> =
                std::fs::read_dir(&dir).into_iter().flatten().filter_map(Result::ok).map(|e| e.path()).collect();
            files.sort();
            for file in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
                let label = format!(
                    "bundles/{RELEASED_CRDS_DIR}/{}",
                    file.file_name().and_then(|n| n.to_str()).unwrap_or_default()
                );
                match std::fs::read_to_string(&file).ok().and_then(|t| serde_yaml::from_str::<Value>(&t).ok()) {
                    Some(crd) => released.push((label, crd)),
                    None => problems.push(format!("{label}: not a readable CRD")),
                }
            }
            continue;
        }
        let csv_path = dir.join("manifests").join(CSV_FILE);
        if let Some(csv) = std::fs::read_to_string(&csv_path).ok().and_then(|t| serde_yaml::from_str::<Value>(&t).ok())
        {
            if let Some(v) = csv["metadata"]["annotations"][crate::bundle::CRD_VERSION_ANNOTATION].as_str() {
                if !served.iter().any(|(name, _)| *name == v) {
                    problems.push(format!("bundles/{name} serves CRD version {v}, which the new CRD no longer serves"));
                }
            }
        }
        let crd_path = dir.join("manifests").join(CRD_FILE);
        if let Some(old) = std::fs::read_to_string(&crd_path).ok().and_then(|t| serde_yaml::from_str::<Value>(&t).ok())
        {
            released.push((format!("bundles/{name}"), old));
        }
    }
    for (release, old) in &released {
        let old_versions = || old["spec"]["versions"].as_array().into_iter().flatten();
        for v in old_versions().filter(|v| v["storage"] == true) {
            let name = v["name"].as_str().unwrap_or_default();
            if !listed.contains(&name) {
                problems.push(format!("{release}: CRD version {name} was the storage version and must stay in spec.versions (it may stop being served)"));
            }
        }
        for v in old_versions().filter(|v| v["served"] == true) {
            let name = v["name"].as_str().unwrap_or_default();
            match served.iter().find(|(n, _)| *n == name) {
                None => problems.push(format!("{release}: CRD version {name} is no longer served")),
                Some((_, schema)) => schema_compatible(
                    &v["schema"]["openAPIV3Schema"],
                    schema,
                    &format!("{release} {name}"),
                    "",
                    &mut problems,
                ),
            }
        }
    }
    problems
}

/// Every property of `old` exists in `new` with the same type, and nothing that old
/// objects satisfy is rejected by the new validation.
fn schema_compatible(old: &Value, new: &Value, release: &str, path: &str, problems: &mut Vec<String>) {
    if old["type"] != new["type"] && !old["type"].is_null() {
        problems.push(format!("{release}: {} changed type from {} to {}", display(path), old["type"], new["type"]));
        return;
    }
    let old_required: Vec<&Value> = old["required"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    for r in new["required"].as_array().into_iter().flatten().filter(|r| !old_required.contains(r)) {
        problems.push(format!("{release}: {} gained the required field {r}", display(path)));
    }
    if old["default"] != new["default"] {
        problems.push(format!(
            "{release}: {} changed its default from {} to {}",
            display(path),
            old["default"],
            new["default"]
        ));
    }
    match (old["enum"].as_array(), new["enum"].as_array()) {
        (None, Some(_)) => problems.push(format!("{release}: {} gained an enum", display(path))),
        (Some(o), Some(n)) => {
            for gone in o.iter().filter(|v| !n.contains(v)) {
                problems.push(format!("{release}: {} no longer allows {gone}", display(path)));
            }
        }
        _ => {}
    }
    for (bound, lower) in [
        ("minimum", true),
        ("minLength", true),
        ("minItems", true),
        ("minProperties", true),
        ("maximum", false),
        ("maxLength", false),
        ("maxItems", false),
        ("maxProperties", false),
    ] {
        let (o, n) = (old[bound].as_f64(), new[bound].as_f64());
        let tighter = match (o, n) {
            (None, Some(_)) => true,
            (Some(o), Some(n)) => {
                if lower {
                    n > o
                } else {
                    n < o
                }
            }
            _ => false,
        };
        if tighter {
            problems.push(format!(
                "{release}: {} tightened {bound} from {} to {}",
                display(path),
                old[bound],
                new[bound]
            ));
        }
    }
    if let Some(props) = old["properties"].as_object() {
        for (k, sub) in props {
            let p = format!("{path}.{k}");
            match new["properties"].get(k) {
                None => problems.push(format!("{release}: {} was removed", display(&p))),
                Some(n) => schema_compatible(sub, n, release, &p, problems),
            }
        }
    }
    if old["items"].is_object() {
        schema_compatible(&old["items"], &new["items"], release, &format!("{path}[]"), problems);
    }
    if old["additionalProperties"].is_object() {
        schema_compatible(
            &old["additionalProperties"],
            &new["additionalProperties"],
            release,
            &format!("{path}.*"),
            problems,
        );
    }
}

fn display(path: &str) -> &str {
    if path.is_empty() {
        "(root)"
    } else {
        path
    }
}

pub fn refuse_incompatible(new: &Value, bundles_dir: &Path) -> Result<(), ToolError> {
    let problems = check_compatible(new, bundles_dir);
    if problems.is_empty() {
        return Ok(());
    }
    Err(ToolError::Invalid(format!(
        "the CRD is not compatible with released bundles:\n  - {}\nkeep every served version and field (add new versions or optional fields instead)",
        problems.join("\n  - ")
    )))
}
