//! `opm validate` for a File-Based Catalog (olm.md §3.3): the declcfg-to-model
//! conversion checks, then the model checks (default channel, unique versions, one head
//! per channel, no cycles, no stranded bundles). Each finding names the object and rule.

use std::collections::{BTreeMap, BTreeSet};

use super::fbc::{Catalog, Origin};
use model_orchestra_api::names::is_dns_label;

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// e.g. `olm.channel "stable-v1" (package "model-orchestra-operator")`.
    pub object: String,
    pub rule: &'static str,
    pub message: String,
    pub origin: Option<Origin>,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}]: {}", self.object, self.rule, self.message)?;
        if let Some(o) = &self.origin {
            write!(f, " (in {o})")?;
        }
        Ok(())
    }
}

struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, object: String, rule: &'static str, message: impl Into<String>, origin: Option<&Origin>) {
        self.0.push(Finding { object, rule, message: message.into(), origin: origin.cloned() });
    }
}

fn package_obj(name: &str) -> String {
    format!("olm.package {name:?}")
}
fn channel_obj(pkg: &str, name: &str) -> String {
    format!("olm.channel {name:?} (package {pkg:?})")
}
fn bundle_obj(pkg: &str, name: &str) -> String {
    format!("olm.bundle {name:?} (package {pkg:?})")
}

/// A pull spec opm would accept (empty is allowed).
fn pull_spec_ok(image: &str) -> bool {
    image.is_empty() || (image.parse::<oci_client::Reference>().is_ok() && !image.chars().any(char::is_whitespace))
}

/// blang/semver ranges: `||`-separated alternatives of space-separated comparators.
pub fn skip_range_ok(range: &str) -> bool {
    let range = range.trim();
    !range.is_empty()
        && range.split("||").all(|alt| {
            let parts: Vec<&str> = alt.split_whitespace().collect();
            !parts.is_empty()
                && parts.iter().all(|c| {
                    let v = c.trim_start_matches(['>', '<', '=', '!']);
                    let op = &c[..c.len() - v.len()];
                    matches!(op, "" | "=" | "==" | "!=" | ">" | ">=" | "<" | "<=")
                        && semver::Version::parse(v.trim_start_matches('v')).is_ok()
                })
        })
}

