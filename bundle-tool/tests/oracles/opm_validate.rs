//! `catalog validate` and the real `opm validate` reach the same verdict: on generated
//! catalogs — a valid catalog broken by one to three random mutations (edges, versions,
//! names, images, default channel, deprecations, …) — every catalog opm rejects,
//! bundle-tool rejects, and every catalog opm accepts, bundle-tool accepts.
//! Reproducible: BUNDLE_TOOL_VALIDATE_SEED=N; size BUNDLE_TOOL_VALIDATE_SIZE=N (150).

use crate::support::oracle::{outcome, Home, Rng};
use crate::support::Temp;
use serde_json::{json, Value};

/// A valid catalog: package acme, stable-v1 (1.0.0 ← 1.1.0 ← 1.2.0, skipping 1.0.0 and
/// ranged) and fast-v1 (1.1.0, 1.2.0, 1.3.0-rc.1), a deprecation.
fn base() -> Vec<Value> {
    let bundle = |v: &str| {
        json!({"schema": "olm.bundle", "name": format!("acme.v{v}"), "package": "acme", "image": format!("quay.io/acme/bundle:v{v}"),
               "properties": [{"type": "olm.package", "value": {"packageName": "acme", "version": v}}]})
    };
    vec![
        json!({"schema": "olm.package", "name": "acme", "defaultChannel": "stable-v1"}),
        json!({"schema": "olm.channel", "name": "stable-v1", "package": "acme", "entries": [
            {"name": "acme.v1.0.0"},
            {"name": "acme.v1.1.0", "replaces": "acme.v1.0.0"},
            {"name": "acme.v1.2.0", "replaces": "acme.v1.1.0", "skips": ["acme.v1.0.0"], "skipRange": ">=1.0.0 <1.2.0"}]}),
        json!({"schema": "olm.channel", "name": "fast-v1", "package": "acme", "entries": [
            {"name": "acme.v1.1.0"},
            {"name": "acme.v1.2.0", "replaces": "acme.v1.1.0"},
            {"name": "acme.v1.3.0-rc.1", "replaces": "acme.v1.2.0"}]}),
        bundle("1.0.0"),
        bundle("1.1.0"),
        bundle("1.2.0"),
        bundle("1.3.0-rc.1"),
        json!({"schema": "olm.deprecations", "package": "acme", "entries": [{"reference": {"schema": "olm.bundle", "name": "acme.v1.0.0"}, "message": "use 1.2.0"}]}),
    ]
}

fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> &'a T {
    &items[rng.below(items.len())]
}

fn indexes(docs: &[Value], schema: &str) -> Vec<usize> {
    docs.iter().enumerate().filter(|(_, d)| d["schema"] == schema).map(|(i, _)| i).collect()
}

fn bundle_names(docs: &[Value]) -> Vec<String> {
    docs.iter().filter(|d| d["schema"] == "olm.bundle").filter_map(|d| d["name"].as_str().map(String::from)).collect()
}

