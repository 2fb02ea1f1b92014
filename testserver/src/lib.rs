//! kube-testserver: an in-memory Kubernetes API server on 127.0.0.1 for tests.
//!
//! It implements the part of the API contract an operator and `kubectl` rely on —
//! discovery, get/list/watch with resourceVersions, create/update, server-side apply with
//! managedFields and conflicts, merge and JSON patches, the status subresource, finalizers,
//! garbage collection by ownerReferences, CRDs that add resource types — with fault
//! injection and a request log. See README.md for where it differs from a real server.

pub mod error;
pub mod fields;
pub mod jsonpatch;
pub mod managed;
pub mod resources;
pub mod selector;
pub mod server;
pub mod store;
pub mod table;
pub mod time;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

pub use server::{Faults, RequestRecord};

/// A running server; stopped when dropped.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts on 127.0.0.1 with an ephemeral port, on its own runtime thread.
    pub fn start() -> std::io::Result<TestServer> {
        Self::start_with("127.0.0.1:0".parse().expect("valid address"), Faults::default())
    }

    pub fn start_with(addr: SocketAddr, faults: Faults) -> std::io::Result<TestServer> {
        let std_listener = std::net::TcpListener::bind(addr)?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let shared = Arc::new(server::Shared::new(stopped.clone(), faults));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let serving = shared.clone();
        let thread = std::thread::Builder::new().name("kube-testserver".into()).spawn(move || {
            runtime.block_on(serve(std_listener, serving, stopped));
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        })?;
        Ok(TestServer { addr, shared, stop, thread: Some(thread) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig whose current context points at this server.
    pub fn kubeconfig(&self, namespace: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-testserver\n  cluster:\n    server: {url}\ncontexts:\n- name: kube-testserver\n  context:\n    cluster: kube-testserver\n    namespace: {namespace}\n    user: tester\ncurrent-context: kube-testserver\nusers:\n- name: tester\n  user:\n    token: kube-testserver\n",
            url = self.url()
        )
    }

    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig(namespace))
    }

    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().expect("faults lock") = faults;
    }

    /// Every request handled so far, in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.log.lock().expect("log lock").clone()
    }

    /// Direct access to the objects (tests use it to act as kubelet or to look inside).
    pub fn store(&self) -> std::sync::MutexGuard<'_, store::Store> {
        self.shared.store.lock().expect("store lock")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts connections until `stopped` turns true.
pub async fn serve(listener: std::net::TcpListener, shared: Arc<server::Shared>, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen");
            return;
        }
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let shared = shared.clone();
                let mut conn_stopped = stopped.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| server::handle(shared.clone(), req));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = conn_stopped.changed() => conn.as_mut().graceful_shutdown(),
                    }
                });
            }
            _ = stopped.changed() => return,
        }
    }
}
