//! The server: TLS on a TCP listener, one hyper connection per client serving the
//! [`router`](crate::router), the keys followed from their Secrets, and shutdown on SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use kube::Client;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use crate::keys::KeyStore;
use crate::options::{check_options, ServeOptions, TlsFiles};
use crate::router::router;
use crate::state::{AppState, Shared, Validator};

fn tls_acceptor(files: &TlsFiles) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .with_context(|| format!("--tls-cert {}: cannot read", files.cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("--tls-cert {}: not PEM certificates", files.cert.display()))?;
    anyhow::ensure!(!certs.is_empty(), "--tls-cert {}: no certificate in it", files.cert.display());
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("--tls-key {}: no PEM private key in it", files.key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("--tls-cert and --tls-key do not form a usable pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Runs the server until SIGTERM or Ctrl-C. `config` is the server's own identity: it reads
/// the key Secrets with it and impersonates each key's user.
pub async fn serve(options: ServeOptions, config: kube::Config, validator: Validator) -> anyhow::Result<()> {
    check_options(&options)?;
    let acceptor = options.tls.as_ref().map(tls_acceptor).transpose()?;
    if options.insecure_listen {
        tracing::warn!(
            address = %options.listen,
            "--insecure-listen: serving PLAIN HTTP without TLS; keys cross the wire in clear. For development on loopback only"
        );
    }
    let own = Client::try_from(config.clone()).context("a Kubernetes client for the server's own identity")?;
    let keys = KeyStore::default();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(keys.clone().follow(own, options.keys_namespace.clone(), ready_tx));
    tokio::time::timeout(Duration::from_secs(30), ready_rx)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "could not list the API key Secrets in namespace {} within 30 s (does the server's identity have get/list/watch on secrets there?)",
                options.keys_namespace
            )
        })?
        .ok();
    if keys.is_empty() {
        // Serving anyway: in a pod, exiting would crash-loop, and the backoff would keep the
        // server down for minutes after the first key is made. Keys are followed by a watch.
        tracing::warn!(
            namespace = %options.keys_namespace,
            "no API key yet: every request is refused (401) until one is made with `model-orchestra-operator api-key create --name NAME --namespace TEAM_NAMESPACE --api-namespace {}`",
            options.keys_namespace
        );
    }
    let state = Arc::new(AppState::new(keys.clone(), config, validator, &options));
    tokio::spawn(forget_revoked(state.clone()));
    let app = router(state);
    let listener =
        TcpListener::bind(options.listen).await.with_context(|| format!("listening on {}", options.listen))?;
    let address = listener.local_addr()?;
    tracing::info!(address = %address, tls = acceptor.is_some(), keys = keys.len(), "listening");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => {
                tracing::info!("shutting down");
                return Ok(());
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                Some(acceptor) => match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => serve_connection(tls, app).await,
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                },
                None => serve_connection(stream, app).await,
            }
        });
    }
}

async fn serve_connection<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: I, app: Router) {
    let service = hyper_util::service::TowerToHyperService::new(app);
    let result = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .serve_connection(TokioIo::new(io), service)
        .await;
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection");
    }
}

/// Drops the clients and rate buckets of keys that are gone.
async fn forget_revoked(state: Shared) {
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let names = state.keys.names();
        let users: Vec<String> = names.iter().map(|n| crate::keys::user(n)).collect();
        state.clients.forget_all_but(&users);
        state.cache.retain_users(&users);
        state.limiter.retain(&names);
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
