//! Releases: each records its commit and every file's SHA-256 (bundles/releases.yaml); its
//! plain manifests for clusters without OLM (`dist/<version>/`) are what `bundle manifests`
//! makes of the released bundle, and never change.

use std::path::{Path, PathBuf};

use bundle_tool::bundle::generate::{bundle_files, read_tree, write_bundle, GenerateOptions};
use bundle_tool::bundle::release::{all, cut, hex, record_of};
use bundle_tool::bundle::CrdMode;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn sha(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

#[test]
fn every_release_has_its_plain_manifests_and_crd_as_recorded_and_as_its_bundle_makes_them() {
    let releases = all(&repo("bundles")).unwrap();
    assert!(releases.iter().any(|r| r.version == "1.0.0"), "1.0.0 is released");
    for release in releases {
        let v = &release.version;
        assert_eq!(
            release.dist.keys().map(String::as_str).collect::<Vec<_>>(),
            ["crd.yaml", "install.yaml"],
            "dist/{v}/ of release {v}"
        );
        for (file, recorded) in &release.dist {
            let text = std::fs::read_to_string(repo(&format!("dist/{v}/{file}"))).unwrap();
            assert_eq!(&sha(&text), recorded, "dist/{v}/{file} changed after release {v}");
        }
        let install = std::fs::read_to_string(repo(&format!("dist/{v}/install.yaml"))).unwrap();
        let made = bundle_tool::bundle::install::manifests_yaml(&repo(&format!("bundles/{v}"))).unwrap();
        assert_eq!(install, made, "dist/{v}/install.yaml is not what `bundle manifests bundles/{v}` makes");
        let crd = release.crd.as_ref().expect("a shared-CRD release records its CRD");
        let kept = std::fs::read_to_string(repo(&format!("bundles/{}", crd.file))).unwrap();
        let shipped = std::fs::read_to_string(repo(&format!("dist/{v}/crd.yaml"))).unwrap();
        assert_eq!(shipped, kept, "dist/{v}/crd.yaml is the CRD release {v} installed");
    }
}

#[test]
fn a_lines_plain_manifests_are_what_olm_installs_from_its_csv_in_its_namespace() {
    let text = bundle_tool::bundle::install::manifests_yaml(&repo("bundles/1.0.0")).unwrap();
    let objects = documents(&text);
    let kinds: Vec<(String, String)> = objects
        .iter()
        .map(|o| (o["kind"].as_str().unwrap().to_string(), o["metadata"]["name"].as_str().unwrap().to_string()))
        .collect();
    let line = "model-orchestra-operator-v1".to_string();
    assert_eq!(
        kinds,
        [
            ("Namespace".to_string(), "model-orchestra-v1".to_string()),
            ("ServiceAccount".into(), line.clone()),
            ("ClusterRole".into(), line.clone()),
            ("ClusterRoleBinding".into(), line.clone()),
            ("Deployment".into(), line.clone()),
        ]
    );
    let csv: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo("bundles/1.0.0/manifests/model-orchestra-operator.clusterserviceversion.yaml"))
            .unwrap(),
    )
    .unwrap();
    let strategy = &csv["spec"]["install"]["spec"];
    assert_eq!(objects[4]["spec"], strategy["deployments"][0]["spec"], "the Deployment is the CSV's");
    assert_eq!(objects[4]["metadata"]["namespace"], "model-orchestra-v1");
    assert_eq!(objects[2]["rules"], strategy["clusterPermissions"][0]["rules"], "the ClusterRole is the CSV's");
    assert_eq!(objects[3]["subjects"][0]["namespace"], "model-orchestra-v1");
    assert!(text.starts_with("# model-orchestra-operator.v1.0.0 as plain manifests"), "{text}");
}

fn temp(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bt-release-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn generated(bundles: &Path, version: &str) -> PathBuf {
    let metadata = bundle_tool::metadata::load(&repo("config/manifests/metadata.yaml")).unwrap();
    let options = GenerateOptions {
        version: semver::Version::parse(version).unwrap(),
        crd_version: "v1alpha2".into(),
        channels: vec!["stable-v9".into()],
        default_channel: Some("stable-v9".into()),
        image: "ghcr.io/titanml/model-orchestra-operator".into(),
        crd_mode: CrdMode::Shared,
        claim_unlabeled: true,
        http_api: false,
    };
    let dir = bundles.join(version);
    write_bundle(&dir, &bundle_files(&options, &metadata, &bundle_tool::crds::crd()).unwrap()).unwrap();
    dir
}

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn cutting_a_release_records_its_commit_and_files_keeps_its_crd_and_writes_its_plain_manifests() {
    let work = temp("cut");
    let (bundles, dist) = (work.join("bundles"), work.join("dist"));
    let dir = generated(&bundles, "9.0.0");
    cut(&dir, COMMIT, &bundle_tool::crds::crd(), &dist).unwrap();
    let release = record_of(&dir).unwrap().expect("recorded");
    assert_eq!(release.commit, COMMIT);
    let files: Vec<String> = read_tree(&dir).unwrap().keys().cloned().collect();
    assert_eq!(release.files.keys().cloned().collect::<Vec<_>>(), files);
    bundle_tool::bundle::release::verify(&dir, &release).unwrap();
    let crd = release.crd.expect("the shared CRD is kept");
    assert_eq!(crd.file, "crds/9.0.0.yaml");
    assert_eq!(sha(&std::fs::read_to_string(bundles.join(&crd.file)).unwrap()), crd.sha256);
    let install = std::fs::read_to_string(dist.join("9.0.0/install.yaml")).unwrap();
    assert_eq!(release.dist["install.yaml"], sha(&install));
    assert!(documents(&install)
        .iter()
        .any(|o| o["kind"] == "Deployment" && o["metadata"]["namespace"] == "model-orchestra-v9"));
    std::fs::remove_dir_all(&work).ok();
}

#[test]
fn a_version_is_released_once_and_only_from_a_full_commit() {
    let work = temp("twice");
    let (bundles, dist) = (work.join("bundles"), work.join("dist"));
    let dir = generated(&bundles, "9.0.0");
    let short = cut(&dir, "0123abc", &bundle_tool::crds::crd(), &dist).unwrap_err().to_string();
    assert!(short.contains("--commit") && short.contains("git rev-parse HEAD"), "{short}");
    cut(&dir, COMMIT, &bundle_tool::crds::crd(), &dist).unwrap();
    let before = std::fs::read_to_string(bundles.join("releases.yaml")).unwrap();
    let again = cut(&dir, COMMIT, &bundle_tool::crds::crd(), &dist).unwrap_err().to_string();
    assert!(again.contains("released already"), "{again}");
    assert_eq!(std::fs::read_to_string(bundles.join("releases.yaml")).unwrap(), before, "nothing was written");
    std::fs::remove_dir_all(&work).ok();
}
