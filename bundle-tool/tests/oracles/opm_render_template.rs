//! `bundle-tool catalog render` against the real `opm alpha render-template semver`:
//! bundle images pushed to a loopback docker-registry, every template rendered by both,
//! the outputs compared byte for byte in YAML and in JSON; templates opm rejects are
//! rejected by bundle-tool too. Cases: the project's own catalog template, every case of
//! semver_template.rs as real images, and a generated corpus (at least 200 templates per
//! run, reproducible: BUNDLE_TOOL_CORPUS_SEED=N, size BUNDLE_TOOL_CORPUS_SIZE=N).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::oracle::{self, first_difference, outcome, Home, Pool, Rng};
use crate::support::{tool, Temp};

const README_CANDIDATE: &[&str] =
    &["0.1.0", "0.1.1", "0.1.2", "0.1.3", "0.2.0", "0.2.1", "0.2.2", "0.3.0", "1.0.0", "1.0.1", "1.1.0"];
const README_FAST: &[&str] = &["0.2.1", "0.2.2", "0.3.0", "1.0.1", "1.1.0"];
const README_STABLE: &[&str] = &["1.0.1"];

/// Versions the fixed cases use.
const FIXED: &[&str] = &[
    "0.1.0",
    "0.1.1",
    "0.1.2",
    "0.1.3",
    "0.2.0",
    "0.2.1",
    "0.2.2",
    "0.3.0",
    "1.0.0",
    "1.0.1",
    "1.1.0",
    "2.0.0",
    "2.1.0",
    "3.0.0",
    "1.3.0",
    "1.3.1",
    "1.3.1-alpha",
    "1.0.0+build.2",
    "1.1.0+build.1",
    "1.2.0",
    "1.3.0",
    "1.4.0",
    "1.5.0",
    "1.6.0",
    "1.7.0",
    "1.8.0",
    "1.9.0",
    "1.10.0",
    "1.10.1",
    "0.0.0-alpha",
    "0.0.0",
    "1.0.0+a",
    "1.0.0+b",
];

/// The generated corpus draws from these: 3 majors × 4 minors × 3 patches, a prerelease
/// before and after each minor's first patch, and build metadata on some.
fn corpus_versions() -> Vec<String> {
    let mut v = Vec::new();
    for major in 0..3 {
        for minor in 0..4 {
            for patch in 0..3 {
                v.push(format!("{major}.{minor}.{patch}"));
            }
            v.push(format!("{major}.{minor}.0-rc.1"));
            v.push(format!("{major}.{minor}.1-alpha.2"));
            v.push(format!("{major}.{minor}.2+build.{minor}"));
        }
    }
    v.push("0.0.0-alpha".into());
    v
}

struct Fixture {
    pool: Pool,
    /// An image of another package (1.1.0) and one whose CSV version is not semver ("1.0").
    other_package: String,
    not_semver: String,
    home: Home,
    cache: PathBuf,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

fn fixture() -> &'static Fixture {
    oracle::once(&FIXTURE, || {
        let mut versions: BTreeSet<String> = FIXED.iter().map(|s| s.to_string()).collect();
        versions.extend(corpus_versions());
        let pool = oracle::pool("render-template", &versions.into_iter().collect::<Vec<_>>());
        let rt = oracle::runtime();
        let extra = pool.registry.dir.join("extra");
        let other = oracle::bundle_dir(&extra, "other", "1.1.0", bundle_tool::bundle::CrdMode::Shared, false, |_| {});
        let annotations = other.join("metadata/annotations.yaml");
        let text = std::fs::read_to_string(&annotations).unwrap().replace("model-orchestra-operator", "other-operator");
        std::fs::write(&annotations, text).unwrap();
        let other_package = format!("{}/pool/other:v1.1.0", pool.registry.addr);
        oracle::push_dir(&rt, &other, &other_package);
        let loose = oracle::bundle_dir(&extra, "loose", "1.0.0", bundle_tool::bundle::CrdMode::Shared, false, |csv| {
            csv["spec"]["version"] = "1.0".into()
        });
        let not_semver = format!("{}/pool/loose:v1.0", pool.registry.addr);
        oracle::push_dir(&rt, &loose, &not_semver);
        let cache = pool.registry.dir.join("cache");
        let home = Home::inside(&pool.registry.dir);
        Fixture { pool, other_package, not_semver, home, cache }
    })
}

