//! `catalog validate`: a valid catalog passes, and one broken catalog per `opm validate`
//! rule fails naming the object and the rule. The real `opm validate` is asked about each
//! catalog too, and must agree.

use std::path::Path;

use crate::support::oracle::{outcome, Home};

use bundle_tool::catalog::fbc::{load_text, Catalog};
use bundle_tool::catalog::validate::{validate, Finding};

const PACKAGE: &str = "---
schema: olm.package
name: acme
defaultChannel: stable-v1
";

fn bundle(name: &str, version: &str) -> String {
    format!(
        "---
schema: olm.bundle
name: {name}
package: acme
image: quay.io/acme/bundle:v{version}
properties:
- type: olm.package
  value: {{packageName: acme, version: {version}}}
"
    )
}

fn channel(name: &str, entries: &str) -> String {
    format!("---\nschema: olm.channel\nname: {name}\npackage: acme\nentries:\n{entries}")
}

/// acme.v1.0.0 ← acme.v1.1.0 (replaces) in stable-v1.
fn valid() -> String {
    PACKAGE.to_string()
        + &channel("stable-v1", "- name: acme.v1.0.0\n- name: acme.v1.1.0\n  replaces: acme.v1.0.0\n")
        + &bundle("acme.v1.0.0", "1.0.0")
        + &bundle("acme.v1.1.0", "1.1.0")
}

fn check(text: &str) -> Vec<Finding> {
    let mut catalog = Catalog::default();
    load_text(text, Path::new("configs/acme/catalog.yaml"), &mut catalog).expect("loads");
    validate(&catalog)
}

/// `opm validate` of a catalog directory holding `text`: Ok, or its complaint.
fn opm_validate(text: &str) -> Result<String, String> {
    let dir = tempdir();
    let home = Home::new(&format!("catalog-validate-{}", dir.file_name().unwrap().to_string_lossy()));
    std::fs::create_dir_all(dir.join("acme")).unwrap();
    std::fs::write(dir.join("acme/catalog.yaml"), text).unwrap();
    let verdict = outcome(&home.opm().arg("validate").arg(&dir).output().expect("run opm"));
    std::fs::remove_dir_all(&dir).ok();
    verdict
}

fn tempdir() -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("bt-catalog-validate-{}-{n}", std::process::id()))
}

fn assert_opm_accepts(text: &str) {
    if let Err(e) = opm_validate(text) {
        panic!("opm validate rejects the catalog bundle-tool accepts: {e}\n{text}");
    }
}

