//! The semver template, case by case, against the channels current opm generates
//! (olm.md §4). Bundle facts are given directly: the algorithm reads only each bundle's
//! name, package and version.

use std::collections::BTreeMap;
use std::path::Path;

use bundle_tool::catalog::fbc::Channel;
use bundle_tool::catalog::semver::{generate, BundleFacts, Graph, SemverError};
use bundle_tool::catalog::template::parse;

const PKG: &str = "testoperator";

fn name(v: &str) -> String {
    format!("{PKG}.v{v}")
}

fn image(v: &str) -> String {
    format!("quay.io/acme/bundle:v{v}")
}

/// A template with the given sections (`stable: [1.0.0, …]`) and header lines.
fn template(header: &str, sections: &[(&str, &[&str])]) -> String {
    let mut t = format!("schema: olm.semver\n{header}");
    for (archetype, versions) in sections {
        t.push_str(&format!("{archetype}:\n  bundles:\n"));
        for v in *versions {
            t.push_str(&format!("  - image: {}\n", image(v)));
        }
    }
    t
}

fn facts(sections: &[(&str, &[&str])]) -> BTreeMap<String, BundleFacts> {
    sections
        .iter()
        .flat_map(|(_, vs)| vs.iter())
        .map(|v| (image(v), BundleFacts { name: name(v), package: PKG.into(), version: v.to_string() }))
        .collect()
}

fn render(header: &str, sections: &[(&str, &[&str])]) -> Result<Graph, SemverError> {
    let t = parse(&template(header, sections), Path::new("t.yaml")).expect("template parses");
    generate(&t, &facts(sections))
}

/// A channel written compactly: `"0.1.3 <0.1.2 !0.1.0,0.1.1"` = entry 0.1.3 replacing
/// 0.1.2 and skipping 0.1.0 and 0.1.1.
fn entries(c: &Channel) -> Vec<String> {
    c.entries
        .iter()
        .map(|e| {
            let mut s = e.name.trim_start_matches(&format!("{PKG}.v")).to_string();
            if !e.replaces.is_empty() {
                s.push_str(&format!(" <{}", e.replaces.trim_start_matches(&format!("{PKG}.v"))));
            }
            if !e.skips.is_empty() {
                s.push_str(&format!(
                    " !{}",
                    e.skips.iter().map(|k| k.trim_start_matches(&format!("{PKG}.v"))).collect::<Vec<_>>().join(",")
                ));
            }
            s
        })
        .collect()
}

fn channel<'a>(g: &'a Graph, n: &str) -> &'a Channel {
    g.channels
        .iter()
        .find(|c| c.name == n)
        .unwrap_or_else(|| panic!("no channel {n} in {:?}", g.channels.iter().map(|c| &c.name).collect::<Vec<_>>()))
}

fn names(g: &Graph) -> Vec<&str> {
    g.channels.iter().map(|c| c.name.as_str()).collect()
}

const README_CANDIDATE: &[&str] =
    &["0.1.0", "0.1.1", "0.1.2", "0.1.3", "0.2.0", "0.2.1", "0.2.2", "0.3.0", "1.0.0", "1.0.1", "1.1.0"];
const README_FAST: &[&str] = &["0.2.1", "0.2.2", "0.3.0", "1.0.1", "1.1.0"];
const README_STABLE: &[&str] = &["1.0.1"];