/// One random change; returns its description.
fn mutate(rng: &mut Rng, docs: &mut Vec<Value>) -> String {
    let mut names = bundle_names(docs);
    names.push("acme.v9.9.9".into());
    let channels = indexes(docs, "olm.channel");
    let bundles = indexes(docs, "olm.bundle");
    let versions = ["1.0.0", "1.1.0", "1.4.0", "1.0", "v1.5.0", "1.0.0+build.1", "", "2.0.0-0"];
    let images = [
        "quay.io/acme/bundle@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "Quay.io/Acme/Bundle:V1",
        "quay.io/acme/bundle:v1 latest",
        "",
        "acme",
    ];
    let ranges = [">=1.0.0 <1.2.0", "garbage", ">=1.0 <2", "<1.1.0 || >1.1.5", ""];
    match rng.below(18) {
        0 if !channels.is_empty() => {
            let c = *pick(rng, &channels);
            let n = docs[c]["entries"].as_array().map_or(0, Vec::len);
            if n == 0 {
                return "nothing".into();
            }
            let e = rng.below(n);
            docs[c]["entries"][e].as_object_mut().unwrap().remove("replaces");
            format!("channel {c} entry {e}: replaces removed")
        }
        1 if !channels.is_empty() => {
            let c = *pick(rng, &channels);
            let n = docs[c]["entries"].as_array().map_or(0, Vec::len);
            if n == 0 {
                return "nothing".into();
            }
            let e = rng.below(n);
            let target = pick(rng, &names).clone();
            docs[c]["entries"][e]["replaces"] = json!(target);
            format!("channel {c} entry {e}: replaces {target}")
        }
        2 if !channels.is_empty() => {
            let c = *pick(rng, &channels);
            let n = docs[c]["entries"].as_array().map_or(0, Vec::len);
            if n == 0 {
                return "nothing".into();
            }
            let e = rng.below(n);
            let target = if rng.chance(20) { String::new() } else { pick(rng, &names).clone() };
            let entry = &mut docs[c]["entries"][e];
            if !entry["skips"].is_array() {
                entry["skips"] = json!([]);
            }
            entry["skips"].as_array_mut().unwrap().push(json!(target));
            format!("channel {c} entry {e}: skips {target:?}")
        }
        3 if !bundles.is_empty() => {
            let b = *pick(rng, &bundles);
            docs.remove(b);
            format!("bundle doc {b} removed")
        }
        4 if !bundles.is_empty() => {
            let b = *pick(rng, &bundles);
            let copy = docs[b].clone();
            docs.push(copy);
            format!("bundle doc {b} duplicated")
        }
        5 if !bundles.is_empty() => {
            let b = *pick(rng, &bundles);
            let v = *pick(rng, &versions);
            docs[b]["properties"][0]["value"]["version"] = json!(v);
            format!("bundle doc {b}: version {v:?}")
        }
        6 => {
            let d = *pick(rng, &["stable-v1", "fast-v1", "beta", ""]);
            if let Some(p) = docs.iter_mut().find(|d| d["schema"] == "olm.package") {
                p["defaultChannel"] = json!(d);
            }
            format!("defaultChannel {d:?}")
        }
        7 => {
            docs.retain(|d| d["schema"] != "olm.package");
            "package removed".into()
        }
        8 if !bundles.is_empty() => {
            let b = *pick(rng, &bundles);
            docs[b]["package"] = json!("other");
            format!("bundle doc {b}: package other")
        }
        9 if !channels.is_empty() => {
            let c = *pick(rng, &channels);
            docs[c]["entries"].as_array_mut().unwrap().push(json!({"name": "acme.v7.0.0"}));
            format!("channel {c}: entry without a bundle")
        }
        10 if !channels.is_empty() => {
            let c = *pick(rng, &channels);
            if rng.chance(50) {
                docs.remove(c);
                format!("channel doc {c} removed")
            } else {
                docs[c]["entries"] = json!([]);
                format!("channel doc {c} emptied")
            }
        }
        11 => {
            let long = "x".repeat(64);
            let n = pick(rng, &["Acme", "a.b", "acme-", long.as_str()]).to_string();
            for d in docs.iter_mut() {
                if d["schema"] == "olm.package" {
                    d["name"] = json!(n);
                } else {
                    d["package"] = json!(n);
                }
                if d["schema"] == "olm.bundle" {
                    d["properties"][0]["value"]["packageName"] = json!(n);
                }
            }
            format!("package renamed {n:?}")
        }
        12 if !channels.is_empty() => {
            let c = *pick(rng, &channels);
            let n = docs[c]["entries"].as_array().map_or(0, Vec::len);
            if n == 0 {
                return "nothing".into();
            }
            let e = rng.below(n);
            let r = *pick(rng, &ranges);
            docs[c]["entries"][e]["skipRange"] = json!(r);
            format!("channel {c} entry {e}: skipRange {r:?}")
        }
        13 if !bundles.is_empty() => {
            let b = *pick(rng, &bundles);
            let i = *pick(rng, &images);
            if rng.chance(50) {
                docs[b]["image"] = json!(i);
            } else {
                docs[b]["relatedImages"] = json!([{"name": "x", "image": i}]);
            }
            format!("bundle doc {b}: image or related image {i:?}")
        }
        14 if !bundles.is_empty() => {
            let b = *pick(rng, &bundles);
            let prop = docs[b]["properties"][0].clone();
            docs[b]["properties"].as_array_mut().unwrap().push(prop);
            format!("bundle doc {b}: second olm.package property")
        }
        15 => {
            let (schema, name) = *pick(
                rng,
                &[
                    ("olm.bundle", "acme.v9.9.9"),
                    ("olm.bundle", "acme.v1.1.0"),
                    ("olm.channel", "fast-v1"),
                    ("olm.channel", "beta"),
                    ("olm.package", ""),
                    ("", "x"),
                ],
            );
            let message = if rng.chance(20) { "" } else { "gone" };
            let reference =
                if name.is_empty() { json!({"schema": schema}) } else { json!({"schema": schema, "name": name}) };
            match docs.iter_mut().find(|d| d["schema"] == "olm.deprecations") {
                Some(d) => d["entries"].as_array_mut().unwrap().push(json!({"reference": reference, "message": message})),
                None => docs.push(json!({"schema": "olm.deprecations", "package": "acme", "entries": [{"reference": reference, "message": message}]})),
            }
            format!("deprecation of {schema} {name:?} ({message:?})")
        }
        16 if !channels.is_empty() => {
            let c = *pick(rng, &channels);
            let copy = docs[c].clone();
            docs.push(copy);
            format!("channel doc {c} duplicated")
        }
        _ => {
            docs.push(json!({"schema": "acme.example/custom", "package": "acme", "anything": [1, 2]}));
            "a document of another schema".into()
        }
    }
}