pub fn validate(catalog: &Catalog) -> Vec<Finding> {
    let mut f = Findings(Vec::new());

    // Packages.
    let mut packages: BTreeMap<&str, &super::fbc::Package> = BTreeMap::new();
    for (p, o) in &catalog.packages {
        if p.name.is_empty() {
            f.add("olm.package \"\"".into(), "package-name", "package name must be set", Some(o));
            continue;
        }
        if !is_dns_label(&p.name) {
            f.add(
                package_obj(&p.name),
                "package-name",
                "package name must be a DNS-1123 label (lower-case letters, digits, '-', at most 63)",
                Some(o),
            );
        }
        if packages.insert(p.name.as_str(), p).is_some() {
            f.add(package_obj(&p.name), "package-unique", "duplicate package", Some(o));
        }
    }

    // Channels.
    let mut channels: BTreeMap<(&str, &str), &super::fbc::Channel> = BTreeMap::new();
    for (c, o) in &catalog.channels {
        let obj = channel_obj(&c.package, &c.name);
        if !packages.contains_key(c.package.as_str()) {
            f.add(obj.clone(), "channel-package", format!("unknown package {:?}", c.package), Some(o));
        }
        if c.name.is_empty() {
            f.add(obj.clone(), "channel-name", "channel name must be set", Some(o));
        }
        if channels.insert((c.package.as_str(), c.name.as_str()), c).is_some() {
            f.add(obj.clone(), "channel-unique", "duplicate channel in the package", Some(o));
        }
        let mut seen = BTreeSet::new();
        for e in &c.entries {
            if !seen.insert(e.name.as_str()) {
                f.add(obj.clone(), "entry-unique", format!("duplicate entry {:?}", e.name), Some(o));
            }
            if e.skips.iter().any(String::is_empty) {
                f.add(obj.clone(), "skips", format!("entry {:?} has an empty skips item", e.name), Some(o));
            }
            if !e.skip_range.is_empty() && !skip_range_ok(&e.skip_range) {
                f.add(
                    obj.clone(),
                    "skip-range",
                    format!("entry {:?}: skipRange {:?} does not parse", e.name, e.skip_range),
                    Some(o),
                );
            }
        }
    }

    // Bundles.
    let mut bundles: BTreeMap<(&str, &str), (String, &Origin)> = BTreeMap::new();
    for (b, o) in &catalog.bundles {
        let obj = bundle_obj(&b.package, &b.name);
        if b.package.is_empty() || !packages.contains_key(b.package.as_str()) {
            f.add(obj.clone(), "bundle-package", format!("unknown package {:?}", b.package), Some(o));
        }
        let pkg_props: Vec<_> = b.properties.iter().filter(|p| p.type_ == "olm.package").collect();
        let mut version = String::new();
        match pkg_props.as_slice() {
            [p] => {
                if p.value["packageName"] != b.package.as_str() {
                    f.add(
                        obj.clone(),
                        "package-property",
                        format!(
                            "olm.package property names {} but the bundle is in {:?}",
                            p.value["packageName"], b.package
                        ),
                        Some(o),
                    );
                }
                version = p.value["version"].as_str().unwrap_or_default().to_string();
                if semver::Version::parse(&version).is_err() {
                    f.add(obj.clone(), "version", format!("version {version:?} is not strict semver"), Some(o));
                }
            }
            _ => f.add(
                obj.clone(),
                "package-property",
                format!("must have exactly one olm.package property, found {}", pkg_props.len()),
                Some(o),
            ),
        }
        if b.image.is_empty() && !b.properties.iter().any(|p| p.type_ == "olm.bundle.object") {
            f.add(
                obj.clone(),
                "image",
                "bundle image must be set (or its manifests inlined as olm.bundle.object properties)",
                Some(o),
            );
        }
        if !pull_spec_ok(&b.image) {
            f.add(obj.clone(), "image", format!("image {:?} is not a valid pull spec", b.image), Some(o));
        }
        for r in b.related_images.iter().filter(|r| !pull_spec_ok(&r.image)) {
            f.add(
                obj.clone(),
                "related-image",
                format!("related image {:?} is not a valid pull spec", r.image),
                Some(o),
            );
        }
        if bundles.insert((b.package.as_str(), b.name.as_str()), (version, o)).is_some() {
            f.add(obj.clone(), "bundle-unique", "duplicate bundle name in the package", Some(o));
        }
        let in_channel =
            catalog.channels.iter().any(|(c, _)| c.package == b.package && c.entries.iter().any(|e| e.name == b.name));
        if !in_channel {
            f.add(obj, "bundle-in-channel", "not found in any channel entries", Some(o));
        }
    }
    for (c, o) in &catalog.channels {
        for e in c.entries.iter().filter(|e| !bundles.contains_key(&(c.package.as_str(), e.name.as_str()))) {
            f.add(
                channel_obj(&c.package, &c.name),
                "entry-bundle",
                format!("no olm.bundle blobs found for entry {:?}", e.name),
                Some(o),
            );
        }
    }

    // Deprecations.
    let mut deprecated: BTreeSet<&str> = BTreeSet::new();
    for (d, o) in &catalog.deprecations {
        let pkg = d["package"].as_str().unwrap_or_default();
        let obj = format!("olm.deprecations (package {pkg:?})");
        if !packages.contains_key(pkg) {
            f.add(obj.clone(), "deprecation-package", format!("unknown package {pkg:?}"), Some(o));
        }
        if !deprecated.insert(pkg) {
            f.add(obj.clone(), "deprecation-unique", "more than one olm.deprecations for the package", Some(o));
        }
        let mut refs = BTreeSet::new();
        for entry in d["entries"].as_array().into_iter().flatten() {
            let schema = entry["reference"]["schema"].as_str().unwrap_or_default();
            let name = entry["reference"]["name"].as_str().unwrap_or_default();
            if entry["message"].as_str().unwrap_or_default().is_empty() {
                f.add(
                    obj.clone(),
                    "deprecation-message",
                    format!("reference {schema} {name:?} has an empty message"),
                    Some(o),
                );
            }
            if !refs.insert((schema, name)) {
                f.add(obj.clone(), "deprecation-reference", format!("duplicate reference {schema} {name:?}"), Some(o));
            }
            let exists = match schema {
                "olm.package" => name.is_empty(),
                "olm.channel" => channels.contains_key(&(pkg, name)),
                "olm.bundle" => bundles.contains_key(&(pkg, name)),
                _ => false,
            };
            if !exists {
                f.add(
                    obj.clone(),
                    "deprecation-reference",
                    format!("reference {schema:?} {name:?} does not name an object of the package"),
                    Some(o),
                );
            }
        }
    }

    // Model checks, per package.
    for (name, p) in &packages {
        let origin = catalog.packages.iter().find(|(q, _)| q.name == *name).map(|(_, o)| o);
        let pkg_channels: Vec<&&super::fbc::Channel> =
            channels.iter().filter(|((pk, _), _)| pk == name).map(|(_, c)| c).collect();
        if p.default_channel.is_empty() {
            f.add(package_obj(name), "default-channel", "default channel must be set", origin);
        } else if !channels.contains_key(&(*name, p.default_channel.as_str())) {
            f.add(
                package_obj(name),
                "default-channel",
                format!(
                    "default channel {:?} does not exist (channel must contain at least one bundle)",
                    p.default_channel
                ),
                origin,
            );
        }
        if pkg_channels.is_empty() {
            f.add(package_obj(name), "channels", "package must contain at least one channel", origin);
        }
        let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for ((pk, bname), (version, _)) in &bundles {
            if pk == name && !version.is_empty() {
                versions.entry(version.as_str()).or_default().push(bname);
            }
        }
        for (version, names) in versions.iter().filter(|(_, n)| n.len() > 1) {
            f.add(
                package_obj(name),
                "unique-versions",
                format!("duplicate versions found in bundles: {version}: {}", names.join(", ")),
                origin,
            );
        }
        for c in pkg_channels {
            replaces_chain(
                c,
                &mut f,
                catalog.channels.iter().find(|(x, _)| x.package == c.package && x.name == c.name).map(|(_, o)| o),
            );
        }
    }
    f.0
}