#[test]
fn major_channels_reproduce_the_opm_readme_example() {
    let g = render(
        "generateMajorChannels: true\ngenerateMinorChannels: false\n",
        &[("candidate", README_CANDIDATE), ("fast", README_FAST), ("stable", README_STABLE)],
    )
    .unwrap();
    assert_eq!(names(&g), ["candidate-v0", "candidate-v1", "fast-v0", "fast-v1", "stable-v1"]);
    assert_eq!(
        entries(channel(&g, "candidate-v0")),
        [
            "0.1.0",
            "0.1.1",
            "0.1.2",
            "0.1.3 !0.1.0,0.1.1,0.1.2",
            "0.2.0",
            "0.2.1",
            "0.2.2 <0.1.3 !0.1.0,0.1.1,0.1.2,0.2.0,0.2.1",
            "0.3.0 <0.2.2 !0.1.0,0.1.1,0.1.2,0.1.3,0.2.0,0.2.1"
        ]
    );
    assert_eq!(entries(channel(&g, "candidate-v1")), ["1.0.0", "1.0.1 !1.0.0", "1.1.0 <1.0.1 !1.0.0"]);
    assert_eq!(entries(channel(&g, "fast-v0")), ["0.2.1", "0.2.2 !0.2.1", "0.3.0 <0.2.2 !0.2.1"]);
    assert_eq!(entries(channel(&g, "fast-v1")), ["1.0.1", "1.1.0 <1.0.1"]);
    assert_eq!(entries(channel(&g, "stable-v1")), ["1.0.1"]);
    assert_eq!(g.default_channel, "stable-v1");
    assert_eq!(g.package, PKG);
}

#[test]
fn minor_channels_link_across_minor_lines() {
    let g = render(
        "generateMinorChannels: true\n",
        &[("candidate", README_CANDIDATE), ("fast", README_FAST), ("stable", README_STABLE)],
    )
    .unwrap();
    assert_eq!(
        entries(channel(&g, "candidate-v0.2")),
        ["0.2.0", "0.2.1", "0.2.2 <0.1.3 !0.1.0,0.1.1,0.1.2,0.2.0,0.2.1"]
    );
    assert_eq!(entries(channel(&g, "candidate-v0.1")), ["0.1.0", "0.1.1", "0.1.2", "0.1.3 !0.1.0,0.1.1,0.1.2"]);
    assert_eq!(entries(channel(&g, "candidate-v1.1")), ["1.1.0 <1.0.1 !1.0.0"]);
    assert_eq!(g.default_channel, "stable-v1.0");
}

#[test]
fn both_flags_false_generate_minor_channels() {
    let g = render("generateMajorChannels: false\ngenerateMinorChannels: false\n", &[("stable", &["1.0.0", "1.1.0"])])
        .unwrap();
    assert_eq!(names(&g), ["stable-v1.0", "stable-v1.1"]);
    assert_eq!(g.default_channel, "stable-v1.1");
}

#[test]
fn both_kinds_give_the_default_to_the_channel_whose_lowest_member_is_highest() {
    // Preference only breaks exact ties: stable-v2.1 (lowest 2.1.0) beats stable-v2 (lowest 2.0.0).
    let g = render(
        "generateMajorChannels: true\ngenerateMinorChannels: true\ndefaultChannelTypePreference: major\n",
        &[("stable", &["2.0.0", "2.1.0"])],
    )
    .unwrap();
    assert_eq!(names(&g), ["stable-v2", "stable-v2.0", "stable-v2.1"]);
    assert_eq!(g.default_channel, "stable-v2.1");
    assert_eq!(entries(channel(&g, "stable-v2")), ["2.0.0", "2.1.0 <2.0.0"]);
    assert_eq!(entries(channel(&g, "stable-v2.1")), ["2.1.0 <2.0.0"]);
}

#[test]
fn the_preference_breaks_a_tie_between_major_and_minor_channels() {
    let major = render(
        "generateMajorChannels: true\ngenerateMinorChannels: true\ndefaultChannelTypePreference: major\n",
        &[("stable", &["1.0.0"])],
    )
    .unwrap();
    assert_eq!(major.default_channel, "stable-v1");
    let minor = render(
        "generateMajorChannels: true\ngenerateMinorChannels: true\ndefaultChannelTypePreference: minor\n",
        &[("stable", &["1.0.0"])],
    )
    .unwrap();
    assert_eq!(minor.default_channel, "stable-v1.0");
    let unset =
        render("generateMajorChannels: true\ngenerateMinorChannels: true\n", &[("stable", &["1.0.0"])]).unwrap();
    assert_eq!(unset.default_channel, "stable-v1.0", "an unset preference is minor when minor channels are generated");
}

