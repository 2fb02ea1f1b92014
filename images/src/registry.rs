//! One registry conversation through oci-client: reference parsing, plain HTTP for
//! loopback (or `--insecure`), credentials, retries, and pulling an image (manifest,
//! config, layers) for base images and bundle facts.

use std::time::Duration;

use bytes::Bytes;
use oci_client::client::{linux_amd64_resolver, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::Value;

use super::auth::{auth_for, AuthError, Credentials};
use super::Blob;

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Plain HTTP (always used for loopback registries).
    pub insecure: bool,
    pub credentials: Credentials,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{reference}: not an image reference ({message}); fix: e.g. registry.example.com/team/bundle:v1.2.3")]
    Reference { reference: String, message: String },
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("{reference}: {what}: {source}")]
    Registry { reference: String, what: String, source: OciDistributionError },
    #[error("{reference}: {message}")]
    Content { reference: String, message: String },
}

/// A client bound to one image reference.
pub struct Connection {
    pub client: Client,
    pub reference: Reference,
    pub auth: RegistryAuth,
    /// The reference as the user wrote it, for messages.
    pub name: String,
}

fn is_loopback(registry: &str) -> bool {
    let host = registry.rsplit_once(':').map(|(h, _)| h).unwrap_or(registry);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

/// Whether a reference names a tag or a digest (`repo:tag`, `repo@sha256:…`), not only a
/// repository; a `:` in the registry host (`host:5000/repo`) does not count.
pub fn has_tag_or_digest(reference: &str) -> bool {
    reference.contains('@') || reference.rsplit('/').next().is_some_and(|last| last.contains(':'))
}

pub fn parse_reference(reference: &str) -> Result<Reference, RegistryError> {
    reference.parse().map_err(|e: oci_client::ParseError| RegistryError::Reference {
        reference: reference.into(),
        message: e.to_string(),
    })
}

pub fn connect(reference: &str, access: &Access) -> Result<Connection, RegistryError> {
    Pool::default().connect(reference, access)
}

/// One client (connection pool, TLS roots, tokens) and one credential lookup per registry,
/// shared by every reference to it: building a client loads the TLS roots, which costs
/// more than a manifest request over loopback.
#[derive(Default)]
pub struct Pool {
    clients: std::sync::Mutex<std::collections::HashMap<String, (Client, RegistryAuth)>>,
}

impl Pool {
    pub fn connect(&self, reference: &str, access: &Access) -> Result<Connection, RegistryError> {
        let parsed = parse_reference(reference)?;
        let registry = parsed.resolve_registry().to_string();
        let mut clients = self.clients.lock().expect("pool lock");
        let (client, auth) = match clients.get(&registry) {
            Some(found) => found.clone(),
            None => {
                let protocol = if access.insecure || is_loopback(&registry) {
                    ClientProtocol::Http
                } else {
                    ClientProtocol::Https
                };
                let client = Client::new(ClientConfig {
                    protocol,
                    // Every image this tool builds is linux/amd64; pick that from a multi-arch base.
                    platform_resolver: Some(Box::new(linux_amd64_resolver)),
                    read_timeout: Some(Duration::from_secs(60)),
                    connect_timeout: Some(Duration::from_secs(10)),
                    ..Default::default()
                });
                let auth = auth_for(&registry, &access.credentials)?;
                clients.insert(registry, (client.clone(), auth.clone()));
                (client, auth)
            }
        };
        Ok(Connection { client, reference: parsed, auth, name: reference.into() })
    }
}

impl Connection {
    pub fn error(&self, what: &str, source: OciDistributionError) -> RegistryError {
        RegistryError::Registry { reference: self.name.clone(), what: what.into(), source }
    }

    /// The digest the reference names now, or None when the tag does not exist.
    pub async fn current_digest(&self) -> Result<Option<String>, RegistryError> {
        match with_retries(|| self.client.fetch_manifest_digest(&self.reference, &self.auth)).await {
            Ok(d) => Ok(Some(d)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(self.error("resolving the tag", e)),
        }
    }

    /// Pulls the linux/amd64 image: manifest, config and every layer, each checked
    /// against its digest by oci-client.
    pub async fn pull(&self) -> Result<PulledImage, RegistryError> {
        let (manifest, digest) = with_retries(|| self.client.pull_image_manifest(&self.reference, &self.auth))
            .await
            .map_err(|e| self.error("pulling the manifest", e))?;
        let config_bytes = self.blob(&manifest.config).await?;
        let config: Value = serde_json::from_slice(&config_bytes).map_err(|e| RegistryError::Content {
            reference: self.name.clone(),
            message: format!("image config is not JSON: {e}"),
        })?;
        let mut layers = Vec::with_capacity(manifest.layers.len());
        for layer in &manifest.layers {
            let data = self.blob(layer).await?;
            layers.push(Blob {
                media_type: oci_layer_media_type(&layer.media_type),
                digest: layer.digest.clone(),
                data,
            });
        }
        Ok(PulledImage { digest, config, layers })
    }

    /// One blob; oci-client hashes it while streaming and fails on a digest mismatch.
    async fn blob(&self, descriptor: &OciDescriptor) -> Result<Bytes, RegistryError> {
        let data = with_retries(|| async {
            let mut out = Vec::with_capacity(descriptor.size.max(0) as usize);
            self.client.pull_blob(&self.reference, descriptor, &mut out).await.map(|_| out)
        })
        .await
        .map_err(|e| self.error("pulling a blob", e))?;
        Ok(Bytes::from(data))
    }
}

/// A pulled image.
#[derive(Debug, Clone)]
pub struct PulledImage {
    /// The digest of the image manifest.
    pub digest: String,
    pub config: Value,
    pub layers: Vec<Blob>,
}

/// Docker's gzip layer type is byte-compatible with OCI's; the images we write are OCI.
fn oci_layer_media_type(media_type: &str) -> String {
    match media_type {
        "application/vnd.docker.image.rootfs.diff.tar.gzip" => super::LAYER_MEDIA_TYPE.into(),
        "application/vnd.docker.image.rootfs.diff.tar" => "application/vnd.oci.image.layer.v1.tar".into(),
        other => other.into(),
    }
}

pub fn absent(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(e.code, OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound)
        }),
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

/// Up to four attempts with doubling delays, for 5xx answers, timeouts and refused
/// connections only.
pub async fn with_retries<T, F, Fut>(mut f: F) -> Result<T, OciDistributionError>
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
