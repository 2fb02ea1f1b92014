//! The local cluster itself: it starts from the real programs in namespaces of its own, its
//! fake GPU nodes take pods the real scheduler places, its real node runs pods of our own
//! images, two real nodes reach each other's pods, lose one and drain one, the audit log witnesses requests, the fault proxy injects what it is told, claims
//! without a StorageClass get the default one and a provisioned volume, and stopping it —
//! normally, after a panic, or by killing its owner — leaves nothing behind.

mod control_plane;
mod isolation;
mod real_node;
mod real_nodes;
mod storage;
mod teardown;

use std::time::{Duration, Instant};

pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(90), "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