/// What one renderer made of a template: the output, or the failure.
type Rendered = Result<String, String>;

fn opm_render(f: &Fixture, template: &Path, format: &str, migrate: Option<&str>) -> Rendered {
    let mut cmd = f.home.opm();
    cmd.args(["alpha", "render-template", "semver", "--use-http", "-o", format]);
    if let Some(level) = migrate {
        cmd.args(["--migrate-level", level]);
    }
    outcome(&cmd.arg(template).output().expect("run opm"))
}

fn tool_render(f: &Fixture, template: &Path, format: &str, migrate: Option<&str>) -> Rendered {
    let mut cmd = tool();
    cmd.args(["catalog", "render"]).arg(template).arg("--cache-dir").arg(&f.cache).args(["--output-format", format]);
    if let Some(level) = migrate {
        cmd.args(["--migrate-level", level]);
    }
    outcome(&cmd.output().expect("run bundle-tool"))
}

/// Renders `text` with both in `format`; None when they agree (same bytes, or both
/// rejected), else a description of the difference.
fn compare(f: &Fixture, dir: &Path, text: &str, format: &str, migrate: Option<&str>) -> Option<String> {
    let file = dir.join("template.yaml");
    std::fs::write(&file, text).unwrap();
    match (opm_render(f, &file, format, migrate), tool_render(f, &file, format, migrate)) {
        (Ok(a), Ok(b)) if a == b => None,
        (Ok(a), Ok(b)) => Some(format!("{format} outputs differ at {}", first_difference(&a, &b))),
        (Err(_), Err(_)) => None,
        (Ok(_), Err(e)) => Some(format!("opm renders it, bundle-tool rejects it: {e}")),
        (Err(e), Ok(_)) => Some(format!("bundle-tool renders it, opm rejects it: {e}")),
    }
}

fn assert_same(f: &Fixture, dir: &Path, text: &str) {
    for format in ["yaml", "json"] {
        if let Some(d) = compare(f, dir, text, format, None) {
            panic!("{d}\ntemplate:\n{text}");
        }
    }
}

/// Both render it, identically, in both formats.
fn assert_renders_as_opm(test: &str, text: &str) {
    let f = fixture();
    let work = Temp::new(test);
    let file = work.0.join("template.yaml");
    std::fs::write(&file, text).unwrap();
    if let Err(e) = opm_render(f, &file, "yaml", None) {
        panic!("opm rejects the template, so the case would prove nothing: {e}\n{text}");
    }
    assert_same(f, &work.0, text);
}

/// Both reject it.
fn assert_rejected_by_both(test: &str, text: &str) {
    let f = fixture();
    let work = Temp::new(test);
    let file = work.0.join("template.yaml");
    std::fs::write(&file, text).unwrap();
    let opm = opm_render(f, &file, "yaml", None);
    assert!(opm.is_err(), "opm accepts the template, expected a rejection:\n{text}");
    let ours = tool_render(f, &file, "yaml", None);
    assert!(ours.is_err(), "bundle-tool accepts a template opm rejects ({}):\n{text}", opm.unwrap_err());
}

/// A template with `header` lines and archetype sections of pool versions.
fn template(header: &str, sections: &[(&str, &[&str])]) -> String {
    let f = fixture();
    let mut t = format!("schema: olm.semver\n{header}");
    for (archetype, versions) in sections {
        t.push_str(&format!("{archetype}:\n  bundles:\n"));
        for v in *versions {
            t.push_str(&format!("  - image: {}\n", f.pool.image(v)));
        }
    }
    t
}

// --- The project's own template --------------------------------------------------------

#[test]
fn the_checked_in_project_catalog_is_what_opm_renders_from_the_project_template() {
    let f = fixture();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let upstream = "ghcr.io/titanml/";
    let local = format!("{}/titanml/", f.pool.registry.addr);
    let text = std::fs::read_to_string(root.join("catalog/operator_catalog.yaml")).unwrap();
    // Push every bundle the template lists from bundles/X.Y.Z, under the loopback registry.
    let rt = oracle::runtime();
    for line in text.lines().filter_map(|l| l.trim().strip_prefix("- Image: ")) {
        let version = line.rsplit_once(":v").map(|(_, v)| v).expect("images are tagged vX.Y.Z");
        oracle::push_dir(&rt, &root.join("bundles").join(version), &line.replace(upstream, &local));
    }
    let localized = text.replace(upstream, &local);
    assert_renders_as_opm("project", &localized);
    let work = Temp::new("project-checked-in");
    let file = work.0.join("operator_catalog.yaml");
    std::fs::write(&file, &localized).unwrap();
    let opm = opm_render(f, &file, "yaml", None).unwrap().replace(&local, upstream);
    let checked_in =
        std::fs::read_to_string(root.join("catalog/configs/model-orchestra-operator/catalog.yaml")).unwrap();
    assert!(
        opm == checked_in,
        "catalog/configs differs from opm's render of the template: {}",
        first_difference(&opm, &checked_in)
    );
}

