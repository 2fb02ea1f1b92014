//! Where a template's bundle images are read from: a local bundle directory when the
//! image's tag names a version under `--bundles-dir` (`…:vX.Y.Z` → `DIR/X.Y.Z`), else the
//! registry. Pulled bundle content is cached by manifest digest, so a warm render costs
//! one manifest HEAD per tag (none for digest references).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use futures::{StreamExt, TryStreamExt};

use super::bundle::BundleContent;
use crate::bundle::annotations;
use crate::image::registry::{Access, Pool, RegistryError};

#[derive(Default)]
pub struct Sources {
    pub bundles_dir: Option<PathBuf>,
    pub access: Access,
    /// Default: `$XDG_CACHE_HOME/bundle-tool/bundles` or `~/.cache/bundle-tool/bundles`.
    pub cache_dir: Option<PathBuf>,
    pub pool: Pool,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("{0}")]
    Content(String),
}

/// Where one image's content came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    Directory(PathBuf),
    /// Pulled (false) or from the cache (true), with the manifest digest.
    Registry {
        digest: String,
        cached: bool,
    },
}

impl Sources {
    fn cache_dir(&self) -> Option<PathBuf> {
        self.cache_dir.clone().or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|c| c.join("bundle-tool/bundles"))
        })
    }

    /// The local bundle directory an image maps to, if any.
    pub fn local_dir(&self, image: &str) -> Option<PathBuf> {
        let dir = self.bundles_dir.as_ref()?;
        let (_, tag) = image.rsplit_once(':')?;
        if tag.contains('/') || image.contains('@') {
            return None;
        }
        let version = semver::Version::parse(tag.trim_start_matches('v')).ok()?;
        let candidate = dir.join(version.to_string());
        candidate.join("manifests").is_dir().then_some(candidate)
    }

    /// Content of every image (at most 16 registry conversations at once), in input order.
    pub async fn load_all(&self, images: &[String]) -> Result<Vec<(BundleContent, Origin)>, SourceError> {
        futures::stream::iter(images.iter().map(|image| self.load(image))).buffered(16).try_collect().await
    }

    pub async fn load(&self, image: &str) -> Result<(BundleContent, Origin), SourceError> {
        if let Some(dir) = self.local_dir(image) {
            let files = crate::bundle::generate::read_tree(&dir).map_err(|e| SourceError::Content(e.to_string()))?;
            let content = BundleContent::annotations_from_files(files, &dir.display().to_string())
                .map_err(|e| SourceError::Content(e.to_string()))?;
            return Ok((content, Origin::Directory(dir)));
        }
        let conn = self.pool.connect(image, &self.access)?;
        let digest = match conn.reference.digest() {
            Some(d) => d.to_string(),
            None => conn.current_digest().await?.ok_or_else(|| {
                SourceError::Content(format!(
                    "{image}: no such image in the registry (fix: push it with `make bundle-build-push`, or render from --bundles-dir)"
                ))
            })?,
        };
        let cache_file = self.cache_dir().map(|d| d.join(format!("{}.json", digest.replace(':', "-"))));
        if let Some(content) = cache_file.as_deref().and_then(read_cache) {
            return Ok((content, Origin::Registry { digest, cached: true }));
        }
        let pulled = conn.pull().await?;
        let labels = annotations::string_map(&pulled.config["config"]["Labels"]);
        if !labels.contains_key(annotations::PACKAGE) {
            return Err(SourceError::Content(format!(
                "{image}: not a bundle image: its config has no label {} (opm would not render it either; fix: build it with `bundle-tool bundle build`)",
                annotations::PACKAGE
            )));
        }
        let mut files = BTreeMap::new();
        for layer in &pulled.layers {
            unpack(&layer.data, &layer.media_type, &mut files)
                .map_err(|e| SourceError::Content(format!("{image}: layer {}: {e}", layer.digest)))?;
        }
        // Like opm: the label says it is a bundle; the unpacked annotations.yaml says the rest.
        let content = if files.contains_key("metadata/annotations.yaml") {
            BundleContent::annotations_from_files(files, image).map_err(|e| SourceError::Content(e.to_string()))?
        } else {
            BundleContent { annotations: labels, files }
        };
        if let Some(file) = &cache_file {
            write_cache(file, &content);
        }
        Ok((content, Origin::Registry { digest: pulled.digest, cached: false }))
    }
}

fn read_cache(file: &Path) -> Option<BundleContent> {
    serde_json::from_slice(&std::fs::read(file).ok()?).ok()
}

/// Best effort: a cache that cannot be written only costs speed.
fn write_cache(file: &Path, content: &BundleContent) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = file.with_extension(format!("tmp-{}", std::process::id()));
    if std::fs::write(&tmp, serde_json::to_vec(content).expect("JSON")).is_ok() {
        let _ = std::fs::rename(&tmp, file);
    }
}

/// Adds the layer's regular files under `manifests/` and `metadata/` to `files` (later
/// layers win), as opm's unpacker sees them.
fn unpack(data: &[u8], media_type: &str, files: &mut BTreeMap<String, String>) -> std::io::Result<()> {
    let reader: Box<dyn Read> =
        if media_type.ends_with("gzip") { Box::new(flate2::read::GzDecoder::new(data)) } else { Box::new(data) };
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path()?.to_string_lossy().trim_start_matches("./").trim_start_matches('/').to_string();
        if !(path.starts_with("manifests/") || path.starts_with("metadata/")) {
            continue;
        }
        let mut text = String::new();
        entry.read_to_string(&mut text)?;
        files.insert(path, text);
    }
    Ok(())
}
