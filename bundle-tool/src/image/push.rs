//! Pushing an [`Image`] with oci-client: blobs first, the manifest last (so a failure never
//! leaves a tag pointing at missing content), retries on 5xx and timeouts, and a tag that
//! already names different content is refused unless forced.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::Image;

#[derive(Debug, Clone, Default)]
pub struct PushOptions {
    /// Plain HTTP (always used for loopback registries).
    pub insecure: bool,
    /// Overwrite a tag that names different content.
    pub force: bool,
    pub username: Option<String>,
    pub password: Option<String>,
    /// A Docker config file (default `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`).
    pub docker_config: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{reference}: not an image reference ({message}); fix: e.g. registry.example.com/team/bundle:v1.2.3")]
    Reference { reference: String, message: String },
    #[error("{reference} already exists with digest {existing}, and this image is {new}: a published tag never changes; push a new version, or pass --force if you are sure")]
    TagExists { reference: String, existing: String, new: String },
    #[error("{reference}: {what}: {source}")]
    Registry { reference: String, what: String, source: OciDistributionError },
}

/// The outcome of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The tag now names the image (digest).
    Uploaded(String),
    /// The tag already named exactly this image.
    AlreadyThere(String),
}

fn is_loopback(registry: &str) -> bool {
    let host = registry.rsplit_once(':').map(|(h, _)| h).unwrap_or(registry);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

fn absent(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .any(|e| matches!(e.code, OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound)),
        _ => false,
    }
}

fn retryable(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ServerError { code, .. } => *code >= 500,
        OciDistributionError::RequestError(r) => r.is_timeout() || r.is_connect(),
        _ => false,
    }
}

/// Credentials: flags/env first, then the Docker config's `auths` entry for the registry.
pub fn auth_for(registry: &str, opts: &PushOptions) -> RegistryAuth {
    if let (Some(u), Some(p)) = (&opts.username, &opts.password) {
        return RegistryAuth::Basic(u.clone(), p.clone());
    }
    let path = opts.docker_config.clone().or_else(|| {
        std::env::var_os("DOCKER_CONFIG")
            .map(|d| PathBuf::from(d).join("config.json"))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json")))
    });
    let config: Option<serde_json::Value> = path.and_then(|p| std::fs::read(p).ok()).and_then(|b| serde_json::from_slice(&b).ok());
    let entry = config.as_ref().and_then(|c| {
        let auths = c["auths"].as_object()?;
        auths.iter().find(|(k, _)| k.trim_start_matches("https://").trim_start_matches("http://").trim_end_matches('/') == registry).map(|(_, v)| v.clone())
    });
    let decoded = entry
        .and_then(|e| e["auth"].as_str().map(String::from))
        .and_then(|a| base64::engine::general_purpose::STANDARD.decode(a).ok())
        .and_then(|b| String::from_utf8(b).ok());
    match decoded.as_deref().and_then(|d| d.split_once(':')) {
        Some((u, p)) => RegistryAuth::Basic(u.into(), p.into()),
        None => RegistryAuth::Anonymous,
    }
}

async fn with_retries<T, F, Fut>(mut f: F) -> Result<T, OciDistributionError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, OciDistributionError>>,
{
    let mut delay = Duration::from_millis(500);
    let mut attempt = 1;
    loop {
        match f().await {
            Err(e) if retryable(&e) && attempt < 4 => {
                eprintln!("  retrying after error (attempt {attempt}): {e}");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

pub async fn push(image: &Image, reference: &str, opts: &PushOptions) -> Result<Pushed, PushError> {
    let parsed: Reference = reference.parse().map_err(|e: oci_client::ParseError| PushError::Reference { reference: reference.into(), message: e.to_string() })?;
    let registry = parsed.resolve_registry().to_string();
    let protocol = if opts.insecure || is_loopback(&registry) { ClientProtocol::Http } else { ClientProtocol::Https };
    let client = Client::new(ClientConfig { protocol, ..Default::default() });
    let auth = auth_for(&registry, opts);
    let registry_error = |what: &str, source| PushError::Registry { reference: reference.into(), what: what.into(), source };

    match client.fetch_manifest_digest(&parsed, &auth).await {
        Ok(existing) if existing == image.manifest.digest => return Ok(Pushed::AlreadyThere(existing)),
        Ok(existing) if !opts.force => return Err(PushError::TagExists { reference: reference.into(), existing, new: image.manifest.digest.clone() }),
        Ok(_) => {}
        Err(e) if absent(&e) => {}
        Err(e) => return Err(registry_error("checking the existing tag", e)),
    }
    for blob in image.layers.iter().chain([&image.config]) {
        eprintln!("  blob {} ({} bytes, {})", blob.digest, blob.data.len(), blob.media_type);
        with_retries(|| client.push_blob(&parsed, blob.data.clone(), &blob.digest)).await.map_err(|e| registry_error("pushing a blob", e))?;
    }
    let content_type: http::HeaderValue = super::MANIFEST_MEDIA_TYPE.parse().expect("valid header value");
    eprintln!("  manifest {} -> {reference}", image.manifest.digest);
    with_retries(|| client.push_manifest_raw(&parsed, image.manifest.data.clone(), content_type.clone())).await.map_err(|e| registry_error("pushing the manifest", e))?;
    Ok(Pushed::Uploaded(image.manifest.digest.clone()))
}
