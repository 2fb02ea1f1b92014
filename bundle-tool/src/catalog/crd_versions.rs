//! A rule of ours that `opm validate` does not have: a catalog must not offer a bundle whose
//! CRD stops serving a version another bundle of the same package relies on. Lines of one
//! package run side by side on one cluster and share the CRD; installing a bundle that
//! carries the CRD replaces the cluster's, so if it dropped `v1alpha1` every `v1alpha1`
//! line's objects could no longer be read or written. OLM v1 would install it (its CRD
//! upgrade check compares the CRD with the previous one, not with the other lines).
//!
//! What a bundle relies on: its `olm.gvk` properties, and for a shared-CRD bundle (which
//! carries no CRD) the version its CSV names in `models.titanml.co/crd-version`. What a
//! bundle's CRD serves: the CRDs among its `olm.bundle.object` properties.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use serde_json::Value;

use super::fbc::{Bundle, Catalog};
use super::validate::Finding;
use crate::bundle::CRD_VERSION_ANNOTATION;

/// (group, kind) of an API.
type GroupKind = (String, String);

/// Every bundle that would break another bundle of its package by replacing the CRD.
pub fn check(catalog: &Catalog) -> Vec<Finding> {
    let mut findings = Vec::new();
    let bundles: Vec<&Bundle> = catalog.bundles.iter().map(|(b, _)| b).collect();
    for (carrier, origin) in &catalog.bundles {
        for (api, served) in served_by_crds(carrier) {
            for other in bundles.iter().filter(|b| b.package == carrier.package && b.name != carrier.name) {
                for version in relied_on(other).get(&api).into_iter().flatten().filter(|v| !served.contains(*v)) {
                    findings.push(Finding {
                        object: format!("olm.bundle {:?} (package {:?})", carrier.name, carrier.package),
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

/// The served versions of each CRD the bundle carries.
fn served_by_crds(bundle: &Bundle) -> BTreeMap<GroupKind, BTreeSet<String>> {
    let mut served = BTreeMap::new();
    for crd in objects(bundle).filter(|o| o["kind"] == "CustomResourceDefinition") {
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
}
