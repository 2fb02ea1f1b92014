//! Each bundle bundle-tool generates, as the real `opm render` sees it — from its image
//! in a loopback docker-registry and from its directory — is the `olm.bundle` that
//! bundle-tool derives, byte for byte in YAML and JSON: properties, `olm.bundle.object`
//! blobs (or `olm.csv.metadata` with the migrate level) and relatedImages.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::oracle::{self, first_difference, outcome, Home, SharedRegistry};
use bundle_tool::bundle::CrdMode;
use bundle_tool::catalog::bundle::{render, BundleContent, Objects};
use bundle_tool::catalog::fbc::{Catalog, Origin};
use bundle_tool::catalog::source::Sources;

struct Generated {
    label: String,
    dir: PathBuf,
    image: String,
}

struct Fixture {
    bundles: Vec<Generated>,
    home: Home,
    cache: PathBuf,
    _registry: SharedRegistry,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

/// Every kind of bundle `bundle generate` makes: both CRD modes, with and without
/// --claim-unlabeled, a release and a prerelease, pushed as images.
fn fixture() -> &'static Fixture {
    oracle::once(&FIXTURE, || {
        let registry = SharedRegistry::start("render-bundle");
        let rt = oracle::runtime();
        let mut bundles = Vec::new();
        for (mode, mode_name) in [(CrdMode::Owned, "owned"), (CrdMode::Shared, "shared")] {
            for claim in [false, true] {
                for version in ["1.2.3", "2.0.0-rc.1"] {
                    let label = format!("{mode_name}{}-{version}", if claim { "-claim-unlabeled" } else { "" });
                    let dir = oracle::bundle_dir(&registry.dir.join("bundles"), &label, version, mode, claim, |_| {});
                    let image = format!("{}/acme/{label}:{}", registry.addr, oracle::tag(version));
                    oracle::push_dir(&rt, &dir, &image);
                    bundles.push(Generated { label, dir, image });
                }
            }
        }
        let cache = registry.dir.join("cache");
        Fixture { bundles, home: Home::inside(&registry.dir), cache, _registry: registry }
    })
}

fn as_catalog(content: &BundleContent, image: &str, objects: Objects) -> Catalog {
    let rendered = render(content, image, objects).unwrap();
    Catalog { bundles: vec![(rendered.bundle, Origin::default())], ..Default::default() }
}

fn opm_render(f: &Fixture, reference: &Path, format: &str, objects: Objects) -> String {
    let mut cmd = f.home.opm();
    cmd.args(["render", "--use-http", "-o", format]).arg(reference);
    if objects == Objects::CsvMetadata {
        cmd.args(["--migrate-level", "bundle-object-to-csv-metadata"]);
    }
    outcome(&cmd.output().expect("run opm")).unwrap_or_else(|e| panic!("opm render {}: {e}", reference.display()))
}

fn check(label: &str, what: &str, opm: &str, ours: &str) -> Option<String> {
    (opm != ours).then(|| format!("{label} ({what}): {}", first_difference(opm, ours)))
}

#[test]
fn every_generated_bundle_image_renders_as_opm_renders_it() {
    let f = fixture();
    let rt = oracle::runtime();
    let sources = Sources { cache_dir: Some(f.cache.clone()), ..Default::default() };
    let mut problems = Vec::new();
    for b in &f.bundles {
        let (content, _) = rt.block_on(sources.load(&b.image)).unwrap();
        for objects in [Objects::BundleObjects, Objects::CsvMetadata] {
            let ours = as_catalog(&content, &b.image, objects);
            problems.extend(check(
                &b.label,
                &format!("image, yaml, {objects:?}"),
                &opm_render(f, Path::new(&b.image), "yaml", objects),
                &ours.to_yaml(),
            ));
            problems.extend(check(
                &b.label,
                &format!("image, json, {objects:?}"),
                &opm_render(f, Path::new(&b.image), "json", objects),
                &ours.to_json(),
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_generated_bundle_directory_renders_as_opm_renders_it() {
    let f = fixture();
    let mut problems = Vec::new();
    for b in &f.bundles {
        let files = bundle_tool::bundle::generate::read_tree(&b.dir).unwrap();
        let content = BundleContent::annotations_from_files(files, &b.label).unwrap();
        for objects in [Objects::BundleObjects, Objects::CsvMetadata] {
            // `opm render DIR` leaves the image empty.
            let ours = as_catalog(&content, "", objects);
            problems.extend(check(
                &b.label,
                &format!("directory, yaml, {objects:?}"),
                &opm_render(f, &b.dir, "yaml", objects),
                &ours.to_yaml(),
            ));
            problems.extend(check(
                &b.label,
                &format!("directory, json, {objects:?}"),
                &opm_render(f, &b.dir, "json", objects),
                &ours.to_json(),
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn an_owned_crd_missing_from_the_bundle_is_refused_by_both() {
    let f = fixture();
    let owned = f.bundles.iter().find(|b| b.label == "owned-1.2.3").unwrap();
    let work = crate::support::Temp::new("render-missing-crd");
    let dir = work.0.join("bundle");
    std::fs::create_dir_all(&dir).unwrap();
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let csv = format!("manifests/{}", bundle_tool::bundle::CSV_FILE);
    for file in [csv.as_str(), "metadata/annotations.yaml"] {
        std::fs::copy(owned.dir.join(file), dir.join(file)).unwrap();
    }
    let opm = outcome(&f.home.opm().args(["render", "-o", "yaml"]).arg(&dir).output().unwrap());
    assert!(opm.is_err(), "opm renders a bundle whose owned CRD is missing");
    let content =
        BundleContent::annotations_from_files(bundle_tool::bundle::generate::read_tree(&dir).unwrap(), "missing-crd")
            .unwrap();
    let ours = render(&content, "", Objects::BundleObjects);
    assert!(ours.is_err(), "bundle-tool renders a bundle opm refuses ({})", opm.unwrap_err());
}
