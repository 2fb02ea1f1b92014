//! bundle-tool links the ModelOrchestra API, not the operator: no controller runtime, no
//! Kubernetes client, no metrics library (`cargo tree` of its normal dependencies).

use std::process::Command;

fn normal_dependencies() -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-p", "bundle-tool", "-e", "normal", "--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let mut crates: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    crates.sort();
    crates.dedup();
    crates
}

#[test]
fn bundle_tool_links_neither_the_controller_runtime_nor_a_kubernetes_client_nor_prometheus() {
    let crates = normal_dependencies();
    assert!(crates.iter().any(|c| c == "model-orchestra-api"), "{crates:?}");
    for unwanted in ["kube-runtime", "kube-client", "prometheus-client", "model-orchestra-operator"] {
        assert!(!crates.iter().any(|c| c == unwanted), "bundle-tool links {unwanted}");
    }
}
