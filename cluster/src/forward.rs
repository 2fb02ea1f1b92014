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

/// A running forwarder; stopped on drop (its connections are closed).
pub struct Forwarder {
    pub listen: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Forwarder {
    /// Forwards `listen` (on the host) to `target` inside the namespace.
    pub fn start(listen: SocketAddr, target: SocketAddr, isolation: Arc<Isolation>) -> std::io::Result<Forwarder> {
        let listener = std::net::TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let listen = listener.local_addr()?;
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name(format!("forward-{}", listen.port())).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        accepted = listener.accept() => {
                            let Ok((outside, _)) = accepted else { continue };
                            let isolation = isolation.clone();
                            tokio::spawn(async move {
                                let _ = relay(outside, target, isolation).await;
                            });
                        }
                    }
                }
            });
            // Dropping the runtime aborts every relay: the connections close.
        })?;
        Ok(Forwarder { listen, stop: Some(stop), thread: Some(thread) })
    }

    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn relay(mut outside: TcpStream, target: SocketAddr, isolation: Arc<Isolation>) -> std::io::Result<()> {
    // A loopback connect inside the namespace takes microseconds: done on the thread
    // that lives there.
    let inside = tokio::task::spawn_blocking(move || isolation.connect(target))
        .await
        .map_err(|_| std::io::Error::other("the connecting task panicked"))??;
    inside.set_nonblocking(true)?;
    let mut inside = TcpStream::from_std(inside)?;
    outside.set_nodelay(true)?;
    inside.set_nodelay(true)?;
    tokio::io::copy_bidirectional(&mut outside, &mut inside).await?;
    Ok(())
}
