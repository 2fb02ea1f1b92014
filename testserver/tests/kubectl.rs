//! `kubectl` (Debian's package; `make test` installs it) drives the server by hand:
//! get, `apply --server-side --validate=false` and delete.

use std::process::Command;

use kube_testserver::TestServer;

fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl is not on PATH: run `make test` (scripts/install-test-deps.sh installs it)");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "kubectl {args:?} failed:\n{text}");
    text
}

#[test]
fn kubectl_gets_applies_server_side_and_deletes() {
    let server = TestServer::start().unwrap();
    let dir = std::env::temp_dir().join(format!("kts-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    server.write_kubeconfig(&kc, "default").unwrap();

    assert!(kubectl(&kc, &["get", "namespaces"], None).contains("kube-system"));
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels: {app: demo}\ndata:\n  k: v\n";
    assert!(kubectl(&kc, &["apply", "--server-side", "--validate=false", "-f", "-"], Some(manifest)).contains("serverside-applied"));
    let json = kubectl(&kc, &["get", "configmap", "demo", "-o", "json", "--show-managed-fields"], None);
    let obj: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(obj["data"]["k"], "v");
    assert_eq!(obj["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert!(kubectl(&kc, &["get", "configmaps", "-l", "app=demo"], None).contains("demo"));
    assert!(kubectl(&kc, &["delete", "configmap", "demo"], None).contains("deleted"));
    assert!(kubectl(&kc, &["get", "configmaps"], None).contains("No resources found"));
    std::fs::remove_dir_all(&dir).ok();
}
