//! Generating bundles: a released bundle never changes (its files are what its release
//! recorded), and the CRD stays compatible with released bundles.

use std::path::{Path, PathBuf};

use bundle_tool::bundle::generate::{bundle_files, read_tree, write_bundle, GenerateOptions, WriteOutcome};
use bundle_tool::bundle::{CrdMode, CRD_FILE, CSV_FILE};
use bundle_tool::error::ToolError;
use serde_json::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn metadata() -> bundle_tool::metadata::OperatorMetadata {
    bundle_tool::metadata::load(&repo("config/manifests/metadata.yaml")).unwrap()
}

fn options(version: &str, mode: CrdMode) -> GenerateOptions {
    GenerateOptions {
        version: semver::Version::parse(version).unwrap(),
        crd_version: "v1alpha1".into(),
        channels: vec!["stable".into()],
        default_channel: Some("stable".into()),
        image: "ghcr.io/titanml/model-orchestra-operator".into(),
        crd_mode: mode,
        claim_unlabeled: false,
        http_api: false,
    }
}

fn temp(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bt-generate-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn every_released_bundle_is_byte_identical_to_its_release_record() {
    use sha2::{Digest, Sha256};
    let record: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(repo("bundles/releases.yaml")).unwrap()).unwrap();
    let releases = record["releases"].as_sequence().unwrap();
    assert!(!releases.is_empty());
    for release in releases {
        let version = release["version"].as_str().unwrap();
        let commit = release["commit"].as_str().unwrap();
        assert_eq!(commit.len(), 40, "{version}: the release commit is a full SHA");
        let files = read_tree(&repo(&format!("bundles/{version}"))).unwrap();
        let recorded: std::collections::BTreeMap<String, String> =
            serde_yaml::from_value(release["files"].clone()).unwrap();
        let actual: std::collections::BTreeMap<String, String> = files
            .iter()
            .map(|(path, text)| {
                (path.clone(), Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect())
            })
            .collect();
        assert_eq!(actual, recorded, "bundles/{version} changed after its release (recorded in bundles/releases.yaml)");
        let crd = &release["crd"];
        let file = crd["file"]
            .as_str()
            .unwrap_or_else(|| panic!("{version}: releases.yaml records the shared CRD it installed"));
        let text = std::fs::read(repo(&format!("bundles/{file}"))).unwrap();
        let sha: String = Sha256::digest(&text).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(sha, crd["sha256"].as_str().unwrap(), "bundles/{file} changed after release {version}");
    }
}

