//! How the server is started: its address, TLS material, limits and caches, and why it
//! will not start with some of them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// TLS material: PEM files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Required unless `insecure_listen`.
    pub tls: Option<TlsFiles>,
    /// Plain HTTP, loopback only, for development.
    pub insecure_listen: bool,
    /// Where the key Secrets are.
    pub keys_namespace: String,
    /// Per key: requests per second on average, and the burst.
    pub rate_per_second: f64,
    pub burst: u32,
    pub max_body_bytes: usize,
    /// For every request but the watch.
    pub request_timeout: Duration,
    /// How long a list made for a key's user is served to its reads (0: every read asks the
    /// API server).
    pub read_cache: Duration,
}

/// Why the server will not start.
pub fn check_options(o: &ServeOptions) -> anyhow::Result<()> {
    match (&o.tls, o.insecure_listen) {
        (Some(_), true) => anyhow::bail!("--insecure-listen and --tls-cert/--tls-key exclude each other"),
        (None, false) => anyhow::bail!(
            "no TLS material: give --tls-cert and --tls-key (PEM files), or --insecure-listen for plain HTTP on loopback during development"
        ),
        (None, true) if !o.listen.ip().is_loopback() => {
            anyhow::bail!("--insecure-listen serves plain HTTP: only on a loopback address (e.g. 127.0.0.1:8443), not {}", o.listen)
        }
        _ => Ok(()),
    }
}
