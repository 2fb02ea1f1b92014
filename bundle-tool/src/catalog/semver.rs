//! The semver template's channels, edges and default channel, computed from versions
//! only, as current opm (v1.61+, "edge-scoped") does (olm.md §4.3–§4.6).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use semver::Version;

use super::fbc::{Channel, ChannelEntry, CHANNEL};
use super::template::{Archetype, ChannelKind, SemverTemplate};

/// What the algorithm needs of a rendered bundle.
#[derive(Debug, Clone)]
pub struct BundleFacts {
    pub name: String,
    pub package: String,
    /// `olm.package` version, as written in the CSV.
    pub version: String,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SemverError {
    #[error("render: no bundles specified or no bundles could be rendered")]
    NoBundles,
    #[error("supplied bundle image name {0:?} not found in rendered bundle images")]
    NotRendered(String),
    #[error("bundle {bundle:?} has invalid version {version:?}: {message} (fix: the CSV's spec.version must be strict semver X.Y.Z[-pre][+build])")]
    InvalidVersion { bundle: String, version: String, message: String },
    #[error("bundle {bundle:?} of package {its:?} does not belong to this package: {package:?}")]
    OtherPackage { bundle: String, its: String, package: String },
    #[error("{archetype}: duplicate bundle name {name:?}")]
    Duplicate { archetype: &'static str, name: String },
    #[error("{archetype}: encountered bundle versions which differ only by build metadata, which cannot be ordered: bundle version {a:?} cannot be compared to {b:?}")]
    Unorderable { archetype: &'static str, a: String, b: String },
}

/// The generated graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub package: String,
    pub default_channel: String,
    /// Sorted by name.
    pub channels: Vec<Channel>,
}

#[derive(Debug, Clone)]
struct Member {
    name: String,
    version: Version,
}

fn without_build(v: &Version) -> Version {
    Version { build: semver::BuildMetadata::EMPTY, ..v.clone() }
}

/// Semver precedence (build metadata ignored).
fn precedence(a: &Version, b: &Version) -> Ordering {
    without_build(a).cmp(&without_build(b))
}

fn channel_name(archetype: Archetype, kind: ChannelKind, v: &Version) -> String {
    match kind {
        ChannelKind::Major => format!("{}-v{}", archetype.as_str(), v.major),
        ChannelKind::Minor => format!("{}-v{}.{}", archetype.as_str(), v.major, v.minor),
    }
}

/// A default-channel candidate, ranked archetype, then version, then kind matching the
/// preference, then minor over major.
#[derive(Debug, Clone)]
struct HighWater {
    archetype: Archetype,
    version: Version,
    kind: Option<ChannelKind>,
    name: String,
}

fn outranks(new: &HighWater, old: &HighWater, preference: ChannelKind) -> bool {
    // opm: the preferred kind first, then minor over major over none.
    let rank = |k: Option<ChannelKind>| match k {
        Some(k) if k == preference => 3,
        Some(ChannelKind::Minor) => 2,
        Some(ChannelKind::Major) => 1,
        None => 0,
    };
    new.archetype
        .cmp(&old.archetype)
        .then_with(|| precedence(&new.version, &old.version))
        .then_with(|| rank(new.kind).cmp(&rank(old.kind)))
        == Ordering::Greater
}

/// Builds the channels for `template` given each image's rendered facts.
pub fn generate(template: &SemverTemplate, facts: &BTreeMap<String, BundleFacts>) -> Result<Graph, SemverError> {
    let mut package: Option<String> = None;
    // Per archetype: members sorted by version.
    let mut lists: Vec<(Archetype, Vec<Member>)> = Vec::new();
    for (archetype, images) in &template.bundles {
        let mut members: Vec<Member> = Vec::new();
        for image in images {
            let f = facts.get(image).ok_or_else(|| SemverError::NotRendered(image.clone()))?;
            let version = Version::parse(&f.version).map_err(|e| SemverError::InvalidVersion {
                bundle: f.name.clone(),
                version: f.version.clone(),
                message: e.to_string(),
            })?;
            match &package {
                None => package = Some(f.package.clone()),
                Some(p) if *p != f.package => {
                    return Err(SemverError::OtherPackage {
                        bundle: f.name.clone(),
                        its: f.package.clone(),
                        package: p.clone(),
                    })
                }
                Some(_) => {}
            }
            if members.iter().any(|m| m.name == f.name) {
                return Err(SemverError::Duplicate { archetype: archetype.as_str(), name: f.name.clone() });
            }
            if let Some(other) = members.iter().find(|m| precedence(&m.version, &version) == Ordering::Equal) {
                return Err(SemverError::Unorderable {
                    archetype: archetype.as_str(),
                    a: version.to_string(),
                    b: other.version.to_string(),
                });
            }
            members.push(Member { name: f.name.clone(), version });
        }
        members.sort_by(|a, b| precedence(&a.version, &b.version));
        if !members.is_empty() {
            lists.push((*archetype, members));
        }
    }
    let package = package.ok_or(SemverError::NoBundles)?;

    // Channels and membership; the default channel is judged when a channel is created.
    let mut kinds = Vec::new();
    if template.generate_major {
        kinds.push(ChannelKind::Major);
    }
    if template.generate_minor {
        kinds.push(ChannelKind::Minor);
    }
    let mut channels: BTreeMap<String, Vec<ChannelEntry>> = BTreeMap::new();
    let mut entry_channel: BTreeMap<(Archetype, ChannelKind, String), String> = BTreeMap::new();
    let mut high =
        HighWater { archetype: Archetype::Candidate, version: Version::new(0, 0, 0), kind: None, name: String::new() };
    for (archetype, members) in &lists {
        for m in members {
            for kind in &kinds {
                let name = channel_name(*archetype, *kind, &m.version);
                if !channels.contains_key(&name) {
                    let candidate = HighWater {
                        archetype: *archetype,
                        version: m.version.clone(),
                        kind: Some(*kind),
                        name: name.clone(),
                    };
                    if outranks(&candidate, &high, template.preference) {
                        high = candidate;
                    }
                }
                channels.entry(name.clone()).or_default().push(ChannelEntry {
                    name: m.name.clone(),
                    replaces: String::new(),
                    skips: vec![],
                    skip_range: String::new(),
                });
                entry_channel.insert((*archetype, *kind, m.name.clone()), name);
            }
        }
    }

    // Edges, per partition (archetype, kind, major); only each Y-group's maximum links.
    for (archetype, members) in &lists {
        for kind in &kinds {
            let mut majors: BTreeMap<u64, Vec<&Member>> = BTreeMap::new();
            for m in members {
                majors.entry(m.version.major).or_default().push(m);
            }
            for partition in majors.values() {
                let mut previous_y_max: Option<&Member> = None;
                for (i, m) in partition.iter().enumerate() {
                    let last_of_y_group = partition.get(i + 1).is_none_or(|next| next.version.minor != m.version.minor);
                    if !last_of_y_group {
                        continue;
                    }
                    let replaces = previous_y_max.map(|p| p.name.clone()).unwrap_or_default();
                    let mut skips: Vec<String> =
                        partition[..i].iter().map(|p| p.name.clone()).filter(|n| *n != replaces).collect();
                    skips.sort();
                    let channel = &entry_channel[&(*archetype, *kind, m.name.clone())];
                    let entry = channels
                        .get_mut(channel)
                        .and_then(|es| es.iter_mut().find(|e| e.name == m.name))
                        .expect("every member has an entry");
                    entry.replaces = replaces;
                    entry.skips = skips;
                    previous_y_max = Some(m);
                }
            }
        }
    }

    Ok(Graph {
        package: package.clone(),
        default_channel: high.name,
        channels: channels
            .into_iter()
            .map(|(name, entries)| Channel { schema: CHANNEL.into(), name, package: package.clone(), entries })
            .collect(),
    })
}
