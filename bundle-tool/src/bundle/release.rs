//! Released bundles (`bundles/releases.yaml`): each release records the commit it was cut
//! from and the SHA-256 of every file. A released bundle is published as it was released —
//! today's validator may find what an older generator wrote (0.1.0 carries an example of an
//! API its shared-CRD bundle does not provide), but a released bundle can no longer be
//! fixed, only superseded; what must hold is that it is byte for byte the release.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::generate::read_tree;
use crate::error::ToolError;

/// The record's file name, beside the bundle directories.
pub const RELEASES_FILE: &str = "releases.yaml";

#[derive(Debug, Deserialize)]
struct Record {
    releases: Vec<Release>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Release {
    pub version: String,
    /// The commit the release was cut from (its operator is rebuilt from it).
    pub commit: String,
    /// SHA-256 (hex) of every file of the bundle, by path inside it.
    pub files: BTreeMap<String, String>,
    /// The shared CRD the release installs (`crds/<version>.yaml`), for a shared-CRD bundle.
    #[serde(default)]
    pub crd: Option<CrdRecord>,
    /// SHA-256 of every file of `dist/<version>/` (its plain manifests, [`super::install`]).
    #[serde(default)]
    pub dist: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CrdRecord {
    /// Relative to the bundles directory.
    pub file: String,
    pub sha256: String,
}

/// Every release `<bundles>/releases.yaml` records (none without the file).
pub fn all(bundles: &Path) -> Result<Vec<Release>, ToolError> {
    let file = bundles.join(RELEASES_FILE);
    let Ok(text) = std::fs::read_to_string(&file) else { return Ok(vec![]) };
    let record: Record = serde_yaml::from_str(&text).map_err(|e| ToolError::Field {
        file: file.clone(),
        field: "releases".into(),
        message: e.to_string(),
        fix: "each release needs version, commit and files".into(),
    })?;
    Ok(record.releases)
}

/// Cuts the release of the bundle in `dir` (`<bundles>/<version>`) from `commit`: writes the
/// shared CRD it installs (`crd`, the CRD of this build) to `<bundles>/crds/<version>.yaml`
/// unless the bundle carries its own, its plain manifests and that CRD to
/// `<dist>/<version>/` (`install.yaml`, `crd.yaml`), and appends its record — every file's
/// SHA-256 — to `<bundles>/releases.yaml`. Refused if the version is recorded already.
pub fn cut(dir: &Path, commit: &str, crd: &serde_json::Value, dist: &Path) -> Result<(), ToolError> {
    let (Some(bundles), Some(version)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str())) else {
        return Err(ToolError::Invalid(format!("{}: not a bundles/<version> directory", dir.display())));
    };
    if commit.len() != 40 || !commit.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ToolError::Field {
            file: "(command line)".into(),
            field: "--commit".into(),
            message: format!("{commit:?} is not a full commit hash"),
            fix: "--commit $(git rev-parse HEAD), with the release's changes committed".into(),
        });
    }
    if record_of(dir)?.is_some() {
        return Err(ToolError::Invalid(format!(
            "{}: {version} is released already ({RELEASES_FILE}); a release never changes (fix: release a new version)",
            dir.display()
        )));
    }
    let files = read_tree(dir)?;
    let mut record = format!("  - version: {version}\n    commit: {commit}\n    files:\n");
    for (path, text) in &files {
        record.push_str(&format!("      {path}: {}\n", hex(&Sha256::digest(text.as_bytes()))));
    }
    let carries_crd = files.keys().any(|p| p == &format!("manifests/{}", super::CRD_FILE));
    let crd_text = serde_yaml::to_string(crd).expect("JSON values serialise as YAML");
    if !carries_crd {
        let relative = format!("{}/{version}.yaml", super::released_crds::RELEASED_CRDS_DIR);
        write(&bundles.join(&relative), &crd_text)?;
        record.push_str(&format!(
            "    crd:\n      file: {relative}\n      sha256: {}\n",
            hex(&Sha256::digest(crd_text.as_bytes()))
        ));
    }
    let out = dist.join(version);
    let install = super::install::manifests_yaml(dir)?;
    record.push_str("    dist:\n");
    for (name, text) in [("crd.yaml", &crd_text), ("install.yaml", &install)] {
        write(&out.join(name), text)?;
        record.push_str(&format!("      {name}: {}\n", hex(&Sha256::digest(text.as_bytes()))));
    }
    let releases = bundles.join(RELEASES_FILE);
    let mut text = std::fs::read_to_string(&releases).unwrap_or_else(|_| "releases:\n".into());
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&record);
    write(&releases, &text)
}

fn write(path: &Path, text: &str) -> Result<(), ToolError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ToolError::io(parent, e))?;
    }
    std::fs::write(path, text).map_err(|e| ToolError::io(path, e))
}

/// The release record of the bundle directory `dir` (`<bundles>/<version>`), if
/// `<bundles>/releases.yaml` records its version.
pub fn record_of(dir: &Path) -> Result<Option<Release>, ToolError> {
    let (Some(bundles), Some(version)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str())) else {
        return Ok(None);
    };
    Ok(all(bundles)?.into_iter().find(|r| r.version == version))
}

/// Checks that `dir` is byte for byte its release; names every file that differs.
pub fn verify(dir: &Path, release: &Release) -> Result<(), ToolError> {
    let actual: BTreeMap<String, String> =
        read_tree(dir)?.into_iter().map(|(path, text)| (path, hex(&Sha256::digest(text.as_bytes())))).collect();
    let mut differences: Vec<String> = Vec::new();
    for (path, sha) in &release.files {
        match actual.get(path) {
            None => differences.push(format!("{path} is missing")),
            Some(a) if a != sha => differences.push(format!("{path} changed")),
            Some(_) => {}
        }
    }
    differences.extend(actual.keys().filter(|p| !release.files.contains_key(*p)).map(|p| format!("{p} was added")));
    if differences.is_empty() {
        return Ok(());
    }
    Err(ToolError::Invalid(format!(
        "{}: released as {} (commit {}), but {}; a released bundle never changes (fix: restore it from git, or release a new version)",
        dir.display(),
        release.version,
        release.commit,
        differences.join(", ")
    )))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(path: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
    }

    #[test]
    fn the_checked_in_release_is_found_and_verifies() {
        let release = record_of(&repo("bundles/0.1.0")).unwrap().expect("0.1.0 is recorded");
        assert_eq!(release.commit.len(), 40);
        verify(&repo("bundles/0.1.0"), &release).unwrap();
    }

    #[test]
    fn a_changed_released_bundle_is_refused_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("bundle-tool-release-{}", std::process::id()));
        let copy = dir.join("0.1.0");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(repo("bundles/releases.yaml"), dir.join(RELEASES_FILE)).unwrap();
        for (path, text) in read_tree(&repo("bundles/0.1.0")).unwrap() {
            let file = copy.join(&path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, if path.ends_with("annotations.yaml") { format!("{text}# edited\n") } else { text })
                .unwrap();
        }
        let release = record_of(&copy).unwrap().unwrap();
        let err = verify(&copy, &release).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).ok();
        assert!(err.contains("metadata/annotations.yaml changed") && err.contains("never changes"), "{err}");
    }

    #[test]
    fn an_unreleased_version_has_no_record() {
        assert!(record_of(&repo("bundles/9.9.9")).unwrap().is_none());
    }
}