fn assert_rule(text: &str, rule: &str, message: &str) {
    assert!(opm_validate(text).is_err(), "opm validate accepts the catalog that breaks [{rule}]:\n{text}");
    let findings = check(text);
    assert!(
        findings.iter().any(|f| f.rule == rule && f.to_string().contains(message)),
        "expected [{rule}] {message:?}, got:\n{}",
        findings.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_valid_catalog_has_no_findings() {
    assert_eq!(check(&valid()), vec![]);
    assert_opm_accepts(&valid());
}

#[test]
fn the_rendered_project_catalog_is_valid() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../catalog/configs"));
    let catalog = bundle_tool::catalog::fbc::load_dir(dir).unwrap();
    assert_eq!(validate(&catalog), vec![]);
    assert_eq!(catalog.packages.len(), 1);
    let home = Home::new("catalog-validate-project");
    outcome(&home.opm().arg("validate").arg(dir).output().unwrap()).expect("opm validate accepts catalog/configs");
}

#[test]
fn a_document_without_schema_is_refused_at_load() {
    let mut catalog = Catalog::default();
    let err = load_text("name: acme\n", Path::new("x.yaml"), &mut catalog).unwrap_err().to_string();
    assert!(err.contains("missing root schema field") && err.contains("x.yaml (document 1)"), "{err}");
    assert!(opm_validate("name: acme\n").is_err(), "opm validate accepts a document without schema");
}

#[test]
fn a_package_name_must_be_a_dns_label() {
    assert_rule(&valid().replace("name: acme\n", "name: Acme.Operator\n"), "package-name", "DNS-1123 label");
}

#[test]
fn the_default_channel_must_be_set() {
    assert_rule(&valid().replace("defaultChannel: stable-v1\n", ""), "default-channel", "default channel must be set");
}

#[test]
fn the_default_channel_must_exist() {
    assert_rule(
        &valid().replace("defaultChannel: stable-v1", "defaultChannel: stable-v9"),
        "default-channel",
        "\"stable-v9\" does not exist",
    );
}

#[test]
fn a_channel_must_belong_to_a_known_package() {
    assert_rule(
        &(valid() + "---\nschema: olm.channel\nname: fast-v1\npackage: other\nentries:\n- name: acme.v1.0.0\n"),
        "channel-package",
        "unknown package \"other\"",
    );
}

#[test]
fn channel_names_are_unique_in_a_package() {
    assert_rule(&(valid() + &channel("stable-v1", "- name: acme.v1.0.0\n")), "channel-unique", "duplicate channel");
}

#[test]
fn a_channel_lists_each_bundle_once() {
    assert_rule(
        &valid().replace("- name: acme.v1.0.0\n- name", "- name: acme.v1.0.0\n- name: acme.v1.0.0\n- name"),
        "entry-unique",
        "duplicate entry \"acme.v1.0.0\"",
    );
}

#[test]
fn every_entry_needs_its_bundle() {
    assert_rule(
        &(valid() + &channel("fast-v1", "- name: acme.v1.2.0\n")),
        "entry-bundle",
        "no olm.bundle blobs found for entry \"acme.v1.2.0\"",
    );
}

#[test]
fn every_bundle_appears_in_a_channel() {
    assert_rule(&(valid() + &bundle("acme.v2.0.0", "2.0.0")), "bundle-in-channel", "not found in any channel entries");
}

#[test]
fn a_bundle_must_belong_to_a_known_package() {
    assert_rule(
        &(valid() + &bundle("x.v1.0.0", "3.0.0").replace("package: acme\n", "package: nope\n")),
        "bundle-package",
        "unknown package \"nope\"",
    );
}

#[test]
fn bundle_names_are_unique_in_a_package() {
    assert_rule(&(valid() + &bundle("acme.v1.1.0", "1.1.0")), "bundle-unique", "duplicate bundle name");
}

#[test]
fn a_bundle_has_exactly_one_matching_package_property() {
    assert_rule(
        &valid().replace("{packageName: acme, version: 1.1.0}", "{packageName: other, version: 1.1.0}"),
        "package-property",
        "names \"other\"",
    );
    let two = valid().replace(
        "  value: {packageName: acme, version: 1.1.0}\n",
        "  value: {packageName: acme, version: 1.1.0}\n- type: olm.package\n  value: {packageName: acme, version: 1.1.0}\n",
    );
    assert_rule(&two, "package-property", "exactly one olm.package property, found 2");
}

#[test]
fn bundle_versions_are_strict_semver() {
    assert_rule(&valid().replace("version: 1.1.0}", "version: v1.1}"), "version", "\"v1.1\" is not strict semver");
}

#[test]
fn versions_are_unique_across_the_package() {
    let text = valid() + &channel("fast-v1", "- name: acme.v1.1.0-copy\n") + &bundle("acme.v1.1.0-copy", "1.1.0");
    assert_rule(&text, "unique-versions", "duplicate versions found in bundles: 1.1.0");
}

#[test]
fn images_must_be_pull_specs() {
    assert_rule(
        &valid().replace("image: quay.io/acme/bundle:v1.1.0", "image: 'quay.io/acme/bundle:v1.1.0 latest'"),
        "image",
        "not a valid pull spec",
    );
}

#[test]
fn a_channel_has_exactly_one_head() {
    let two_heads = valid().replace("  replaces: acme.v1.0.0\n", "");
    assert_rule(&two_heads, "one-head", "multiple channel heads found in graph: acme.v1.0.0, acme.v1.1.0");
    let no_head =
        valid().replace("- name: acme.v1.0.0\n- name", "- name: acme.v1.0.0\n  replaces: acme.v1.1.0\n- name");
    assert_rule(&no_head, "one-head", "no channel head found");
}

#[test]
fn a_replaces_cycle_below_the_head_is_detected() {
    let text = PACKAGE.to_string()
        + &channel(
            "stable-v1",
            "- name: acme.v1.0.0\n  replaces: acme.v1.1.0\n- name: acme.v1.1.0\n  replaces: acme.v1.0.0\n- name: acme.v1.2.0\n  replaces: acme.v1.1.0\n",
        )
        + &bundle("acme.v1.0.0", "1.0.0")
        + &bundle("acme.v1.1.0", "1.1.0")
        + &bundle("acme.v1.2.0", "1.2.0");
    assert_rule(&text, "no-cycle", "detected cycle");
}

#[test]
fn a_bundle_off_the_replaces_chain_and_not_skipped_is_stranded() {
    // Head 1.2.0 replaces 1.0.0 and skips 1.1.5; 1.1.5 replaces 1.1.0, which is then
    // neither on the head's chain nor skipped.
    let text = PACKAGE.to_string()
        + &channel("stable-v1", "- name: acme.v1.0.0\n- name: acme.v1.1.0\n- name: acme.v1.1.5\n  replaces: acme.v1.1.0\n- name: acme.v1.2.0\n  replaces: acme.v1.0.0\n  skips: [acme.v1.1.5]\n")
        + &bundle("acme.v1.0.0", "1.0.0")
        + &bundle("acme.v1.1.0", "1.1.0")
        + &bundle("acme.v1.1.5", "1.1.5")
        + &bundle("acme.v1.2.0", "1.2.0");
    assert_rule(&text, "no-stranded", "stranded bundles: acme.v1.1.0");
    let skipped = text.replace("skips: [acme.v1.1.5]", "skips: [acme.v1.1.5, acme.v1.1.0]");
    assert_eq!(check(&skipped), vec![], "a skipped bundle is not stranded");
    assert_opm_accepts(&skipped);
}

#[test]
fn skip_entries_and_skip_ranges_must_be_well_formed() {
    assert_rule(
        &valid().replace("  replaces: acme.v1.0.0\n", "  replaces: acme.v1.0.0\n  skips: ['']\n"),
        "skips",
        "empty skips item",
    );
    assert_rule(
        &valid().replace("  replaces: acme.v1.0.0\n", "  replaces: acme.v1.0.0\n  skipRange: '>=1.0 <1.1.0'\n"),
        "skip-range",
        "does not parse",
    );
    let ranged = valid()
        .replace("  replaces: acme.v1.0.0\n", "  replaces: acme.v1.0.0\n  skipRange: '>=1.0.0 <1.1.0 || =0.9.0'\n");
    assert_eq!(check(&ranged), vec![]);
    assert_opm_accepts(&ranged);
}

#[test]
fn deprecations_must_reference_objects_of_their_package() {
    let dep = "---\nschema: olm.deprecations\npackage: acme\nentries:\n- reference: {schema: olm.bundle, name: acme.v0.9.0}\n  message: gone\n- reference: {schema: olm.channel, name: stable-v1}\n  message: ''\n";
    assert_rule(&(valid() + dep), "deprecation-reference", "\"acme.v0.9.0\" does not name an object");
    assert_rule(&(valid() + dep), "deprecation-message", "empty message");
    assert_rule(&(valid() + dep + dep), "deprecation-unique", "more than one olm.deprecations");
}

#[test]
fn a_channel_without_entries_is_rejected() {
    assert_rule(
        &(valid() + "---\nschema: olm.channel\nname: fast-v1\npackage: acme\nentries: []\n"),
        "channel-bundles",
        "at least one bundle",
    );
}

#[test]
fn a_bundle_needs_an_image_unless_its_objects_are_inlined() {
    assert_rule(
        &valid().replace("image: quay.io/acme/bundle:v1.1.0\n", "image: ''\n"),
        "image",
        "bundle image must be set",
    );
    let inlined = valid().replace(
        "image: quay.io/acme/bundle:v1.1.0\nproperties:\n",
        "image: ''\nproperties:\n- type: olm.bundle.object\n  value: {data: eyJraW5kIjoiQ29uZmlnTWFwIiwiYXBpVmVyc2lvbiI6InYxIn0=}\n",
    );
    assert_eq!(check(&inlined), vec![]);
    assert_opm_accepts(&inlined);
}
