//! One broken bundle per validation rule, each failing with its message; and the
//! generated bundle passing. The real `operator-sdk bundle validate --select-optional
//! suite=operatorframework` judges each bundle too.

use std::path::{Path, PathBuf};

use crate::support::oracle::Home;

use bundle_tool::bundle::generate::{bundle_files, write_bundle, GenerateOptions};
use bundle_tool::bundle::validate::{validate, Severity};
use bundle_tool::bundle::{CrdMode, CRD_FILE, CSV_FILE};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn metadata() -> bundle_tool::metadata::OperatorMetadata {
    bundle_tool::metadata::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/manifests/metadata.yaml")))
        .unwrap()
}

fn options(mode: CrdMode) -> GenerateOptions {
    GenerateOptions {
        version: semver::Version::parse("1.2.3").unwrap(),
        crd_version: "v1alpha1".into(),
        channels: vec!["stable".into(), "fast".into()],
        default_channel: Some("stable".into()),
        image: "registry.example/op".into(),
        crd_mode: mode,
        claim_unlabeled: false,
        http_api: false,
    }
}

/// A valid owned-mode bundle in a fresh temp dir.
fn bundle(test: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!("bt-validate-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_bundle(&dir, &bundle_files(&options(CrdMode::Owned), &metadata(), &bundle_tool::crds::crd()).unwrap())
        .unwrap();
    Dir(dir)
}

fn csv_path(d: &Dir) -> PathBuf {
    d.0.join("manifests").join(CSV_FILE)
}

fn edit_yaml(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(path, serde_yaml::to_string(&v).unwrap()).unwrap();
}

/// operator-sdk's verdict on a bundle directory: (passed, its findings).
fn operator_sdk(dir: &Path) -> (bool, Vec<String>) {
    let home = Home::new(&format!("validate-{}", dir.file_name().unwrap().to_string_lossy()));
    let out = home
        .operator_sdk()
        .args(["bundle", "validate"])
        .arg(dir)
        .args(["--select-optional", "suite=operatorframework"])
        .output()
        .expect("run operator-sdk");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (
        out.status.success(),
        text.lines()
            .filter(|l| l.contains("level=error") || l.contains("level=warning") || l.contains("level=fatal"))
            .map(String::from)
            .collect(),
    )
}

/// The one warning the generated bundles get, justified in the book (docs/src/olm/bundles.md): RBAC on
/// events.k8s.io `events` (the v1 API the operator records events with) and on policy
/// `poddisruptionbudgets` (the v1 API the chart renders) is reported as a use of the
/// removed v1beta1 APIs, because RBAC rules carry no version. operator-sdk lists the APIs
/// in no fixed order (`for events: (…),poddisruptionbudgets: (…),` or the other way):
/// every one it names must be one of these.
fn justified(finding: &str) -> bool {
    const VERSIONLESS_RBAC: [&str; 2] = ["events", "poddisruptionbudgets"];
    let Some((_, apis)) = finding.split_once("Migrate the API(s) for ") else { return false };
    let named: Vec<&str> =
        apis.split("),").filter_map(|api| api.split_once(':').map(|(name, _)| name.trim())).collect();
    finding.contains("level=warning")
        && finding.contains("deprecated and removed in v1.25")
        && !named.is_empty()
        && named.iter().all(|name| VERSIONLESS_RBAC.contains(name))
}

fn assert_sdk_rejects(d: &Dir) {
    let (passed, findings) = operator_sdk(&d.0);
    assert!(!passed, "operator-sdk accepts the bundle bundle-tool rejects:\n{}", findings.join("\n"));
}

/// The bundle fails with an error on `file` whose field and message contain the given
/// text, and operator-sdk rejects it too.
fn assert_error(d: &Dir, file: &str, field: &str, message: &str) {
    assert_sdk_rejects(d);
    assert_our_error(d, file, field, message);
}

/// A rule of bundle-tool's own that operator-sdk does not check (docs/src/olm/bundles.md, "bundle-tool's
/// stricter rules": what OLM v1 or opm refuse later): bundle-tool errors, operator-sdk
/// passes the bundle — if it starts rejecting it, this list is out of date.
fn assert_error_operator_sdk_misses(d: &Dir, file: &str, field: &str, message: &str) {
    let (passed, findings) = operator_sdk(&d.0);
    assert!(
        passed,
        "operator-sdk now rejects this bundle too; move the case to assert_error:\n{}",
        findings.join("\n")
    );
    assert_our_error(d, file, field, message);
}

fn assert_our_error(d: &Dir, file: &str, field: &str, message: &str) {
    let findings = validate(&d.0);
    assert!(
        findings.iter().any(|f| f.severity == Severity::Error
            && f.file == file
            && f.field.contains(field)
            && f.message.contains(message)),
        "expected an error on {file} {field} containing {message:?}, got:\n{}",
        findings.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn generated_bundles_are_valid_in_both_crd_modes_for_bundle_tool_and_operator_sdk() {
    for mode in [CrdMode::Owned, CrdMode::Shared] {
        for claim_unlabeled in [false, true] {
            let dir = std::env::temp_dir().join(format!(
                "bt-valid-{}-{claim_unlabeled}-{}",
                mode.as_str(),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let opts = GenerateOptions { claim_unlabeled, ..options(mode) };
            write_bundle(&dir, &bundle_files(&opts, &metadata(), &bundle_tool::crds::crd()).unwrap()).unwrap();
            let d = Dir(dir);
            let findings = validate(&d.0);
            assert!(findings.is_empty(), "{mode:?}, claim_unlabeled {claim_unlabeled}: {findings:?}");
            let (passed, sdk) = operator_sdk(&d.0);
            let unjustified: Vec<&String> = sdk.iter().filter(|f| !justified(f)).collect();
            assert!(
                passed && unjustified.is_empty(),
                "{mode:?}, claim_unlabeled {claim_unlabeled}: operator-sdk: {}",
                sdk.join("\n")
            );
        }
    }
}

#[test]
fn a_bundle_with_the_http_api_is_valid_for_bundle_tool_and_operator_sdk() {
    let dir = std::env::temp_dir().join(format!("bt-valid-http-api-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = GenerateOptions { http_api: true, ..options(CrdMode::Owned) };
    let files = bundle_files(&opts, &metadata(), &bundle_tool::crds::crd()).unwrap();
    assert!(files.contains_key("manifests/model-orchestra-api.service.yaml"), "{:?}", files.keys());
    let csv: serde_json::Value =
        serde_yaml::from_str(&files["manifests/model-orchestra-operator.clusterserviceversion.yaml"]).unwrap();
    let install = &csv["spec"]["install"]["spec"];
    assert_eq!(install["deployments"][1]["name"], "model-orchestra-api");
    assert_eq!(install["permissions"][0]["serviceAccountName"], "model-orchestra-api");
    write_bundle(&dir, &files).unwrap();
    let d = Dir(dir);
    let findings = validate(&d.0);
    assert!(findings.is_empty(), "{findings:?}");
    let (passed, sdk) = operator_sdk(&d.0);
    let unjustified: Vec<&String> = sdk.iter().filter(|f| !justified(f)).collect();
    assert!(passed && unjustified.is_empty(), "operator-sdk: {}", sdk.join("\n"));
}

#[test]
fn a_missing_annotations_file_is_an_error() {
    let d = bundle("no-annotations");
    std::fs::remove_file(d.0.join("metadata/annotations.yaml")).unwrap();
    assert_error(&d, "metadata/annotations.yaml", "", "could not find the annotations file");
}

#[test]
fn a_missing_required_annotation_is_an_error() {
    let d = bundle("no-package");
    edit_yaml(&d.0.join("metadata/annotations.yaml"), |v| {
        v["annotations"].as_object_mut().unwrap().remove("operators.operatorframework.io.bundle.package.v1");
    });
    assert_error(&d, "metadata/annotations.yaml", "bundle.package.v1", "missing annotation");
}

#[test]
fn a_media_type_other_than_registry_v1_is_an_error() {
    let d = bundle("mediatype");
    edit_yaml(&d.0.join("metadata/annotations.yaml"), |v| {
        v["annotations"]["operators.operatorframework.io.bundle.mediatype.v1"] = "plain".into()
    });
    assert_error(&d, "metadata/annotations.yaml", "mediatype", "expected \"registry+v1\"");
}

#[test]
fn empty_channels_are_an_error() {
    let d = bundle("channels");
    edit_yaml(&d.0.join("metadata/annotations.yaml"), |v| {
        v["annotations"]["operators.operatorframework.io.bundle.channels.v1"] = "".into()
    });
    assert_error(&d, "metadata/annotations.yaml", "channels.v1", "non-empty");
}

#[test]
fn a_default_channel_outside_the_channels_is_an_error() {
    let d = bundle("default-channel");
    edit_yaml(&d.0.join("metadata/annotations.yaml"), |v| {
        v["annotations"]["operators.operatorframework.io.bundle.channel.default.v1"] = "beta".into()
    });
    assert_error_operator_sdk_misses(&d, "metadata/annotations.yaml", "channel.default.v1", "not one of the channels");
}

#[test]
fn a_package_name_that_is_not_a_dns_label_is_an_error() {
    let d = bundle("package-name");
    edit_yaml(&d.0.join("metadata/annotations.yaml"), |v| {
        v["annotations"]["operators.operatorframework.io.bundle.package.v1"] = "model.orchestra".into()
    });
    assert_error_operator_sdk_misses(&d, "metadata/annotations.yaml", "package.v1", "DNS-1123 label");
}

#[test]
fn a_subdirectory_in_manifests_is_an_error() {
    let d = bundle("subdir");
    std::fs::create_dir(d.0.join("manifests/extra")).unwrap();
    assert_error(&d, "manifests/extra", "", "must be flat");
}

#[test]
fn a_hidden_file_in_manifests_is_an_error() {
    let d = bundle("hidden");
    std::fs::write(d.0.join("manifests/.notes"), "x").unwrap();
    assert_error(&d, "manifests/.notes", "", "hidden files");
}

#[test]
fn two_objects_in_one_file_are_an_error() {
    let d = bundle("multidoc");
    let p = d.0.join("manifests/extra.yaml");
    std::fs::write(&p, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n").unwrap();
    assert_error_operator_sdk_misses(&d, "manifests/extra.yaml", "", "2 YAML documents");
}

#[test]
fn an_unsupported_kind_is_an_error() {
    let d = bundle("kind");
    std::fs::write(d.0.join("manifests/deploy.yaml"), "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n")
        .unwrap();
    assert_error(&d, "manifests/deploy.yaml", "kind", "not a kind a bundle may contain");
}

#[test]
fn a_bundle_without_a_csv_is_an_error() {
    let d = bundle("no-csv");
    std::fs::remove_file(csv_path(&d)).unwrap();
    assert_error(&d, "manifests/", "", "no ClusterServiceVersion");
}

#[test]
fn two_csvs_are_an_error() {
    let d = bundle("two-csvs");
    std::fs::copy(csv_path(&d), d.0.join("manifests/second.clusterserviceversion.yaml")).unwrap();
    assert_error(&d, "manifests/", "", "exactly one");
}

#[test]
fn a_version_that_is_not_strict_semver_is_an_error() {
    let d = bundle("semver");
    edit_yaml(&csv_path(&d), |v| v["spec"]["version"] = "v1.2".into());
    assert_error_operator_sdk_misses(&d, &format!("manifests/{CSV_FILE}"), "spec.version", "strict semver");
}

#[test]
fn a_csv_name_longer_than_63_characters_is_an_error() {
    let d = bundle("csv-name");
    edit_yaml(&csv_path(&d), |v| v["metadata"]["name"] = "a".repeat(64).into());
    assert_error(&d, &format!("manifests/{CSV_FILE}"), "metadata.name", "at most 63");
}

#[test]
fn a_csv_without_all_namespaces_support_is_an_error() {
    let d = bundle("install-modes");
    // Only OwnNamespace: a mode OLM v0 takes, OLM v1 refuses.
    edit_yaml(&csv_path(&d), |v| {
        v["spec"]["installModes"][0]["supported"] = true.into();
        v["spec"]["installModes"][3]["supported"] = false.into();
    });
    assert_error_operator_sdk_misses(&d, &format!("manifests/{CSV_FILE}"), "spec.installModes", "AllNamespaces");
}

#[test]
fn required_crds_are_an_error_because_olm_v1_refuses_dependencies() {
    let d = bundle("required");
    edit_yaml(&csv_path(&d), |v| {
        v["spec"]["customresourcedefinitions"]["required"] =
            serde_json::json!([{"name": "x.example.com", "version": "v1", "kind": "X"}])
    });
    assert_error_operator_sdk_misses(
        &d,
        &format!("manifests/{CSV_FILE}"),
        "customresourcedefinitions.required",
        "OLM v1 refuses",
    );
}

#[test]
fn an_owned_crd_missing_from_the_bundle_is_an_error() {
    let d = bundle("owned-missing");
    std::fs::remove_file(d.0.join("manifests").join(CRD_FILE)).unwrap();
    assert_error(&d, &format!("manifests/{CSV_FILE}"), "owned[0]", "not in the bundle");
}

#[test]
fn an_owned_crd_version_the_crd_lacks_is_an_error() {
    let d = bundle("owned-version");
    edit_yaml(&csv_path(&d), |v| v["spec"]["customresourcedefinitions"]["owned"][0]["version"] = "v9".into());
    assert_error(&d, &format!("manifests/{CSV_FILE}"), "owned[0].version", "not a version of the CRD");
}

#[test]
fn a_crd_the_csv_does_not_own_is_an_error() {
    let d = bundle("not-owned");
    edit_yaml(&csv_path(&d), |v| {
        v["spec"].as_object_mut().unwrap().remove("customresourcedefinitions");
    });
    assert_error(&d, &format!("manifests/{CRD_FILE}"), "metadata.name", "not owned by the CSV");
}

#[test]
fn a_service_account_named_like_the_deployments_is_an_error() {
    let d = bundle("sa");
    std::fs::write(
        d.0.join("manifests/sa.yaml"),
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: model-orchestra-operator-v1}\n",
    )
    .unwrap();
    assert_error(&d, "manifests/sa.yaml", "metadata.name", "clashes");
}

#[test]
fn an_example_of_an_api_the_bundle_does_not_provide_is_an_error() {
    let d = bundle("alm-provided");
    edit_yaml(&csv_path(&d), |v| {
        let examples = v["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .unwrap()
            .replace("\"kind\":\"ModelOrchestra\"", "\"kind\":\"Other\"");
        v["metadata"]["annotations"]["alm-examples"] = examples.into();
    });
    assert_error(&d, &format!("manifests/{CSV_FILE}"), "alm-examples[0]", "example must have a provided API");
}

#[test]
fn invalid_alm_examples_are_an_error() {
    let d = bundle("alm");
    edit_yaml(&csv_path(&d), |v| v["metadata"]["annotations"]["alm-examples"] = "{not json".into());
    assert_error(&d, &format!("manifests/{CSV_FILE}"), "alm-examples", "JSON array");
}

#[test]
fn a_bundle_over_the_compressed_size_limit_is_an_error() {
    let d = bundle("size");
    // Incompressible content: base64(gzip(random)) is larger than the raw bytes.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let noise: String = (0..1_500_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect();
    std::fs::write(
        d.0.join("manifests/big.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata: {{x: {noise}}}\n"),
    )
    .unwrap();
    assert_error(&d, "manifests/", "", "maximum bundle compressed size");
}
