//! Rules of ours that `opm validate` does not have: the lines of one package run side by
//! side on one cluster — under OLM v0 each by a Subscription of its own, with an
//! AllNamespaces OperatorGroup — and share the CRD, so a catalog must not offer a bundle
//! that would refuse or break another line when it installs:
//!
//! - `crd-keeps-versions`: a bundle carrying the CRD replaces the cluster's; if its CRD
//!   stopped serving a version another bundle relies on (`v1alpha1`), that line's objects
//!   could no longer be read or written. OLM v1 would install it (its CRD upgrade check
//!   compares the CRD with the previous one, not with the other lines).
//! - `crd-replaces-safely`: a carried CRD must be able to replace every other bundle's copy
//!   that may be on the cluster before it ([`crate::crd_compat`]: stored versions kept,
//!   nothing the old schema accepts refused), or OLM v0 fails the InstallPlan ("risk of
//!   data loss …", "updated validation is too restrictive"). Bundles of one line install
//!   in version order; those of different lines in any order, so both ways.
//! - `one-owner-per-api`: two lines' CSVs may not own the same API version: OLM v0 fails
//!   the second to install (`InterOperatorGroupOwnerConflict`, "intersecting
//!   operatorgroups provide the same apis").
//!
//! What a bundle relies on: its `olm.gvk` properties, and for a shared-CRD bundle (which
//! carries no CRD) the version its CSV names in `models.titanml.co/crd-version`. What a
//! bundle carries: the CRDs among its `olm.bundle.object` properties (a catalog rendered
//! with `--migrate-level bundle-object-to-csv-metadata` inlines none: nothing to compare).
//! What it owns: its CSV's `customresourcedefinitions.owned`. Its line: its major version.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use serde_json::Value;

use super::fbc::{Bundle, Catalog, Origin};
use super::validate::Finding;
use crate::bundle::CRD_VERSION_ANNOTATION;
use crate::crd_compat;

/// (group, kind) of an API.
type GroupKind = (String, String);
/// (group, version, kind) of an API a CSV owns.
type Owned = (String, String, String);

/// Every bundle that would refuse or break another bundle of its package.
pub fn check(catalog: &Catalog) -> Vec<Finding> {
    let mut findings = keeps_versions(catalog);
    findings.extend(replaces_safely(catalog));
    findings.extend(one_owner_per_api(catalog));
    findings
}

fn object_of(bundle: &Bundle) -> String {
    format!("olm.bundle {:?} (package {:?})", bundle.name, bundle.package)
}

/// `crd-keeps-versions`.
fn keeps_versions(catalog: &Catalog) -> Vec<Finding> {
    let mut findings = Vec::new();
    let bundles: Vec<&Bundle> = catalog.bundles.iter().map(|(b, _)| b).collect();
    for (carrier, origin) in &catalog.bundles {
        for (api, served) in served_by_crds(carrier) {
            for other in bundles.iter().filter(|b| b.package == carrier.package && b.name != carrier.name) {
                for version in relied_on(other).get(&api).into_iter().flatten().filter(|v| !served.contains(*v)) {
                    findings.push(Finding {
                        object: object_of(carrier),
                        rule: "crd-keeps-versions",
                        message: format!(
                            "its CRD for {kind}.{group} does not serve {version}, which bundle {other:?} relies on: installing it replaces the \
                             cluster's CRD and {other:?}'s {kind} {version} objects could no longer be read or written (fix: keep serving \
                             {version} in the new CRD, or take {other:?} out of the catalog)",
                            kind = api.1,
                            group = api.0,
                            other = other.name,
                        ),
                        origin: Some(origin.clone()),
                    });
                }
            }
        }
    }
    findings
}

/// A bundle's version (its `olm.package` property).
fn version_of(bundle: &Bundle) -> Option<semver::Version> {
    bundle
        .properties
        .iter()
        .find(|p| p.type_ == "olm.package")
        .and_then(|p| p.value["version"].as_str())
        .and_then(|v| semver::Version::parse(v).ok())
}