#[test]
fn any_stable_bundle_makes_a_stable_channel_the_default() {
    let g = render(
        "generateMajorChannels: true\n",
        &[("candidate", &["3.0.0"]), ("fast", &["2.0.0"]), ("stable", &["1.0.0"])],
    )
    .unwrap();
    assert_eq!(g.default_channel, "stable-v1");
}

#[test]
fn bundles_in_fast_are_not_copied_into_stable_or_candidate() {
    let g = render("generateMajorChannels: true\n", &[("fast", &["1.0.0", "1.1.0"]), ("stable", &["1.0.0"])]).unwrap();
    assert_eq!(names(&g), ["fast-v1", "stable-v1"]);
    assert_eq!(entries(channel(&g, "stable-v1")), ["1.0.0"]);
    assert_eq!(entries(channel(&g, "fast-v1")), ["1.0.0", "1.1.0 <1.0.0"]);
}

#[test]
fn prereleases_sort_before_their_release_and_stay_out_of_channel_names() {
    let g = render("generateMinorChannels: true\n", &[("stable", &["1.3.1", "1.3.1-alpha", "1.3.0"])]).unwrap();
    assert_eq!(names(&g), ["stable-v1.3"]);
    assert_eq!(entries(channel(&g, "stable-v1.3")), ["1.3.0", "1.3.1-alpha", "1.3.1 !1.3.0,1.3.1-alpha"]);
}

#[test]
fn build_metadata_is_ignored_for_order_and_names() {
    let g = render("generateMajorChannels: true\n", &[("stable", &["1.0.0+build.2", "1.1.0+build.1"])]).unwrap();
    assert_eq!(entries(channel(&g, "stable-v1")), ["1.0.0+build.2", "1.1.0+build.1 <1.0.0+build.2"]);
}

#[test]
fn versions_that_differ_only_by_build_metadata_are_rejected() {
    let err = render("generateMajorChannels: true\n", &[("stable", &["1.0.0+a", "1.0.0+b"])]).unwrap_err();
    assert!(err.to_string().contains("differ only by build metadata"), "{err}");
}

#[test]
fn skips_are_sorted_as_strings_not_as_versions() {
    let versions: Vec<String> = (0..=10).map(|m| format!("1.{m}.0")).collect();
    let refs: Vec<&str> = versions.iter().map(String::as_str).collect();
    let g = render("generateMajorChannels: true\n", &[("stable", &refs)]).unwrap();
    let head = channel(&g, "stable-v1").entries.last().unwrap();
    assert_eq!(head.replaces, name("1.9.0"));
    assert_eq!(head.skips[..3], [name("1.0.0"), name("1.1.0"), name("1.2.0")]);
    let g = render("generateMajorChannels: true\n", &[("stable", &["1.2.0", "1.10.0", "1.10.1"])]).unwrap();
    assert_eq!(
        channel(&g, "stable-v1").entries.last().unwrap().skips,
        [name("1.10.0")],
        "1.10.1 replaces 1.2.0 and skips 1.10.0"
    );
    assert_eq!(channel(&g, "stable-v1").entries.last().unwrap().replaces, name("1.2.0"));
}

#[test]
fn nothing_links_across_major_versions() {
    let g = render("generateMinorChannels: true\n", &[("stable", &["1.0.0", "2.0.0"])]).unwrap();
    assert_eq!(entries(channel(&g, "stable-v2.0")), ["2.0.0"]);
}

#[test]
fn keys_are_matched_case_insensitively_like_the_opm_readme_writes_them() {
    let t =
        "Schema: olm.semver\nGenerateMajorChannels: true\nStable:\n  Bundles:\n  - Image: quay.io/acme/bundle:v1.0.0\n";
    let parsed = parse(t, Path::new("t.yaml")).unwrap();
    let g = generate(&parsed, &facts(&[("stable", &["1.0.0"])])).unwrap();
    assert_eq!(g.default_channel, "stable-v1");
}

fn rejected(text: &str) -> String {
    parse(text, Path::new("catalog/operator_catalog.yaml")).unwrap_err().to_string()
}

#[test]
fn an_unknown_schema_is_rejected() {
    let e = rejected("schema: olm.semver.v2\nstable: {bundles: [{image: a:v1.0.0}]}\n");
    assert!(
        e.contains("unknown schema, should be \"olm.semver\"") && e.contains("catalog/operator_catalog.yaml"),
        "{e}"
    );
}