// --- semver_template.rs, case by case, with real images --------------------------------

#[test]
fn major_channels_of_the_readme_example_render_as_opm() {
    assert_renders_as_opm(
        "major",
        &template(
            "generateMajorChannels: true\ngenerateMinorChannels: false\n",
            &[("candidate", README_CANDIDATE), ("fast", README_FAST), ("stable", README_STABLE)],
        ),
    );
}

#[test]
fn minor_channels_of_the_readme_example_render_as_opm() {
    assert_renders_as_opm(
        "minor",
        &template(
            "generateMinorChannels: true\n",
            &[("candidate", README_CANDIDATE), ("fast", README_FAST), ("stable", README_STABLE)],
        ),
    );
}

#[test]
fn both_flags_false_render_as_opm() {
    assert_renders_as_opm(
        "no-flags",
        &template("generateMajorChannels: false\ngenerateMinorChannels: false\n", &[("stable", &["1.0.0", "1.1.0"])]),
    );
}

#[test]
fn both_kinds_with_a_major_preference_render_as_opm() {
    assert_renders_as_opm(
        "both-major",
        &template(
            "generateMajorChannels: true\ngenerateMinorChannels: true\ndefaultChannelTypePreference: major\n",
            &[("stable", &["2.0.0", "2.1.0"])],
        ),
    );
}

#[test]
fn a_tie_between_kinds_renders_as_opm_for_each_preference() {
    for (i, pref) in
        ["defaultChannelTypePreference: major\n", "defaultChannelTypePreference: minor\n", ""].iter().enumerate()
    {
        assert_renders_as_opm(
            &format!("tie-{i}"),
            &template(
                &format!("generateMajorChannels: true\ngenerateMinorChannels: true\n{pref}"),
                &[("stable", &["1.0.0"])],
            ),
        );
    }
}

#[test]
fn a_stable_bundle_wins_the_default_channel_as_in_opm() {
    assert_renders_as_opm(
        "stable-wins",
        &template(
            "generateMajorChannels: true\n",
            &[("candidate", &["3.0.0"]), ("fast", &["2.0.0"]), ("stable", &["1.0.0"])],
        ),
    );
}

#[test]
fn archetypes_keep_their_own_bundles_as_in_opm() {
    assert_renders_as_opm(
        "archetypes",
        &template("generateMajorChannels: true\n", &[("fast", &["1.0.0", "1.1.0"]), ("stable", &["1.0.0"])]),
    );
}

#[test]
fn prereleases_render_as_opm() {
    assert_renders_as_opm(
        "prerelease",
        &template("generateMinorChannels: true\n", &[("stable", &["1.3.1", "1.3.1-alpha", "1.3.0"])]),
    );
}

#[test]
fn build_metadata_renders_as_opm() {
    assert_renders_as_opm(
        "build",
        &template("generateMajorChannels: true\n", &[("stable", &["1.0.0+build.2", "1.1.0+build.1"])]),
    );
}

#[test]
fn skips_sorted_as_strings_render_as_opm() {
    let versions: Vec<String> = (0..=10).map(|m| format!("1.{m}.0")).collect();
    let refs: Vec<&str> = versions.iter().map(String::as_str).collect();
    assert_renders_as_opm("skips-11", &template("generateMajorChannels: true\n", &[("stable", &refs)]));
    assert_renders_as_opm(
        "skips-3",
        &template("generateMajorChannels: true\n", &[("stable", &["1.2.0", "1.10.0", "1.10.1"])]),
    );
}

#[test]
fn major_versions_stay_unlinked_as_in_opm() {
    assert_renders_as_opm("majors", &template("generateMinorChannels: true\n", &[("stable", &["1.0.0", "2.0.0"])]));
}