/// `crd-replaces-safely`.
fn replaces_safely(catalog: &Catalog) -> Vec<Finding> {
    let carriers: Vec<(&Bundle, &Origin, Option<semver::Version>, Vec<Value>)> = catalog
        .bundles
        .iter()
        .map(|(b, o)| (b, o, version_of(b), crds(b).collect::<Vec<_>>()))
        .filter(|(_, _, _, crds)| !crds.is_empty())
        .collect();
    let mut findings = Vec::new();
    for (carrier, origin, version, new_crds) in &carriers {
        for (other, _, other_version, old_crds) in
            carriers.iter().filter(|(b, ..)| b.package == carrier.package && b.name != carrier.name)
        {
            // One line installs in version order: only an older copy is replaced by a newer one.
            let same_line = matches!((version, other_version), (Some(a), Some(b)) if a.major == b.major);
            if same_line && version <= other_version {
                continue;
            }
            for new in new_crds {
                let name = new["metadata"]["name"].as_str().unwrap_or_default();
                for old in old_crds.iter().filter(|o| o["metadata"]["name"] == name) {
                    for b in crd_compat::replacing(old, new) {
                        findings.push(Finding {
                            object: object_of(carrier),
                            rule: "crd-replaces-safely",
                            message: format!(
                                "its CRD {name} cannot replace the copy bundle {:?} installs: {b}; {} (fix: carry the same CRD in every \
                                 bundle of the package, with every version, or none: --crd-mode shared)",
                                other.name,
                                b.olm_v0(name)
                            ),
                            origin: Some((*origin).clone()),
                        });
                    }
                }
            }
        }
    }
    findings
}

/// `one-owner-per-api`.
fn one_owner_per_api(catalog: &Catalog) -> Vec<Finding> {
    let owners: Vec<(&Bundle, &Origin, u64, Vec<Owned>)> = catalog
        .bundles
        .iter()
        .filter_map(|(b, o)| Some((b, o, version_of(b)?.major, owned(b))))
        .filter(|(.., apis)| !apis.is_empty())
        .collect();
    let mut findings = Vec::new();
    for (i, (bundle, origin, line, apis)) in owners.iter().enumerate() {
        for (other, _, other_line, other_apis) in &owners[..i] {
            if other.package != bundle.package || other_line == line {
                continue;
            }
            for (group, version, kind) in apis.iter().filter(|a| other_apis.contains(a)) {
                findings.push(Finding {
                    object: object_of(bundle),
                    rule: "one-owner-per-api",
                    message: format!(
                        "its CSV owns {kind} {group}/{version}, which bundle {:?} of the v{other_line} line owns too: installed side by side, \
                         OLM v0 fails the second CSV (InterOperatorGroupOwnerConflict: \"intersecting operatorgroups provide the same apis\") \
                         (fix: each line's CSV owns only the API version it serves, or none: --crd-mode shared)",
                        other.name
                    ),
                    origin: Some((*origin).clone()),
                });
            }
        }
    }
    findings
}

/// The CSV of a bundle: its `olm.bundle.object`, or its `olm.csv.metadata` (whose owned
/// CRDs are under `crdDescriptions`).
fn owned(bundle: &Bundle) -> Vec<Owned> {
    let from_object = objects(bundle)
        .filter(|o| o["kind"] == "ClusterServiceVersion")
        .map(|csv| csv["spec"]["customresourcedefinitions"]["owned"].clone());
    let from_metadata = bundle
        .properties
        .iter()
        .filter(|p| p.type_ == "olm.csv.metadata")
        .map(|p| p.value["crdDescriptions"]["owned"].clone());
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut apis: Vec<Owned> = from_object
        .chain(from_metadata)
        .flat_map(|owned| owned.as_array().cloned().unwrap_or_default())
        .map(|o| {
            let group = o["name"].as_str().and_then(|n| n.split_once('.')).map(|(_, g)| g).unwrap_or_default();
            (group.to_string(), text(&o["version"]), text(&o["kind"]))
        })
        .collect();
    apis.sort();
    apis.dedup();
    apis
}

