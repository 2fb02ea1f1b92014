//! Pushing an [`Image`]: blobs first, the manifest last (so a failure never leaves a tag
//! pointing at missing content), and a tag that already names different content is
//! refused unless forced.

use super::registry::{connect, with_retries, Access, RegistryError};
use super::Image;

#[derive(Debug, Clone, Default)]
pub struct PushOptions {
    pub access: Access,
    /// Overwrite a tag that names different content.
    pub force: bool,
    /// Print nothing (a CLI prints each blob and the manifest on stderr).
    pub quiet: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{reference} already exists with digest {existing}, and this image is {new}: a published tag never changes; push a new version, or pass --force if you are sure")]
    TagExists { reference: String, existing: String, new: String },
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// The outcome of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The tag now names the image (digest).
    Uploaded(String),
    /// The tag already named exactly this image.
    AlreadyThere(String),
}

pub async fn push(image: &Image, reference: &str, opts: &PushOptions) -> Result<Pushed, PushError> {
    let conn = connect(reference, &opts.access)?;
    match conn.current_digest().await? {
        Some(existing) if existing == image.manifest.digest => return Ok(Pushed::AlreadyThere(existing)),
        Some(existing) if !opts.force => {
            return Err(PushError::TagExists {
                reference: reference.into(),
                existing,
                new: image.manifest.digest.clone(),
            })
        }
        _ => {}
    }
    for blob in image.layers.iter().chain([&image.config]) {
        if !opts.quiet {
            eprintln!("  blob {} ({} bytes, {})", blob.digest, blob.data.len(), blob.media_type);
        }
        with_retries(|| conn.client.push_blob(&conn.reference, blob.data.clone(), &blob.digest))
            .await
            .map_err(|e| conn.error("pushing a blob", e))?;
    }
    let content_type: http::HeaderValue = super::MANIFEST_MEDIA_TYPE.parse().expect("valid header value");
    if !opts.quiet {
        eprintln!("  manifest {} -> {reference}", image.manifest.digest);
    }
    with_retries(|| conn.client.push_manifest_raw(&conn.reference, image.manifest.data.clone(), content_type.clone()))
        .await
        .map_err(|e| conn.error("pushing the manifest", e))?;
    Ok(Pushed::Uploaded(image.manifest.digest.clone()))
}
