//! Kubeconfig files for the cluster's identities.

use std::path::Path;

use base64::Engine;
use serde_json::json;

use crate::pki::CertPem;
use crate::Error;

/// How a kubeconfig's user authenticates.
pub enum Credentials<'a> {
    /// A client certificate (the admin, the control-plane components).
    Certificate(&'a CertPem),
    /// A bearer token (a ServiceAccount's).
    Token(&'a str),
}

/// Writes a kubeconfig for `server` (trusting `ca_pem` when the server is HTTPS).
pub fn write(path: &Path, server: &str, ca_pem: &str, credentials: Credentials, namespace: &str) -> Result<(), Error> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut cluster = json!({"server": server});
    if server.starts_with("https://") {
        cluster["certificate-authority-data"] = json!(b64(ca_pem));
    }
    let user = match credentials {
        Credentials::Certificate(c) => {
            json!({"client-certificate-data": b64(&c.cert), "client-key-data": b64(&c.key)})
        }
        Credentials::Token(t) => json!({"token": t}),
    };
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user", "namespace": namespace}}],
        "current-context": "local",
    });
    let text = serde_yaml::to_string(&config).expect("a JSON value serialises to YAML");
    std::fs::write(path, text).map_err(|e| Error::io(path, e))?;
    // Credentials: readable by the owner only, as kubectl writes them.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| Error::io(path, e))
}

/// A copy of the kubeconfig at `base` (the cluster of its current context) that
/// authenticates with a bearer `token`, at `server` instead when given (e.g. a fault proxy).
/// Works for any cluster, not only a local one.
pub fn with_token(base: &Path, token: &str, server: Option<&str>, namespace: &str, out: &Path) -> Result<(), Error> {
    let kc = kube::config::Kubeconfig::read_from(base).map_err(|e| Error::Kube(kube::Error::InferKubeconfig(e)))?;
    let context_name = kc.current_context.clone().unwrap_or_default();
    let context = kc.contexts.iter().find(|c| c.name == context_name).and_then(|c| c.context.clone());
    let cluster_name = context.map(|c| c.cluster).unwrap_or_default();
    let cluster =
        kc.clusters.iter().find(|c| c.name == cluster_name).and_then(|c| c.cluster.clone()).ok_or_else(|| {
            Error::Io { path: base.to_path_buf(), source: std::io::Error::other("no cluster for the current context") }
        })?;
    let ca = match (&cluster.certificate_authority_data, &cluster.certificate_authority) {
        (Some(data), _) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| Error::io(base, std::io::Error::other(e)))?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
        (None, Some(file)) => std::fs::read_to_string(file).map_err(|e| Error::io(Path::new(file), e))?,
        (None, None) => String::new(),
    };
    let server = server.map(str::to_string).or(cluster.server).unwrap_or_default();
    write(out, &server, &ca, Credentials::Token(token), namespace)
}

/// A bound token of the ServiceAccount `namespace/name` (TokenRequest API), valid 24 h.
pub async fn service_account_token(client: &kube::Client, namespace: &str, name: &str) -> Result<String, Error> {
    service_account_token_valid_for(client, namespace, name, 86_400).await
}

/// A bound token of the ServiceAccount `namespace/name`, valid `seconds` (the API server
/// caps it at its `--service-account-max-token-expiration`, unset here).
pub async fn service_account_token_valid_for(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    seconds: i64,
) -> Result<String, Error> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec { expiration_seconds: Some(seconds), ..Default::default() },
        ..Default::default()
    };
    let token = accounts.create_token_request(name, &Default::default(), &request).await?;
    Ok(token.status.map(|s| s.token).unwrap_or_default())
}
