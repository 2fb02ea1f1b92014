//! `catalog render` from local bundle directories: the checked-in project catalog is what
//! the template renders to, and rendered bundles carry what `opm render` derives.

use std::path::Path;

use crate::support::{run, tool, Temp};
use base64::Engine;
use bundle_tool::catalog::bundle::Objects;
use bundle_tool::catalog::source::Sources;
use serde_json::Value;

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn render_as(template: &str, file: &Path, bundles_dir: &Path, objects: Objects) -> bundle_tool::catalog::fbc::Catalog {
    let sources = Sources {
        bundles_dir: Some(bundles_dir.to_path_buf()),
        cache_dir: Some(std::env::temp_dir().join("bt-unused-cache")),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(bundle_tool::catalog::render(template, file, &sources, objects)).unwrap().0
}

fn render(template: &str, file: &Path, bundles_dir: &Path) -> bundle_tool::catalog::fbc::Catalog {
    render_as(template, file, bundles_dir, Objects::BundleObjects)
}

#[test]
fn the_checked_in_project_catalog_is_what_the_template_renders_to() {
    let template = repo("catalog/operator_catalog.yaml");
    let catalog = render(&std::fs::read_to_string(&template).unwrap(), &template, &repo("bundles"));
    let checked_in = std::fs::read_to_string(repo("catalog/configs/model-orchestra-operator/catalog.yaml")).unwrap();
    assert!(catalog.to_yaml() == checked_in, "catalog/configs is stale: run `make catalog`");
}

/// Two owned-mode bundles, 1.0.0 and 1.1.0, and a template listing them in Stable.
fn two_bundles(work: &Path) -> (std::path::PathBuf, String) {
    let meta = repo("config/manifests/metadata.yaml");
    for v in ["1.0.0", "1.1.0"] {
        run(tool()
            .args([
                "bundle",
                "generate",
                "--version",
                v,
                "--crd-mode",
                "owned",
                "--image",
                "registry.example.com/op",
                "--metadata",
            ])
            .arg(&meta)
            .arg("--output")
            .arg(work.join("bundles")));
    }
    let template = "schema: olm.semver\ngenerateMajorChannels: true\nstable:\n  bundles:\n  - image: registry.example.com/op-bundle:v1.0.0\n  - image: registry.example.com/op-bundle:v1.1.0\n".to_string();
    (work.join("bundles"), template)
}

#[test]
fn a_rendered_bundle_carries_the_properties_and_related_images_opm_derives() {
    let work = Temp::new("render-props");
    let (bundles, template) = two_bundles(&work.0);
    let catalog = render(&template, &work.0.join("t.yaml"), &bundles);
    let (b, _) = catalog.bundles.iter().find(|(b, _)| b.name == "model-orchestra-operator.v1.1.0").unwrap();
    assert_eq!(b.image, "registry.example.com/op-bundle:v1.1.0", "the reference exactly as written");
    let types: Vec<&str> = b.properties.iter().map(|p| p.type_.as_str()).collect();
    // One olm.gvk per version the owned CRD serves.
    assert_eq!(
        types,
        ["olm.gvk", "olm.gvk", "olm.package", "olm.bundle.object", "olm.bundle.object"],
        "sorted by type, objects last"
    );
    assert_eq!(
        b.properties[0].value,
        serde_json::json!({"group": "models.titanml.co", "kind": "ModelOrchestra", "version": "v1alpha1"})
    );
    assert_eq!(
        b.properties[1].value,
        serde_json::json!({"group": "models.titanml.co", "kind": "ModelOrchestra", "version": "v1alpha2"})
    );
    assert_eq!(
        b.properties[2].value,
        serde_json::json!({"packageName": "model-orchestra-operator", "version": "1.1.0"})
    );
    let kinds: Vec<String> = b.properties[3..]
        .iter()
        .map(|p| {
            let data = base64::engine::general_purpose::STANDARD.decode(p.value["data"].as_str().unwrap()).unwrap();
            let obj: Value = serde_json::from_slice(&data).unwrap();
            obj["kind"].as_str().unwrap().to_string()
        })
        .collect();
    let mut sorted_kinds = kinds.clone();
    sorted_kinds.sort();
    assert_eq!(sorted_kinds, ["ClusterServiceVersion", "CustomResourceDefinition"]);
    let images: Vec<(&str, &str)> = b.related_images.iter().map(|r| (r.name.as_str(), r.image.as_str())).collect();
    // Sorted by image: "op-bundle:…" before "op:…" ('-' < ':').
    assert_eq!(
        images,
        [("", "registry.example.com/op-bundle:v1.1.0"), ("model-orchestra-operator", "registry.example.com/op:v1.1.0")]
    );
    let (stable, _) = &catalog.channels[0];
    assert_eq!(stable.name, "stable-v1");
    assert_eq!(stable.entries[1].replaces, "model-orchestra-operator.v1.0.0");
    let (pkg, _) = &catalog.packages[0];
    assert!(
        pkg.description.contains("LLM inference") && pkg.icon.is_some(),
        "description and icon from the default channel head's CSV"
    );
}

#[test]
fn json_output_uses_opm_field_order_and_four_space_indents() {
    let work = Temp::new("render-json");
    let (bundles, template) = two_bundles(&work.0);
    let json = render(&template, &work.0.join("t.yaml"), &bundles).to_json();
    assert!(
        json.starts_with("{\n    \"schema\": \"olm.package\",\n    \"name\": \"model-orchestra-operator\",\n    \"defaultChannel\": \"stable-v1\","),
        "{}",
        &json[..200]
    );
    assert!(
        json.contains("{\n    \"schema\": \"olm.channel\",\n    \"name\": \"stable-v1\",\n    \"package\": \"model-orchestra-operator\",\n    \"entries\": [")
    );
    // Every document parses back to the same catalog.
    let mut again = bundle_tool::catalog::fbc::Catalog::default();
    bundle_tool::catalog::fbc::load_text(&json, Path::new("c.json"), &mut again).unwrap();
    assert_eq!(again.bundles.len(), 2);
    assert_eq!(again.to_json(), json);
}

#[test]
fn the_cli_writes_the_rendered_catalog_and_validates_it() {
    let work = Temp::new("render-cli");
    let (bundles, template) = two_bundles(&work.0);
    let file = work.0.join("operator_catalog.yaml");
    std::fs::write(&file, template).unwrap();
    let out = work.0.join("configs/model-orchestra-operator/catalog.yaml");
    let rendered =
        run(tool().args(["catalog", "render"]).arg(&file).arg("--bundles-dir").arg(&bundles).arg("-o").arg(&out));
    assert!(
        String::from_utf8_lossy(&rendered.stderr).contains("2 from bundle directories"),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    run(tool().args(["catalog", "validate"]).arg(work.0.join("configs")));
}

#[test]
fn an_invalid_catalog_fails_validation_naming_object_and_rule() {
    let work = Temp::new("render-invalid");
    let dir = work.0.join("configs/acme");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("catalog.yaml"), "schema: olm.package\nname: acme\ndefaultChannel: stable-v1\n").unwrap();
    let out = tool().args(["catalog", "validate"]).arg(work.0.join("configs")).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("olm.package \"acme\" [default-channel]") && stderr.contains("catalog.yaml (document 1)"),
        "{stderr}"
    );
}