/// The CRDs a bundle carries.
fn crds(bundle: &Bundle) -> impl Iterator<Item = Value> + '_ {
    objects(bundle).filter(|o| o["kind"] == "CustomResourceDefinition")
}

/// The served versions of each CRD the bundle carries.
fn served_by_crds(bundle: &Bundle) -> BTreeMap<GroupKind, BTreeSet<String>> {
    let mut served = BTreeMap::new();
    for crd in crds(bundle) {
        let api = (
            crd["spec"]["group"].as_str().unwrap_or_default().to_string(),
            crd["spec"]["names"]["kind"].as_str().unwrap_or_default().to_string(),
        );
        let versions = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["served"] == true)
            .filter_map(|v| v["name"].as_str().map(String::from));
        served.entry(api).or_insert_with(BTreeSet::new).extend(versions);
    }
    served
}

/// The API versions the bundle's operator reads and writes.
fn relied_on(bundle: &Bundle) -> BTreeMap<GroupKind, BTreeSet<String>> {
    let mut needs: BTreeMap<GroupKind, BTreeSet<String>> = BTreeMap::new();
    for p in bundle.properties.iter().filter(|p| p.type_ == "olm.gvk") {
        let field = |k: &str| p.value[k].as_str().unwrap_or_default().to_string();
        needs.entry((field("group"), field("kind"))).or_default().insert(field("version"));
    }
    let annotations = objects(bundle)
        .filter(|o| o["kind"] == "ClusterServiceVersion")
        .map(|csv| csv["metadata"]["annotations"].clone())
        .chain(
            bundle.properties.iter().filter(|p| p.type_ == "olm.csv.metadata").map(|p| p.value["annotations"].clone()),
        );
    for annotations in annotations {
        if let Some(version) = annotations[CRD_VERSION_ANNOTATION].as_str() {
            needs.entry(model_orchestra_api()).or_default().insert(version.to_string());
        }
    }
    needs
}

fn model_orchestra_api() -> GroupKind {
    (model_orchestra_api::GROUP.to_string(), model_orchestra_api::KIND.to_string())
}

