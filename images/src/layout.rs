//! OCI image layout on disk (`oci-layout`, `index.json`, `blobs/sha256/…`), readable by
//! `skopeo inspect oci:DIR:TAG` and `skopeo copy`.

use std::path::Path;

use serde_json::json;

use super::{Image, MANIFEST_MEDIA_TYPE};

/// A file of the layout that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}", path = path.display())]
pub struct LayoutError {
    pub path: std::path::PathBuf,
    pub source: std::io::Error,
}

impl LayoutError {
    fn io(path: &Path, source: std::io::Error) -> LayoutError {
        LayoutError { path: path.to_path_buf(), source }
    }
}

/// Writes `image` tagged `tag` as an OCI layout at `dir` (replacing a previous layout
/// there atomically: built beside it, then renamed).
pub fn write(image: &Image, dir: &Path, tag: &str) -> Result<(), LayoutError> {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| LayoutError::io(parent, e))?;
    let tmp = parent.join(format!(
        ".{}.tmp-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("layout"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    let blobs = tmp.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).map_err(|e| LayoutError::io(&blobs, e))?;
    for blob in image.layers.iter().chain([&image.config, &image.manifest]) {
        let file = blobs.join(blob.digest.trim_start_matches("sha256:"));
        std::fs::write(&file, &blob.data).map_err(|e| LayoutError::io(&file, e))?;
    }
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MANIFEST_MEDIA_TYPE,
            "digest": image.manifest.digest,
            "size": image.manifest.data.len(),
            "annotations": {"org.opencontainers.image.ref.name": tag},
        }],
    });
    let write = |name: &str, bytes: Vec<u8>| {
        let f = tmp.join(name);
        std::fs::write(&f, bytes).map_err(|e| LayoutError::io(&f, e))
    };
    write("oci-layout", serde_json::to_vec(&json!({"imageLayoutVersion": "1.0.0"})).expect("JSON"))?;
    write("index.json", serde_json::to_vec(&index).expect("JSON"))?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| LayoutError::io(dir, e))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| LayoutError::io(dir, e))?;
    Ok(())
}
