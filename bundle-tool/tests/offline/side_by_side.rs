//! What OLM v0 refuses when the package's lines share a cluster, refused by `bundle
//! validate` first: a CSV owning an API version a bundle of another line owns, and a CRD
//! that would lose a stored version or refuse an existing object. The words quoted are the
//! real OLM v0's (v0.38.0), as the OLM v0 drill saw them
//! (`bundle-tool/tests/olm_drill/v0.rs`).

use std::path::{Path, PathBuf};

use bundle_tool::bundle::generate::{bundle_files, write_bundle, GenerateOptions};
use bundle_tool::bundle::validate::{validate, Finding, Severity};
use bundle_tool::bundle::{CrdMode, CRD_FILE};
use serde_json::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// A bundles directory holding a copy of the repository's released bundles and CRDs.
fn beside_the_releases(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bt-side-by-side-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let copied = std::process::Command::new("cp").arg("-r").arg(repo("bundles")).arg(&dir).status().unwrap();
    assert!(copied.success());
    dir
}

/// Generates `version` (a line of its own) into `bundles`, owning `crd_version`.
fn owned(bundles: &Path, version: &str, crd_version: &str) -> PathBuf {
    let metadata = bundle_tool::metadata::load(&repo("config/manifests/metadata.yaml")).unwrap();
    let options = GenerateOptions {
        version: semver::Version::parse(version).unwrap(),
        crd_version: crd_version.into(),
        channels: vec![format!("stable-v{}", &version[..1])],
        default_channel: None,
        image: "ghcr.io/titanml/model-orchestra-operator".into(),
        crd_mode: CrdMode::Owned,
        claim_unlabeled: false,
        http_api: false,
    };
    let dir = bundles.join(version);
    write_bundle(&dir, &bundle_files(&options, &metadata, &bundle_tool::crds::crd()).unwrap()).unwrap();
    dir
}

fn edit_crd(bundle: &Path, edit: impl Fn(&mut Vec<Value>)) {
    let path = bundle.join("manifests").join(CRD_FILE);
    let mut crd: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(crd["spec"]["versions"].as_array_mut().unwrap());
    std::fs::write(&path, serde_yaml::to_string(&crd).unwrap()).unwrap();
}

fn errors(bundle: &Path) -> Vec<Finding> {
    validate(bundle).into_iter().filter(|f| f.severity == Severity::Error).collect()
}

#[test]
fn a_bundle_owning_the_api_version_another_lines_bundle_owns_is_refused_as_olm_v0_would() {
    let bundles = beside_the_releases("owners");
    let first = owned(&bundles, "4.0.0", "v1alpha2");
    assert_eq!(errors(&first), vec![], "the only owner of v1alpha2");
    let second = owned(&bundles, "5.0.0", "v1alpha2");
    let found = errors(&second);
    std::fs::remove_dir_all(&bundles).ok();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].field, "spec.customresourcedefinitions.owned[0]");
    assert!(
        found[0].message.contains("bundles/4.0.0")
            && found[0]
                .message
                .contains("InterOperatorGroupOwnerConflict: \"intersecting operatorgroups provide the same apis\""),
        "{}",
        found[0]
    );
}

#[test]
fn lines_owning_each_the_api_version_they_serve_pass() {
    let bundles = beside_the_releases("each-its-own");
    owned(&bundles, "4.0.0", "v1alpha1");
    let second = owned(&bundles, "5.0.0", "v1alpha2");
    let found = errors(&second);
    std::fs::remove_dir_all(&bundles).ok();
    assert_eq!(found, vec![]);
}

#[test]
fn a_carried_crd_without_a_stored_version_is_refused_with_olm_v0s_data_loss_words() {
    let bundles = beside_the_releases("stored");
    let bundle = owned(&bundles, "2.0.0", "v1alpha2");
    edit_crd(&bundle, |versions| {
        versions.retain(|v| v["name"] != "v1alpha1");
        versions[0]["storage"] = true.into();
    });
    let found = errors(&bundle);
    std::fs::remove_dir_all(&bundles).ok();
    assert!(
        found.iter().any(|f| f.file == format!("manifests/{CRD_FILE}")
            && f.message.contains("CRD version v1alpha1 was the storage version")
            && f.message.contains("risk of data loss updating \"modelorchestras.models.titanml.co\": new CRD removes version v1alpha1 that is listed as a stored version on the existing CRD")),
        "{found:#?}"
    );
}

#[test]
fn a_carried_crd_that_would_refuse_existing_objects_is_refused_with_olm_v0s_words() {
    let bundles = beside_the_releases("narrowed");
    let bundle = owned(&bundles, "3.0.0", "v1alpha1");
    edit_crd(&bundle, |versions| {
        let v1alpha1 = versions.iter_mut().find(|v| v["name"] == "v1alpha1").unwrap();
        v1alpha1["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] = serde_json::json!(["gateway"]);
    });
    let found = errors(&bundle);
    std::fs::remove_dir_all(&bundles).ok();
    assert!(
        found.iter().any(|f| f.message.contains("v1alpha1: .spec gained the required field \"gateway\"")
            && f.message.contains("updated validation is too restrictive")),
        "{found:#?}"
    );
}

#[test]
fn a_carried_crd_equal_to_the_shared_one_replaces_every_released_crd() {
    let bundles = beside_the_releases("same");
    let bundle = owned(&bundles, "2.0.0", "v1alpha2");
    let found = errors(&bundle);
    std::fs::remove_dir_all(&bundles).ok();
    assert_eq!(found, vec![]);
}

#[test]
fn every_released_bundle_passes_the_side_by_side_rules_beside_the_others() {
    for release in bundle_tool::bundle::release::all(&repo("bundles")).unwrap() {
        let found: Vec<Finding> = errors(&repo(&format!("bundles/{}", release.version)))
            .into_iter()
            .filter(|f| f.message.contains("OLM v0"))
            .collect();
        assert_eq!(found, vec![], "bundles/{}", release.version);
    }
}