/// The manifests inlined as `olm.bundle.object` (base64 of their JSON).
fn objects(bundle: &Bundle) -> impl Iterator<Item = Value> + '_ {
    bundle
        .properties
        .iter()
        .filter(|p| p.type_ == "olm.bundle.object")
        .filter_map(|p| base64::engine::general_purpose::STANDARD.decode(p.value["data"].as_str()?).ok())
        .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::fbc::{Origin, Property};
    use serde_json::json;

    fn object(value: Value) -> Property {
        Property {
            type_: "olm.bundle.object".into(),
            value: json!({"data": base64::engine::general_purpose::STANDARD.encode(value.to_string())}),
        }
    }

    fn crd(served: &[(&str, bool)]) -> Property {
        let versions: Vec<Value> =
            served.iter().map(|(n, s)| json!({"name": n, "served": s, "storage": false})).collect();
        object(
            json!({"kind": "CustomResourceDefinition", "spec": {"group": "models.titanml.co", "names": {"kind": "ModelOrchestra"}, "versions": versions}}),
        )
    }

    fn shared(crd_version: &str) -> Property {
        object(
            json!({"kind": "ClusterServiceVersion", "metadata": {"annotations": {CRD_VERSION_ANNOTATION: crd_version}}}),
        )
    }

    fn gvk(version: &str) -> Property {
        Property {
            type_: "olm.gvk".into(),
            value: json!({"group": "models.titanml.co", "kind": "ModelOrchestra", "version": version}),
        }
    }

    fn catalog(bundles: Vec<(&str, Vec<Property>)>) -> Catalog {
        let bundles = bundles
            .into_iter()
            .map(|(name, properties)| {
                (
                    Bundle {
                        schema: "olm.bundle".into(),
                        name: name.into(),
                        package: "p".into(),
                        image: String::new(),
                        properties,
                        related_images: vec![],
                    },
                    Origin::default(),
                )
            })
            .collect();
        Catalog { packages: vec![], channels: vec![], bundles, deprecations: vec![], others: vec![] }
    }

    #[test]
    fn a_bundle_whose_crd_drops_a_version_a_shared_crd_bundle_serves_is_refused() {
        let c = catalog(vec![
            ("p.v0.1.0", vec![shared("v1alpha1")]),
            ("p.v2.0.0", vec![crd(&[("v1alpha2", true)]), gvk("v1alpha2")]),
        ]);
        let findings = check(&c);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].object.contains("p.v2.0.0")
                && findings[0].message.contains("v1alpha1")
                && findings[0].message.contains("p.v0.1.0"),
            "{}",
            findings[0]
        );
    }

    #[test]
    fn a_version_listed_but_no_longer_served_counts_as_dropped() {
        let c = catalog(vec![
            ("p.v0.1.0", vec![gvk("v1alpha1")]),
            ("p.v2.0.0", vec![crd(&[("v1alpha1", false), ("v1alpha2", true)])]),
        ]);
        assert_eq!(check(&c).len(), 1);
    }

    #[test]
    fn a_crd_that_keeps_every_relied_on_version_passes() {
        let c = catalog(vec![
            ("p.v0.1.0", vec![shared("v1alpha1")]),
            ("p.v1.0.0", vec![shared("v1alpha2")]),
            ("p.v2.0.0", vec![crd(&[("v1alpha1", true), ("v1alpha2", true)]), gvk("v1alpha1"), gvk("v1alpha2")]),
        ]);
        assert_eq!(check(&c), vec![]);
    }

    #[test]
    fn bundles_of_other_packages_are_not_compared() {
        let mut c =
            catalog(vec![("p.v0.1.0", vec![shared("v1alpha1")]), ("q.v2.0.0", vec![crd(&[("v1alpha2", true)])])]);
        c.bundles[1].0.package = "q".into();
        assert_eq!(check(&c), vec![]);
    }

    fn package(version: &str) -> Property {
        Property { type_: "olm.package".into(), value: json!({"packageName": "p", "version": version}) }
    }

    /// A CSV owning ModelOrchestra at `versions`.
    fn owning(versions: &[&str]) -> Property {
        let owned: Vec<Value> = versions
            .iter()
            .map(|v| json!({"name": "modelorchestras.models.titanml.co", "version": v, "kind": "ModelOrchestra"}))
            .collect();
        object(json!({"kind": "ClusterServiceVersion", "spec": {"customresourcedefinitions": {"owned": owned}}}))
    }

    /// A full CRD: `(name, served, storage)` per version, each with an object schema of
    /// `spec` with one optional string `a`, which `required` makes required.
    fn full_crd(versions: &[(&str, bool, bool)], required: bool) -> Property {
        let mut spec = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        if required {
            spec["required"] = json!(["a"]);
        }
        let versions: Vec<Value> = versions
            .iter()
            .map(|(n, served, storage)| {
                json!({"name": n, "served": served, "storage": storage,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}})
            })
            .collect();
        object(json!({"kind": "CustomResourceDefinition", "metadata": {"name": "modelorchestras.models.titanml.co"},
            "spec": {"group": "models.titanml.co", "names": {"kind": "ModelOrchestra"}, "versions": versions}}))
    }

    fn rules(findings: &[Finding]) -> Vec<(&str, &str)> {
        findings.iter().map(|f| (f.rule, f.object.split('"').nth(1).unwrap_or_default())).collect()
    }

    #[test]
    fn two_lines_owning_one_api_version_are_refused_in_olm_v0s_words() {
        let c = catalog(vec![
            ("p.v1.0.0", vec![package("1.0.0"), owning(&["v1alpha2"])]),
            ("p.v2.0.0", vec![package("2.0.0"), owning(&["v1alpha2", "v1alpha3"])]),
        ]);
        let findings = check(&c);
        assert_eq!(rules(&findings), [("one-owner-per-api", "p.v2.0.0")]);
        assert!(
            findings[0].message.contains("InterOperatorGroupOwnerConflict")
                && findings[0].message.contains("intersecting operatorgroups provide the same apis")
                && findings[0].message.contains("p.v1.0.0"),
            "{}",
            findings[0]
        );
    }

    #[test]
    fn each_line_owning_the_version_it_serves_is_no_conflict_nor_is_an_upgrade_owning_the_same() {
        let c = catalog(vec![
            ("p.v0.1.0", vec![package("0.1.0"), owning(&["v1alpha1"])]),
            ("p.v0.2.0", vec![package("0.2.0"), owning(&["v1alpha1"])]),
            ("p.v1.0.0", vec![package("1.0.0"), owning(&["v1alpha2"])]),
        ]);
        assert_eq!(check(&c), vec![]);
    }

    #[test]
    fn a_crd_that_drops_a_version_another_lines_crd_stores_is_refused_with_olm_v0s_data_loss_words() {
        let c = catalog(vec![
            ("p.v0.1.0", vec![package("0.1.0"), full_crd(&[("v1alpha1", true, true)], false)]),
            ("p.v2.0.0", vec![package("2.0.0"), full_crd(&[("v1alpha2", true, true)], false)]),
        ]);
        let findings: Vec<Finding> = check(&c).into_iter().filter(|f| f.rule == "crd-replaces-safely").collect();
        assert!(
            findings.iter().any(|f| f.object.contains("p.v2.0.0")
                && f.message.contains("risk of data loss updating \"modelorchestras.models.titanml.co\": new CRD removes version v1alpha1")),
            "{findings:#?}"
        );
    }

    #[test]
    fn a_crd_whose_schema_refuses_what_another_lines_copy_accepts_is_refused_both_ways() {
        let c = catalog(vec![
            ("p.v1.0.0", vec![package("1.0.0"), full_crd(&[("v1alpha1", true, true)], false)]),
            ("p.v2.0.0", vec![package("2.0.0"), full_crd(&[("v1alpha1", true, true)], true)]),
        ]);
        let findings = check(&c);
        assert_eq!(rules(&findings), [("crd-replaces-safely", "p.v2.0.0")], "{findings:#?}");
        assert!(findings[0].message.contains("updated validation is too restrictive"), "{}", findings[0]);
        assert!(findings[0].message.contains(".spec gained the required field"), "{}", findings[0]);
    }

    #[test]
    fn within_a_line_only_a_newer_crd_replaces_an_older_one() {
        let loosened = catalog(vec![
            ("p.v1.0.0", vec![package("1.0.0"), full_crd(&[("v1alpha1", true, true)], true)]),
            ("p.v1.1.0", vec![package("1.1.0"), full_crd(&[("v1alpha1", true, true)], false)]),
        ]);
        assert_eq!(check(&loosened), vec![], "1.1.0 loosens 1.0.0's schema: upgrading is safe");
        let tightened = catalog(vec![
            ("p.v1.0.0", vec![package("1.0.0"), full_crd(&[("v1alpha1", true, true)], false)]),
            ("p.v1.1.0", vec![package("1.1.0"), full_crd(&[("v1alpha1", true, true)], true)]),
        ]);
        assert_eq!(rules(&check(&tightened)), [("crd-replaces-safely", "p.v1.1.0")]);
    }
}