#[test]
fn images_map_to_bundle_directories_by_their_version_tag() {
    let work = Temp::new("render-unmapped");
    let (bundles, _) = two_bundles(&work.0);
    let sources = Sources { bundles_dir: Some(bundles), ..Default::default() };
    assert!(sources.local_dir("registry.example.com/op-bundle:v1.0.0").is_some());
    assert!(sources.local_dir("registry.example.com/op-bundle:1.1.0").is_some(), "the v is optional");
    assert!(sources.local_dir("registry.example.com/op-bundle:v2.0.0").is_none(), "no such directory");
    assert!(sources
        .local_dir(
            "registry.example.com/op-bundle@sha256:0000000000000000000000000000000000000000000000000000000000000000"
        )
        .is_none());
}

#[test]
fn the_csv_metadata_migration_replaces_bundle_objects_with_one_csv_metadata_property() {
    let work = Temp::new("render-csvmeta");
    let (bundles, template) = two_bundles(&work.0);
    let catalog = render_as(&template, &work.0.join("t.yaml"), &bundles, Objects::CsvMetadata);
    let (b, _) = &catalog.bundles[0];
    let types: Vec<&str> = b.properties.iter().map(|p| p.type_.as_str()).collect();
    assert_eq!(types, ["olm.gvk", "olm.gvk", "olm.package", "olm.csv.metadata"]);
    let meta = &b.properties[3].value;
    assert_eq!(meta["displayName"], "Model Orchestra");
    assert_eq!(meta["crdDescriptions"]["owned"][0]["kind"], "ModelOrchestra");
    assert_eq!(
        meta["apiServiceDefinitions"],
        serde_json::json!({}),
        "Go writes its struct-typed fields even when empty"
    );
    assert!(meta["installModes"].as_array().unwrap().iter().any(|m| m["type"] == "AllNamespaces"));
    assert!(meta.get("nativeAPIs").is_none());
}
