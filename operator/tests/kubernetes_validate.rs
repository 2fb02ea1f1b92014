//! An independent check: every built-in object rendered for the sample and the maximal CR
//! passes `kubernetes-validate --strict` (the real Kubernetes OpenAPI schemas, offline).
//! `make test` installs the tool (scripts/install-test-deps.sh); without it this test fails
//! rather than pretending to pass.

mod common;

use std::process::Command;

use common::*;
use model_orchestra::chart::to_yaml_stream;

/// The Kubernetes version the operator's k8s-openapi feature targets.
const KUBERNETES_VERSION: &str = "1.33.0";

fn validate(name: &str, yaml: &str) {
    let objects = render(yaml);
    let builtin: Vec<_> = objects.into_iter().filter(|o| !o.kind.is_optional()).collect();
    validate_stream(name, &to_yaml_stream(&builtin), builtin.len());
}

fn validate_stream(name: &str, stream: &str, objects: usize) {
    let dir = std::env::temp_dir().join(format!("mo-kv-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rendered.yaml");
    std::fs::write(&file, stream).unwrap();
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "-k", KUBERNETES_VERSION])
        .arg(&file)
        .output()
        .expect("kubernetes-validate is not on PATH: run `make test` (it installs it) or scripts/install-test-deps.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{name}: kubernetes-validate failed:\n{stdout}\n{stderr}");
    let passed = format!("{stdout}{stderr}").matches(" passed ").count();
    assert_eq!(passed, objects, "{name}: every object must be checked:\n{stdout}{stderr}");
}

#[test]
fn sample_objects_pass_kubernetes_validate_strict() {
    validate("sample", &sample());
}

#[test]
fn maximal_objects_pass_kubernetes_validate_strict() {
    validate("maximal", &data("maximal.yaml"));
}

#[test]
fn the_operator_deploy_manifests_pass_kubernetes_validate_strict() {
    let yaml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/deploy/operator.yaml")).unwrap();
    validate_stream("deploy", &yaml, yaml.matches("\nkind: ").count());
}
