//! What the benchmarks against the local control plane share: their knobs, a process's
//! figures from /proc, and a plain server-side apply of one rendered object.

// Each benchmark that includes this module uses part of it.
#![allow(dead_code)]

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

/// A benchmark's `main`: `--list` names it (as `cargo bench -- --list` asks every target);
/// otherwise rustls' provider installed, `bench` run on a two-thread runtime.
pub fn main(name: &str, bench: impl std::future::Future<Output = ()>) {
    if std::env::args().any(|a| a == "--list") {
        println!("{name}: benchmark");
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(bench);
}

/// A numeric knob from the environment.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A `kB` field of /proc/<pid>/status (`VmRSS:`, `VmHWM:`), in KiB.
pub fn proc_kib(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

/// Server-side applies `object` (any kind the API server serves) as the field manager `bench`.
pub async fn apply(client: &kube::Client, object: &Value) {
    let gvk = kube::api::GroupVersionKind::try_from(&kube::api::TypeMeta {
        api_version: object["apiVersion"].as_str().unwrap().into(),
        kind: object["kind"].as_str().unwrap().into(),
    })
    .unwrap();
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), object["metadata"]["namespace"].as_str().unwrap(), &ar)
        }
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        object["metadata"]["name"].as_str().unwrap(),
        &PatchParams::apply("bench").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap();
}