fn write_yaml(docs: &[Value]) -> String {
    docs.iter().map(|d| format!("---\n{}", serde_yaml::to_string(d).unwrap())).collect()
}

#[test]
fn the_valid_base_catalog_is_valid_for_both() {
    let home = Home::new("opm-validate-base");
    let work = Temp::new("opm-validate-base");
    std::fs::create_dir_all(work.0.join("acme")).unwrap();
    let text = write_yaml(&base());
    std::fs::write(work.0.join("acme/catalog.yaml"), &text).unwrap();
    outcome(&home.opm().arg("validate").arg(&work.0).output().unwrap()).expect("opm validate accepts the base catalog");
    let catalog = bundle_tool::catalog::fbc::load_dir(&work.0).unwrap();
    assert_eq!(bundle_tool::catalog::validate::validate(&catalog), vec![]);
}

#[test]
fn generated_broken_catalogs_get_the_same_verdict_from_opm_validate_and_catalog_validate() {
    let seed: u64 = match std::env::var("BUNDLE_TOOL_VALIDATE_SEED") {
        Ok(s) => s.parse().expect("BUNDLE_TOOL_VALIDATE_SEED is a u64"),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    };
    let size: usize =
        std::env::var("BUNDLE_TOOL_VALIDATE_SIZE").ok().map(|s| s.parse().expect("a number")).unwrap_or(150);
    eprintln!("validate corpus: {size} catalogs from seed {seed} (replay: BUNDLE_TOOL_VALIDATE_SEED={seed})");
    let home = Home::new("opm-validate");
    let work = Temp::new("opm-validate");
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    let mut rejected = 0;
    for i in 0..size {
        let mut docs = base();
        let changes: Vec<String> = (0..1 + rng.below(3)).map(|_| mutate(&mut rng, &mut docs)).collect();
        let dir = work.0.join(format!("c{i}"));
        std::fs::create_dir_all(dir.join("acme")).unwrap();
        let text = write_yaml(&docs);
        std::fs::write(dir.join("acme/catalog.yaml"), &text).unwrap();
        let opm = outcome(&home.opm().arg("validate").arg(&dir).output().expect("run opm"));
        let ours = match bundle_tool::catalog::fbc::load_dir(&dir) {
            Ok(catalog) => {
                bundle_tool::catalog::validate::validate(&catalog).iter().map(ToString::to_string).collect::<Vec<_>>()
            }
            Err(e) => vec![e.to_string()],
        };
        rejected += usize::from(opm.is_err());
        match (&opm, ours.is_empty()) {
            (Ok(_), true) | (Err(_), false) => {}
            (Ok(_), false) => failures.push(format!(
                "catalog #{i} ({}): opm accepts, bundle-tool rejects: {}\n{text}",
                changes.join("; "),
                ours.join("; ")
            )),
            (Err(e), true) => failures
                .push(format!("catalog #{i} ({}): opm rejects, bundle-tool accepts: {e}\n{text}", changes.join("; "))),
        }
        std::fs::remove_dir_all(&dir).ok();
    }
    assert!(
        failures.is_empty(),
        "{} of {size} verdicts differ (replay: BUNDLE_TOOL_VALIDATE_SEED={seed} cargo test -p bundle-tool --test opm_validate):\n\n{}",
        failures.len(),
        failures.iter().take(5).cloned().collect::<Vec<_>>().join("\n\n")
    );
    assert!(
        rejected * 4 > size && rejected < size,
        "{rejected} of {size} catalogs rejected: the mutations test too little (seed {seed})"
    );
}