#[test]
fn capitalised_keys_render_as_opm() {
    let f = fixture();
    assert_renders_as_opm(
        "keys",
        &format!(
            "Schema: olm.semver\nGenerateMajorChannels: true\nStable:\n  Bundles:\n  - Image: {}\n",
            f.pool.image("1.0.0")
        ),
    );
}

#[test]
fn only_a_zero_prerelease_candidate_renders_as_opm_without_a_default_channel() {
    assert_renders_as_opm("zero-pre", &template("generateMajorChannels: true\n", &[("candidate", &["0.0.0-alpha"])]));
}

#[test]
fn a_tie_at_zero_renders_as_opm() {
    assert_renders_as_opm(
        "zero-major",
        &template(
            "generateMajorChannels: true\ngenerateMinorChannels: true\ndefaultChannelTypePreference: major\n",
            &[("candidate", &["0.0.0"])],
        ),
    );
    assert_renders_as_opm(
        "zero-unset",
        &template("generateMajorChannels: true\ngenerateMinorChannels: true\n", &[("candidate", &["0.0.0"])]),
    );
}

#[test]
fn the_csv_metadata_migration_renders_as_opm() {
    let f = fixture();
    let text = template(
        "generateMajorChannels: true\ngenerateMinorChannels: true\n",
        &[("fast", &["1.0.0", "1.1.0"]), ("stable", &["1.0.0"])],
    );
    let work = Temp::new("migrate");
    for format in ["yaml", "json"] {
        if let Some(d) = compare(f, &work.0, &text, format, Some("bundle-object-to-csv-metadata")) {
            panic!("{d}\n{text}");
        }
    }
}

#[test]
fn an_unknown_schema_is_rejected_by_both() {
    let f = fixture();
    assert_rejected_by_both(
        "schema",
        &format!("schema: olm.semver.v2\nstable: {{bundles: [{{image: {}}}]}}\n", f.pool.image("1.0.0")),
    );
}

#[test]
fn a_preference_for_a_kind_not_generated_is_rejected_by_both() {
    let stable = |f: &Fixture| format!("stable: {{bundles: [{{image: {}}}]}}\n", f.pool.image("1.0.0"));
    let f = fixture();
    assert_rejected_by_both(
        "pref-major",
        &format!("schema: olm.semver\ndefaultChannelTypePreference: major\n{}", stable(f)),
    );
    assert_rejected_by_both(
        "pref-minor",
        &format!("schema: olm.semver\ngenerateMajorChannels: true\ndefaultChannelTypePreference: minor\n{}", stable(f)),
    );
    assert_rejected_by_both(
        "pref-patch",
        &format!("schema: olm.semver\ndefaultChannelTypePreference: patch\n{}", stable(f)),
    );
}

#[test]
fn unknown_and_duplicate_keys_are_rejected_by_both() {
    let f = fixture();
    let image = f.pool.image("1.0.0");
    assert_rejected_by_both(
        "unknown-key",
        &format!("schema: olm.semver\navoidSkipPatch: true\nstable: {{bundles: [{{image: {image}}}]}}\n"),
    );
    assert_rejected_by_both(
        "unknown-item-key",
        &format!("schema: olm.semver\nstable: {{bundles: [{{image: {image}, digest: x}}]}}\n"),
    );
    assert_rejected_by_both(
        "duplicate-key",
        &format!("schema: olm.semver\nstable: {{bundles: [{{image: {image}}}]}}\nstable: {{}}\n"),
    );
}

#[test]
fn the_same_bundle_twice_in_one_archetype_is_rejected_by_both() {
    assert_rejected_by_both("twice", &template("generateMajorChannels: true\n", &[("stable", &["1.0.0", "1.0.0"])]));
}

#[test]
fn a_bundle_of_another_package_is_rejected_by_both() {
    let f = fixture();
    let text = format!("{}  - image: {}\n", template("", &[("stable", &["1.0.0"])]), f.other_package);
    assert_rejected_by_both("other-package", &text);
}

#[test]
fn a_version_that_is_not_strict_semver_is_rejected_by_both() {
    let f = fixture();
    assert_rejected_by_both(
        "not-semver",
        &format!("schema: olm.semver\nstable:\n  bundles:\n  - image: {}\n", f.not_semver),
    );
}

#[test]
fn a_template_without_bundles_is_rejected_by_both() {
    assert_rejected_by_both("no-bundles", "schema: olm.semver\nstable: {bundles: []}\n");
}