/// One head, no cycle along replaces, nothing stranded (olm.md §3.3).
fn replaces_chain(c: &super::fbc::Channel, f: &mut Findings, origin: Option<&Origin>) {
    let obj = channel_obj(&c.package, &c.name);
    if c.entries.is_empty() {
        f.add(obj, "channel-bundles", "channel must contain at least one bundle", origin);
        return;
    }
    let by_name: BTreeMap<&str, &super::fbc::ChannelEntry> = c.entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let mut referenced: BTreeSet<&str> = BTreeSet::new();
    let mut skipped: BTreeSet<&str> = BTreeSet::new();
    for e in &c.entries {
        if !e.replaces.is_empty() {
            referenced.insert(&e.replaces);
        }
        for s in &e.skips {
            referenced.insert(s);
            skipped.insert(s);
        }
    }
    let heads: Vec<&str> = c.entries.iter().map(|e| e.name.as_str()).filter(|n| !referenced.contains(n)).collect();
    let head = match heads.as_slice() {
        [h] => *h,
        [] => {
            f.add(obj, "one-head", "no channel head found in graph", origin);
            return;
        }
        many => {
            f.add(obj, "one-head", format!("multiple channel heads found in graph: {}", many.join(", ")), origin);
            return;
        }
    };
    let mut chain: BTreeSet<&str> = BTreeSet::new();
    let mut current = head;
    loop {
        if !chain.insert(current) {
            f.add(
                obj.clone(),
                "no-cycle",
                format!("detected cycle in replaces chain of upgrade graph at {current:?}"),
                origin,
            );
            return;
        }
        let Some(entry) = by_name.get(current) else { break };
        let next = entry.replaces.as_str();
        if next.is_empty() || skipped.contains(next) || !by_name.contains_key(next) {
            break;
        }
        current = next;
    }
    let stranded: Vec<&str> =
        c.entries.iter().map(|e| e.name.as_str()).filter(|n| !chain.contains(n) && !skipped.contains(n)).collect();
    if !stranded.is_empty() {
        f.add(
            obj,
            "no-stranded",
            format!("channel contains one or more stranded bundles: {}", stranded.join(", ")),
            origin,
        );
    }
}
