//! How the host reaches into the cluster's network namespace: a TCP forwarder listening on
//! the host's 127.0.0.1 that makes each connection's other half inside the namespace (see
//! [`crate::isolation`]), to the same port on the namespace's own 127.0.0.1 (or the node's
//! address). The API server and the registry are each reached this way, at the same
//! `127.0.0.1:PORT` from either side, so a kubeconfig or an image reference means the same
//! on the host and in the cluster.
//!
//! It runs on a thread and runtime of its own, so it outlives any test's runtime.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::isolation::Isolation;

/// How long a connection's other half may take to connect before the connection is closed.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A running forwarder; stopped on drop (its connections are closed).
pub struct Forwarder {
    pub listen: SocketAddr,
    accept: crate::accept::AcceptLoop,
}

impl Forwarder {
    /// Forwards `listen` (on the host) to `target` inside the namespace.
    pub fn start(listen: SocketAddr, target: SocketAddr, isolation: Arc<Isolation>) -> std::io::Result<Forwarder> {
        let listener = std::net::TcpListener::bind(listen)?;
        let listen = listener.local_addr()?;
        let accept =
            crate::accept::AcceptLoop::start(format!("forward-{}", listen.port()), listener, move |outside| {
                let isolation = isolation.clone();
                Some(async move {
                    let _ = relay(outside, target, isolation).await;
                })
            })?;
        Ok(Forwarder { listen, accept })
    }

    pub fn stop(&mut self) {
        self.accept.stop();
    }
}

async fn relay(mut outside: TcpStream, target: SocketAddr, isolation: Arc<Isolation>) -> std::io::Result<()> {
    // Not on the namespace's thread: a connect to an address that no longer answers (a Service's
    // endpoint on a node that is gone) delays only its own connection.
    let mut inside = isolation.connect_async(target, CONNECT_TIMEOUT).await?;
    outside.set_nodelay(true)?;
    inside.set_nodelay(true)?;
    tokio::io::copy_bidirectional(&mut outside, &mut inside).await?;
    Ok(())
}
