//! A bundle among the package's others — the other version directories of its `bundles/`,
//! and the shared CRDs releases installed (`bundles/crds/`) — checked for what OLM v0
//! refuses when the package's lines share a cluster, each installed by a Subscription of
//! its own with an AllNamespaces OperatorGroup:
//!
//! - a CSV may not own an API version (group, version, kind) that a bundle of another line
//!   owns: AllNamespaces groups intersect, and OLM v0 fails whichever CSV comes second
//!   (`InterOperatorGroupOwnerConflict`, "intersecting operatorgroups provide the same
//!   apis");
//! - a CRD the bundle carries replaces the cluster's when it installs: it must keep every
//!   version a released CRD stored and served, and accept every object a released schema
//!   accepted ([`crate::crd_compat`]), or OLM v0 fails the InstallPlan.
//!
//! A line is a major version (`stable-v<MAJOR>`). Bundles of one line replace one another
//! along their channel, so only bundles of other lines are compared for ownership.

use std::path::Path;

use serde_json::Value;

use super::finding::Report;
use super::CSV_FILE;
use crate::crd_compat;

/// (group, version, kind) of an API a CSV owns.
type Api = (String, String, String);

/// The APIs a CSV owns (`spec.customresourcedefinitions.owned`), by index.
fn owned_apis(csv: &Value) -> Vec<(usize, Api)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, o)| {
            let group = o["name"].as_str().and_then(|n| n.split_once('.')).map(|(_, g)| g).unwrap_or_default();
            (i, (group.to_string(), text(&o["version"]), text(&o["kind"])))
        })
        .collect()
}

/// The major version of a CSV's `spec.version` (its line).
fn line_of(csv: &Value) -> Option<u64> {
    semver::Version::parse(csv["spec"]["version"].as_str()?).ok().map(|v| v.major)
}

/// Checks the bundle in `dir` (its CSV and the CRDs it carries) against the other bundles
/// and released CRDs of its parent directory.
pub(super) fn check(dir: &Path, (csv_file, csv): (&str, &Value), crds: &[&(String, Value)], r: &mut Report) {
    let Some(parent) = dir.parent() else { return };
    let own_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if let Some(line) = line_of(csv) {
        for (name, other) in siblings(parent, own_name) {
            let Some(other_line) = line_of(&other).filter(|l| *l != line) else { continue };
            let theirs: Vec<Api> = owned_apis(&other).into_iter().map(|(_, api)| api).collect();
            for (i, (group, version, kind)) in owned_apis(csv).into_iter().filter(|(_, api)| theirs.contains(api)) {
                r.error(
                    csv_file,
                    &format!("spec.customresourcedefinitions.owned[{i}]"),
                    format!(
                        "{kind} {group}/{version} is owned by bundles/{name} too, of the v{other_line} line: installed side by side, OLM v0 \
                         fails the second CSV (InterOperatorGroupOwnerConflict: \"intersecting operatorgroups provide the same apis\") \
                         (fix: own only the API version the v{line} line serves, or none: --crd-mode shared)"
                    ),
                );
            }
        }
    }
    let mut unreadable = Vec::new();
    let released: Vec<(String, Value)> = super::released_crds::released_crds(parent, &mut unreadable)
        .into_iter()
        .filter(|(label, _)| *label != format!("bundles/{own_name}"))
        .collect();
    for problem in unreadable {
        r.warning("(released CRDs)", "", format!("{problem}: not compared with this bundle's CRD"));
    }
    for (file, crd) in crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        for (release, old) in released.iter().filter(|(_, old)| old["metadata"]["name"] == name) {
            for b in crd_compat::replacing(old, crd) {
                r.error(
                    file,
                    "spec.versions",
                    format!(
                        "replacing the CRD {release} installed: {b}; {} (fix: keep every version and field a released CRD has; add versions and optional fields instead)",
                        b.olm_v0(name)
                    ),
                );
            }
        }
    }
}

/// The CSVs of the other version directories of `parent`, by directory name.
fn siblings(parent: &Path, own_name: &str) -> Vec<(String, Value)> {
    let mut dirs: Vec<_> =
        std::fs::read_dir(parent).into_iter().flatten().filter_map(Result::ok).map(|e| e.path()).collect();
    dirs.sort();
    dirs.into_iter()
        .filter_map(|d| {
            let name = d.file_name()?.to_str()?.to_string();
            if name == own_name || semver::Version::parse(&name).is_err() {
                return None;
            }
            let text = std::fs::read_to_string(d.join("manifests").join(CSV_FILE)).ok()?;
            Some((name, serde_yaml::from_str(&text).ok()?))
        })
        .collect()
}