#[test]
fn versions_differing_only_by_build_metadata_are_rejected_by_both() {
    assert_rejected_by_both(
        "build-clash",
        &template("generateMajorChannels: true\n", &[("stable", &["1.0.0+a", "1.0.0+b"])]),
    );
}

// --- The generated corpus ---------------------------------------------------------------

/// A random template over the pool: 1–40 bundles (distinct after build metadata is
/// dropped), each in a random non-empty set of archetypes, in random order; one or both
/// channel flags (now and then neither); a random default channel preference (sometimes
/// one opm rejects); now and then capitalised keys.
fn random_template(rng: &mut Rng, f: &Fixture, versions: &[String]) -> String {
    let n = 1 + rng.below(40);
    let mut chosen: Vec<&String> = Vec::new();
    let mut stripped = BTreeSet::new();
    while chosen.len() < n {
        let v = &versions[rng.below(versions.len())];
        if stripped.insert(v.split('+').next().unwrap().to_string()) {
            chosen.push(v);
        }
    }
    let caps = rng.chance(10);
    let key = |k: &str| if caps { k[..1].to_uppercase() + &k[1..] } else { k.to_string() };
    let mut t = format!("{}: olm.semver\n", key("schema"));
    let (major, minor) = match rng.below(10) {
        0 => (false, false),
        1..=3 => (true, false),
        4..=6 => (false, true),
        _ => (true, true),
    };
    for (name, on) in [("generateMajorChannels", major), ("generateMinorChannels", minor)] {
        if on || rng.chance(30) {
            t.push_str(&format!("{}: {on}\n", key(name)));
        }
    }
    let pref = match rng.below(20) {
        0 => Some("patch"),
        1..=6 => None,
        7 => Some("\"\""),
        8..=13 => Some(if major { "major" } else { "minor" }),
        14..=18 => Some(if minor || !major { "minor" } else { "major" }),
        _ => Some(if rng.chance(50) { "major" } else { "minor" }),
    };
    if let Some(p) = pref {
        t.push_str(&format!("{}: {p}\n", key("defaultChannelTypePreference")));
    }
    let mut lists: [Vec<&String>; 3] = [vec![], vec![], vec![]];
    for v in chosen {
        let mask = 1 + rng.below(7);
        for (i, list) in lists.iter_mut().enumerate() {
            if mask & (1 << i) != 0 {
                list.push(v);
            }
        }
    }
    for (i, archetype) in ["candidate", "fast", "stable"].iter().enumerate() {
        let list = &mut lists[i];
        if list.is_empty() {
            continue;
        }
        for j in (1..list.len()).rev() {
            list.swap(j, rng.below(j + 1));
        }
        t.push_str(&format!("{}:\n  {}:\n", key(archetype), key("bundles")));
        for v in list.iter() {
            t.push_str(&format!("  - {}: {}\n", key("image"), f.pool.image(v)));
        }
    }
    t
}

/// Both verdicts of `opm validate` and `catalog validate` on the catalog in `configs`
/// agree.
fn validation_agrees(f: &Fixture, configs: &Path) -> Option<String> {
    let opm = outcome(&f.home.opm().arg("validate").arg(configs).output().expect("run opm"));
    let catalog = bundle_tool::catalog::fbc::load_dir(configs).unwrap();
    let ours = bundle_tool::catalog::validate::validate(&catalog);
    match (opm, ours.is_empty()) {
        (Ok(_), true) | (Err(_), false) => None,
        (Ok(_), false) => Some(format!(
            "opm validate accepts the rendered catalog, bundle-tool finds: {}",
            ours.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        )),
        (Err(e), true) => Some(format!("opm validate rejects the rendered catalog, bundle-tool accepts it: {e}")),
    }
}