#[test]
fn the_repositorys_crd_keeps_every_released_crd_version() {
    let problems = bundle_tool::bundle::released_crds::check_compatible(&bundle_tool::crds::crd(), &repo("bundles"));
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A bundles directory whose only release is the repository's released shared CRD.
fn released_shared_crd(test: &str) -> PathBuf {
    let bundles = temp(test);
    let dir = bundles.join(bundle_tool::bundle::released_crds::RELEASED_CRDS_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo("bundles/crds/0.1.0.yaml"), dir.join("0.1.0.yaml")).unwrap();
    bundles
}

#[test]
fn a_crd_that_changes_a_released_shared_crd_version_is_refused() {
    let bundles = released_shared_crd("shared-changed");
    let mut changed = bundle_tool::crds::crd();
    let version =
        changed["spec"]["versions"].as_array_mut().unwrap().iter_mut().find(|v| v["name"] == "v1alpha1").unwrap();
    version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        .as_object_mut()
        .unwrap()
        .remove("applicationTemplate");
    let problems = bundle_tool::bundle::released_crds::check_compatible(&changed, &bundles);
    assert!(
        problems.iter().any(|p| p.contains("bundles/crds/0.1.0.yaml v1alpha1: .spec.applicationTemplate was removed")),
        "{problems:?}"
    );
    std::fs::remove_dir_all(&bundles).ok();
}

#[test]
fn a_crd_that_stops_serving_a_released_shared_crd_version_is_refused() {
    let bundles = released_shared_crd("shared-dropped");
    let mut dropped = bundle_tool::crds::crd();
    for version in dropped["spec"]["versions"].as_array_mut().unwrap().iter_mut().filter(|v| v["name"] == "v1alpha1") {
        version["served"] = false.into();
    }
    let problems = bundle_tool::bundle::released_crds::check_compatible(&dropped, &bundles);
    assert!(
        problems.iter().any(|p| p == "bundles/crds/0.1.0.yaml: CRD version v1alpha1 is no longer served"),
        "{problems:?}"
    );
    std::fs::remove_dir_all(&bundles).ok();
}

#[test]
fn the_csv_installs_the_operator_deployment_with_its_routing_value_and_image() {
    let files = bundle_files(&options("2.3.4", CrdMode::Shared), &metadata(), &bundle_tool::crds::crd()).unwrap();
    let csv: serde_json::Value = serde_yaml::from_str(&files[&format!("manifests/{CSV_FILE}")]).unwrap();
    assert_eq!(csv["metadata"]["name"], "model-orchestra-operator.v2.3.4");
    let deployment = &csv["spec"]["install"]["spec"]["deployments"][0];
    assert_eq!(deployment["name"], "model-orchestra-operator-v2", "names carry the version line");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "ghcr.io/titanml/model-orchestra-operator:v2.3.4");
    let env = container["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == "MODEL_ORCHESTRA_ROUTING" && e["value"] == "v2"));
    assert_eq!(csv["spec"]["relatedImages"][0]["image"], "ghcr.io/titanml/model-orchestra-operator:v2.3.4");
    let perms = &csv["spec"]["install"]["spec"]["clusterPermissions"][0];
    assert_eq!(perms["serviceAccountName"], "model-orchestra-operator-v2");
    let expected_rules = serde_json::to_value(model_orchestra_api::deploy::rbac::cluster_role("x").rules).unwrap();
    assert_eq!(perms["rules"], expected_rules, "RBAC comes from the operator's one source");
}

#[test]
fn shared_mode_leaves_the_crd_out_and_owned_mode_puts_it_in() {
    let shared = bundle_files(&options("1.0.0", CrdMode::Shared), &metadata(), &bundle_tool::crds::crd()).unwrap();
    assert!(!shared.contains_key(&format!("manifests/{CRD_FILE}")));
    let owned = bundle_files(&options("1.0.0", CrdMode::Owned), &metadata(), &bundle_tool::crds::crd()).unwrap();
    assert!(owned.contains_key(&format!("manifests/{CRD_FILE}")));
}

#[test]
fn an_owned_bundle_of_v1alpha2_carries_a_v1alpha2_example_and_validates() {
    let dir = temp("owned-v1alpha2").join("2.0.0");
    let opts = GenerateOptions { crd_version: "v1alpha2".into(), ..options("2.0.0", CrdMode::Owned) };
    write_bundle(&dir, &bundle_files(&opts, &metadata(), &bundle_tool::crds::crd()).unwrap()).unwrap();
    let csv: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("manifests").join(CSV_FILE)).unwrap()).unwrap();
    let examples: Value =
        serde_json::from_str(csv["metadata"]["annotations"]["alm-examples"].as_str().unwrap()).unwrap();
    assert_eq!(examples[0]["apiVersion"], "models.titanml.co/v1alpha2");
    let findings = bundle_tool::bundle::validate::validate(&dir);
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
    assert!(findings.iter().all(|f| f.severity != bundle_tool::bundle::validate::Severity::Error), "{findings:?}");
}

#[test]
fn regenerating_an_identical_release_is_fine_and_a_different_one_is_refused_untouched() {
    let dir = temp("immutable").join("1.0.0");
    let files = bundle_files(&options("1.0.0", CrdMode::Shared), &metadata(), &bundle_tool::crds::crd()).unwrap();
    assert_eq!(write_bundle(&dir, &files).unwrap(), WriteOutcome::Created);
    assert_eq!(write_bundle(&dir, &files).unwrap(), WriteOutcome::Unchanged);
    let before = read_tree(&dir).unwrap();
    let changed = bundle_files(&options("1.0.0", CrdMode::Owned), &metadata(), &bundle_tool::crds::crd()).unwrap();
    let err = write_bundle(&dir, &changed).unwrap_err();
    assert!(matches!(err, ToolError::WouldChange { .. }), "{err}");
    assert!(err.to_string().contains("released and would change"), "{err}");
    assert_eq!(read_tree(&dir).unwrap(), before, "nothing was written");
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

#[test]
fn a_crd_that_drops_a_released_field_or_version_is_refused() {
    let bundles = temp("compat");
    let released = bundles.join("0.9.0");
    write_bundle(
        &released,
        &bundle_files(&options("0.9.0", CrdMode::Owned), &metadata(), &bundle_tool::crds::crd()).unwrap(),
    )
    .unwrap();
    let current = bundle_tool::crds::crd();
    assert!(
        bundle_tool::bundle::released_crds::check_compatible(&current, &bundles).is_empty(),
        "the same CRD is compatible"
    );

    let mut dropped = current.clone();
    version_mut(&mut dropped, "v1alpha1")["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        .as_object_mut()
        .unwrap()
        .remove("gateway");
    let problems = bundle_tool::bundle::released_crds::check_compatible(&dropped, &bundles);
    assert!(problems.iter().any(|p| p.contains(".spec.gateway was removed")), "{problems:?}");

    let mut renamed = current.clone();
    version_mut(&mut renamed, "v1alpha1")["name"] = "v1beta1".into();
    let problems = bundle_tool::bundle::released_crds::check_compatible(&renamed, &bundles);
    assert!(problems.iter().any(|p| p.contains("no longer serves")), "{problems:?}");
    std::fs::remove_dir_all(&bundles).ok();
}

/// The entry of `crd.spec.versions` named `name`.
fn version_mut<'a>(crd: &'a mut Value, name: &str) -> &'a mut Value {
    crd["spec"]["versions"].as_array_mut().unwrap().iter_mut().find(|v| v["name"] == name).unwrap()
}