#[test]
fn a_preference_for_a_kind_that_is_not_generated_is_rejected() {
    let e = rejected("schema: olm.semver\ndefaultChannelTypePreference: major\n");
    assert!(
        e.contains(
            "DefaultChannelTypePreference set to 'major' doesn't make sense if not generating major-version channels"
        ),
        "{e}"
    );
    let e = rejected("schema: olm.semver\ngenerateMajorChannels: true\ndefaultChannelTypePreference: minor\n");
    assert!(e.contains("not generating minor-version channels"), "{e}");
    let e = rejected("schema: olm.semver\ndefaultChannelTypePreference: patch\n");
    assert!(e.contains("unknown DefaultChannelTypePreference"), "{e}");
}

#[test]
fn unknown_and_duplicate_keys_are_rejected() {
    let e = rejected("schema: olm.semver\navoidSkipPatch: true\n");
    assert!(e.contains("json: unknown field \"avoidSkipPatch\""), "{e}");
    let e = rejected("schema: olm.semver\nstable: {bundles: [{image: a:v1, digest: x}]}\n");
    assert!(e.contains("unknown field \"digest\""), "{e}");
    let e = rejected("schema: olm.semver\nstable: {}\nstable: {}\n");
    assert!(e.contains("duplicate"), "{e}");
}

#[test]
fn the_same_bundle_twice_in_one_channel_type_is_rejected() {
    let t = parse(&template("generateMajorChannels: true\n", &[("stable", &["1.0.0", "1.0.0"])]), Path::new("t.yaml"))
        .unwrap();
    let err = generate(&t, &facts(&[("stable", &["1.0.0"])])).unwrap_err();
    assert!(matches!(err, SemverError::Duplicate { .. }), "{err}");
}

#[test]
fn bundles_of_another_package_are_rejected() {
    let t = parse(&template("", &[("stable", &["1.0.0", "1.1.0"])]), Path::new("t.yaml")).unwrap();
    let mut f = facts(&[("stable", &["1.0.0", "1.1.0"])]);
    f.get_mut(&image("1.1.0")).unwrap().package = "other".into();
    assert!(matches!(generate(&t, &f).unwrap_err(), SemverError::OtherPackage { .. }));
}

#[test]
fn a_version_that_is_not_strict_semver_is_rejected() {
    let t = parse(&template("", &[("stable", &["1.0"])]), Path::new("t.yaml")).unwrap();
    let err = generate(&t, &facts(&[("stable", &["1.0"])])).unwrap_err();
    assert!(matches!(err, SemverError::InvalidVersion { .. }), "{err}");
}

#[test]
fn a_template_without_bundles_is_rejected() {
    let t = parse("schema: olm.semver\nstable: {bundles: []}\n", Path::new("t.yaml")).unwrap();
    assert_eq!(generate(&t, &BTreeMap::new()).unwrap_err(), SemverError::NoBundles);
}

#[test]
fn only_prerelease_zero_candidates_leave_no_default_channel() {
    let g = render("generateMajorChannels: true\n", &[("candidate", &["0.0.0-alpha"])]).unwrap();
    assert_eq!(
        g.default_channel, "",
        "opm's high-water mark starts at candidate 0.0.0; catalog validate then rejects it"
    );
}

#[test]
fn with_both_kinds_the_preferred_kind_wins_a_tie_at_zero() {
    // A candidate 0.0.0 ties opm's starting mark on archetype and version; any kind beats
    // "none", and the preferred kind beats the other.
    let g = render(
        "generateMajorChannels: true\ngenerateMinorChannels: true\ndefaultChannelTypePreference: major\n",
        &[("candidate", &["0.0.0"])],
    )
    .unwrap();
    assert_eq!(g.default_channel, "candidate-v0");
    let g = render("generateMajorChannels: true\ngenerateMinorChannels: true\n", &[("candidate", &["0.0.0"])]).unwrap();
    assert_eq!(g.default_channel, "candidate-v0.0");
}
