//! The CRDs releases installed — those released bundles carry and the shared ones kept in
//! [`RELEASED_CRDS_DIR`] — and the rule that a new CRD keeps compatible with every one of
//! them ([`crate::crd_compat`]).

use std::path::Path;

use serde_json::Value;

use super::{CRD_FILE, CSV_FILE};
use crate::crd_compat::{self, Break};
use crate::error::ToolError;

/// Where the shared CRD each release installed is kept, under the bundles directory
/// (`bundles/releases.yaml` records them).
pub const RELEASED_CRDS_DIR: &str = "crds";

/// Checks `new` against every release under `bundles_dir` with the rules OLM applies when
/// a CRD is replaced ([`crd_compat`]): exactly one storage version; each CRD version a
/// released bundle serves is still served; every version a released CRD stored stays
/// listed (objects may be stored in it); and no released schema refuses what it accepted.
/// The released CRDs are those the bundles own and the shared ones kept in
/// [`RELEASED_CRDS_DIR`]. Returns every violation.
pub fn check_compatible(new: &Value, bundles_dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let storage = crd_compat::storage_versions(new);
    if storage.len() != 1 {
        problems.push(format!(
            "the new CRD must mark exactly one version as storage, it marks {}: {storage:?}",
            storage.len()
        ));
    }
    let served = crd_compat::served(new);
    for (release, old) in released_crds(bundles_dir, &mut problems) {
        for b in crd_compat::replacing(&old, new) {
            match b {
                Break::Narrowed { .. } => problems.push(format!("{release} {b}")),
                _ => problems.push(format!("{release}: {b}")),
            }
        }
    }
    for (dir, version) in shared_bundles(bundles_dir) {
        if !served.contains(&version.as_str()) {
            problems.push(format!("{dir} serves CRD version {version}, which the new CRD no longer serves"));
        }
    }
    problems
}

/// The CRDs released bundles under `bundles_dir` installed, labelled by where they are:
/// those the bundles own (`bundles/X.Y.Z`) and the shared ones kept in
/// [`RELEASED_CRDS_DIR`] (`bundles/crds/X.Y.Z.yaml`). An unreadable one is a problem.
pub fn released_crds(bundles_dir: &Path, problems: &mut Vec<String>) -> Vec<(String, Value)> {
    let mut released = Vec::new();
    for dir in sorted_entries(bundles_dir).into_iter().filter(|p| p.is_dir()) {
        let name = file_name(&dir);
        if name == RELEASED_CRDS_DIR {
            for file in sorted_entries(&dir).into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
                let label = format!("bundles/{RELEASED_CRDS_DIR}/{}", file_name(&file));
                match read_yaml(&file) {
                    Some(crd) => released.push((label, crd)),
                    None => problems.push(format!("{label}: not a readable CRD")),
                }
            }
        } else if let Some(old) = read_yaml(&dir.join("manifests").join(CRD_FILE)) {
            released.push((format!("bundles/{name}"), old));
        }
    }
    released
}

/// The shared-CRD bundles under `bundles_dir` and the CRD version each serves.
fn shared_bundles(bundles_dir: &Path) -> Vec<(String, String)> {
    sorted_entries(bundles_dir)
        .into_iter()
        .filter(|p| p.is_dir())
        .filter_map(|dir| {
            let csv = read_yaml(&dir.join("manifests").join(CSV_FILE))?;
            let version = csv["metadata"]["annotations"][super::CRD_VERSION_ANNOTATION].as_str()?.to_string();
            Some((format!("bundles/{}", file_name(&dir)), version))
        })
        .collect()
}

fn sorted_entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).into_iter().flatten().filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    entries
}

fn file_name(path: &Path) -> String {
    path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string()
}

fn read_yaml(path: &Path) -> Option<Value> {
    serde_yaml::from_str(&std::fs::read_to_string(path).ok()?).ok()
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