/// One corpus template: rendered by opm (JSON; its YAML is opm's writer on that JSON,
/// `opm render DIR -o yaml`, which costs no second round of pulls — and every tenth
/// template checks that it is what `render-template -o yaml` prints) and by bundle-tool
/// (both formats), compared byte for byte; then both validators judge the result.
/// Returns the problems and whether it rendered.
fn corpus_case(f: &Fixture, dir: &Path, text: &str, direct_yaml: bool) -> (Vec<String>, bool) {
    let file = dir.join("template.yaml");
    std::fs::write(&file, text).unwrap();
    let (opm_json, ours_json) = (opm_render(f, &file, "json", None), tool_render(f, &file, "json", None));
    let opm_json = match (opm_json, ours_json) {
        (Ok(a), Ok(b)) if a == b => a,
        (Ok(a), Ok(b)) => return (vec![format!("json outputs differ at {}", first_difference(&a, &b))], true),
        (Err(_), Err(_)) => return (vec![], false),
        (Ok(_), Err(e)) => return (vec![format!("opm renders it, bundle-tool rejects it: {e}")], true),
        (Err(e), Ok(_)) => return (vec![format!("bundle-tool renders it, opm rejects it: {e}")], false),
    };
    let configs = dir.join("configs");
    let _ = std::fs::remove_dir_all(&configs);
    std::fs::create_dir_all(configs.join("pkg")).unwrap();
    std::fs::write(configs.join("pkg/catalog.json"), &opm_json).unwrap();
    let mut problems = Vec::new();
    match outcome(&f.home.opm().args(["render", "-o", "yaml"]).arg(&configs).output().expect("run opm")) {
        Err(e) => problems.push(format!("opm cannot render its own JSON output: {e}")),
        Ok(opm_yaml) => {
            if direct_yaml {
                match opm_render(f, &file, "yaml", None) {
                    Ok(direct) if direct == opm_yaml => {}
                    Ok(direct) => problems.push(format!(
                        "opm's YAML from its JSON is not its render-template -o yaml: {}",
                        first_difference(&direct, &opm_yaml)
                    )),
                    Err(e) => problems.push(format!("opm render-template -o yaml fails where -o json worked: {e}")),
                }
            }
            match tool_render(f, &file, "yaml", None) {
                Ok(ours) if ours == opm_yaml => {}
                Ok(ours) => problems.push(format!("yaml outputs differ at {}", first_difference(&opm_yaml, &ours))),
                Err(e) => problems.push(format!("bundle-tool renders JSON but not YAML: {e}")),
            }
        }
    }
    problems.extend(validation_agrees(f, &configs));
    (problems, true)
}

#[test]
fn a_generated_corpus_of_templates_renders_byte_for_byte_as_opm() {
    let f = fixture();
    let seed: u64 = match std::env::var("BUNDLE_TOOL_CORPUS_SEED") {
        Ok(s) => s.parse().expect("BUNDLE_TOOL_CORPUS_SEED is a u64"),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    };
    let size: usize = std::env::var("BUNDLE_TOOL_CORPUS_SIZE")
        .ok()
        .map(|s| s.parse().expect("BUNDLE_TOOL_CORPUS_SIZE is a number"))
        .unwrap_or(200);
    eprintln!("corpus: {size} templates from seed {seed} (replay: BUNDLE_TOOL_CORPUS_SEED={seed})");
    let versions = corpus_versions();
    let mut rng = Rng::new(seed);
    let templates: Vec<String> = (0..size).map(|_| random_template(&mut rng, f, &versions)).collect();
    let failures = std::sync::Mutex::new(Vec::new());
    let rendered = std::sync::atomic::AtomicUsize::new(0);
    // opm spends most of a render waiting on the registry, one pull at a time: three
    // workers keep two cores busy without crowding them.
    const WORKERS: usize = 3;
    std::thread::scope(|s| {
        for worker in 0..WORKERS {
            let (templates, failures, rendered) = (&templates, &failures, &rendered);
            s.spawn(move || {
                let work = Temp::new(&format!("corpus-{worker}"));
                for (i, text) in templates.iter().enumerate().filter(|(i, _)| i % WORKERS == worker) {
                    let (problems, ok) = corpus_case(f, &work.0, text, i % 10 == 0);
                    if ok {
                        rendered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    if !problems.is_empty() {
                        failures.lock().unwrap().push(format!("template #{i}: {}\n{text}", problems.join("\n")));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    let rendered = rendered.into_inner();
    assert!(
        failures.is_empty(),
        "{} of {size} generated templates differ from opm (replay: BUNDLE_TOOL_CORPUS_SEED={seed} cargo test -p bundle-tool --test opm_render_template):\n\n{}",
        failures.len(),
        failures.iter().take(5).cloned().collect::<Vec<_>>().join("\n\n")
    );
    assert!(rendered * 2 > size, "only {rendered} of {size} templates rendered (the rest were rejected by both): the corpus tests too little (seed {seed})");
    eprintln!("corpus: {size} templates agree ({rendered} rendered, {} rejected by both)", size - rendered);
}
