//! Registry credentials, in the order Docker and skopeo use: explicit flags/env, then the
//! Docker config file — a per-registry credential helper (`credHelpers`), an inline
//! `auths` entry, then the default credential store (`credsStore`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use base64::Engine;
use oci_client::secrets::RegistryAuth;
use serde_json::Value;

/// Where credentials come from.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
    /// A Docker config file (default `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`).
    pub docker_config: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("credential helper docker-credential-{helper} for {registry}: {message} (fix: install the helper, log in again, or pass --username/--password)")]
    Helper { helper: String, registry: String, message: String },
    #[error("{}: not a valid Docker config file: {message} (fix: repair the JSON or point DOCKER_CONFIG elsewhere)", file.display())]
    Config { file: PathBuf, message: String },
}

fn docker_config_path(creds: &Credentials) -> Option<PathBuf> {
    creds.docker_config.clone().or_else(|| {
        std::env::var_os("DOCKER_CONFIG")
            .map(|d| PathBuf::from(d).join("config.json"))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json")))
    })
}

/// Docker config keys are written as `host`, `https://host`, or `https://host/v1/`.
fn key_matches(key: &str, registry: &str) -> bool {
    let host = key.trim_start_matches("https://").trim_start_matches("http://");
    let host = host.split('/').next().unwrap_or(host);
    host == registry || (registry == "docker.io" && host == "index.docker.io")
}

/// The credentials for `registry` (host[:port]).
pub fn auth_for(registry: &str, creds: &Credentials) -> Result<RegistryAuth, AuthError> {
    if let (Some(u), Some(p)) = (&creds.username, &creds.password) {
        return Ok(RegistryAuth::Basic(u.clone(), p.clone()));
    }
    let Some(path) = docker_config_path(creds) else { return Ok(RegistryAuth::Anonymous) };
    let Ok(bytes) = std::fs::read(&path) else { return Ok(RegistryAuth::Anonymous) };
    let config: Value =
        serde_json::from_slice(&bytes).map_err(|e| AuthError::Config { file: path.clone(), message: e.to_string() })?;

    if let Some(helper) = config["credHelpers"]
        .as_object()
        .and_then(|h| h.iter().find(|(k, _)| key_matches(k, registry)))
        .and_then(|(_, v)| v.as_str())
    {
        return helper_get(helper, registry);
    }
    let inline =
        config["auths"].as_object().and_then(|a| a.iter().find(|(k, _)| key_matches(k, registry))).map(|(_, v)| v);
    if let Some(entry) = inline {
        if let Some((u, p)) = entry["auth"]
            .as_str()
            .and_then(|a| base64::engine::general_purpose::STANDARD.decode(a).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|d| d.split_once(':').map(|(u, p)| (u.to_string(), p.to_string())))
        {
            return Ok(RegistryAuth::Basic(u, p));
        }
        if let Some(token) = entry["identitytoken"].as_str() {
            return Ok(RegistryAuth::Bearer(token.to_string()));
        }
    }
    match config["credsStore"].as_str() {
        Some(store) if !store.is_empty() => match helper_get(store, registry) {
            // A store that has nothing for this registry means anonymous access.
            Err(AuthError::Helper { message, .. }) if message.contains("credentials not found") => {
                Ok(RegistryAuth::Anonymous)
            }
            other => other,
        },
        _ => Ok(RegistryAuth::Anonymous),
    }
}

/// Runs `docker-credential-<helper> get` with the registry on stdin (the credential
/// helper protocol) and reads `{"Username": …, "Secret": …}`.
fn helper_get(helper: &str, registry: &str) -> Result<RegistryAuth, AuthError> {
    let fail = |message: String| AuthError::Helper { helper: helper.into(), registry: registry.into(), message };
    let mut child = Command::new(format!("docker-credential-{helper}"))
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot run it: {e}")))?;
    // A helper may exit without reading stdin (e.g. a locked keychain); its exit status and
    // stderr then say why, so a broken pipe here is not the error to report.
    if let Err(e) = child.stdin.take().expect("piped").write_all(registry.as_bytes()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(fail(e.to_string()));
        }
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        let said =
            String::from_utf8_lossy(&out.stdout).trim().to_string() + String::from_utf8_lossy(&out.stderr).trim();
        return Err(fail(if said.is_empty() { format!("exited with {}", out.status) } else { said }));
    }
    let reply: Value = serde_json::from_slice(&out.stdout).map_err(|e| fail(format!("unreadable reply: {e}")))?;
    let user = reply["Username"].as_str().unwrap_or_default();
    let secret = reply["Secret"].as_str().unwrap_or_default();
    Ok(match user {
        // Helpers report identity tokens with this placeholder user name.
        "<token>" => RegistryAuth::Bearer(secret.to_string()),
        "" if secret.is_empty() => RegistryAuth::Anonymous,
        _ => RegistryAuth::Basic(user.to_string(), secret.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_keys_match_with_or_without_scheme_and_path() {
        assert!(key_matches("https://registry.example.com/v1/", "registry.example.com"));
        assert!(key_matches("registry.example.com:5000", "registry.example.com:5000"));
        assert!(!key_matches("registry.example.com", "registry.example.com:5000"));
        assert!(key_matches("https://index.docker.io/v1/", "docker.io"));
    }
}