/// The name of the CRD's storage version.
fn storage_version(crd: &Value) -> String {
    crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["storage"] == true).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string()
}

fn released_owned_crd(test: &str) -> PathBuf {
    let bundles = temp(test);
    write_bundle(
        &bundles.join("0.9.0"),
        &bundle_files(&options("0.9.0", CrdMode::Owned), &metadata(), &bundle_tool::crds::crd()).unwrap(),
    )
    .unwrap();
    bundles
}

#[test]
fn a_crd_that_drops_the_released_storage_version_is_refused() {
    let bundles = released_owned_crd("storage");
    let mut moved = bundle_tool::crds::crd();
    let storage = storage_version(&moved);
    version_mut(&mut moved, &storage)["name"] = "v1beta1".into();
    let problems = bundle_tool::bundle::released_crds::check_compatible(&moved, &bundles);
    assert!(
        problems.iter().any(|p| p.contains(&format!("{storage} was the storage version and must stay"))),
        "{problems:?}"
    );

    let mut two_storage = bundle_tool::crds::crd();
    let mut second = version_mut(&mut two_storage, &storage).clone();
    second["name"] = "v1beta1".into();
    two_storage["spec"]["versions"].as_array_mut().unwrap().push(second);
    let problems = bundle_tool::bundle::released_crds::check_compatible(&two_storage, &bundles);
    assert!(problems.iter().any(|p| p.contains("exactly one version as storage")), "{problems:?}");
    std::fs::remove_dir_all(&bundles).ok();
}

#[test]
fn a_crd_whose_validation_rejects_what_a_released_one_accepted_is_refused() {
    let bundles = released_owned_crd("tighter");
    let mut tighter = bundle_tool::crds::crd();
    let spec = &mut tighter["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["required"] = serde_json::json!(["gateway"]);
    spec["properties"]["applications"]["maxProperties"] = 1.into();
    let problems = bundle_tool::bundle::released_crds::check_compatible(&tighter, &bundles);
    assert!(problems.iter().any(|p| p.contains(".spec gained the required field \"gateway\"")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains(".spec.applications tightened maxProperties")), "{problems:?}");
    std::fs::remove_dir_all(&bundles).ok();
}

#[test]
fn the_cli_names_the_file_and_field_of_each_validation_error() {
    let dir = temp("cli");
    std::fs::create_dir_all(dir.join("manifests")).unwrap();
    std::fs::create_dir_all(dir.join("metadata")).unwrap();
    std::fs::write(
        dir.join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
        .args(["bundle", "validate"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("metadata/annotations.yaml: annotations.operators.operatorframework.io.bundle.package.v1: missing annotation"), "{stderr}");
    assert!(stderr.contains("no ClusterServiceVersion"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn validating_the_released_bundle_as_the_readme_does_passes_and_prints_what_todays_validator_finds() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
        .args(["bundle", "validate", "bundles/0.1.0"])
        .current_dir(repo(""))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("released 0.1.0") && stderr.contains("alm-examples"), "{stderr}");
    assert!(stderr.contains("unchanged (its files match bundles/releases.yaml)"), "{stderr}");
}
