//! `bundle-tool subscriptions`: the manifests that install one version line.

use crate::support::{run, tool};
use serde_json::Value;

fn manifests(args: &[&str]) -> (String, Vec<Value>) {
    let out = run(tool().arg("subscriptions").args(args));
    let text = String::from_utf8(out.stdout).unwrap();
    let docs = serde_yaml::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect();
    (text, docs)
}

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn olm_v1_gets_a_catalog_and_an_extension_per_major_line_with_its_installer() {
    let (text, docs) =
        manifests(&["--catalog-image", "registry.example.com/mo-catalog:v2.1.0", "--channel", "stable-v2"]);
    assert!(text.starts_with("# Installs the v2 line") && text.contains("operatorVersion: v2"), "{text}");
    let catalog = find(&docs, "ClusterCatalog");
    assert_eq!(catalog["apiVersion"], "olm.operatorframework.io/v1");
    assert_eq!(catalog["spec"]["source"]["image"]["ref"], "registry.example.com/mo-catalog:v2.1.0");
    assert_eq!(catalog["spec"]["source"]["image"]["pollIntervalMinutes"], 10);
    let ext = find(&docs, "ClusterExtension");
    assert_eq!(ext["metadata"]["name"], "model-orchestra-operator-v2");
    assert_eq!(ext["spec"]["namespace"], "model-orchestra-v2");
    assert_eq!(ext["spec"]["source"]["catalog"]["channels"], serde_json::json!(["stable-v2"]));
    assert_eq!(
        ext["spec"]["source"]["catalog"]["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
        catalog["metadata"]["name"]
    );
    let sa = find(&docs, "ServiceAccount");
    assert_eq!(ext["spec"]["serviceAccount"]["name"], sa["metadata"]["name"]);
    let role = find(&docs, "ClusterRole");
    let rules = role["rules"].as_array().unwrap();
    assert!(
        rules.iter().any(|r| r["resources"].as_array().unwrap().iter().any(|x| x == "modelorchestras")),
        "the installer holds what the operator's role grants"
    );
    assert!(rules.iter().any(|r| r["verbs"].as_array().unwrap().iter().any(|x| x == "escalate")));
    assert_eq!(find(&docs, "ClusterRoleBinding")["subjects"][0]["namespace"], "model-orchestra-v2");
}

#[test]
fn olm_v0_gets_a_catalog_source_an_all_namespaces_group_and_a_subscription() {
    let (_, docs) = manifests(&[
        "--catalog-image",
        "registry.example.com/mo-catalog@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "--channel",
        "fast-v1.3",
        "--olm",
        "v0",
        "--namespace",
        "mo-one",
    ]);
    let source = find(&docs, "CatalogSource");
    assert_eq!(source["metadata"]["namespace"], "mo-one");
    assert_eq!(
        source["spec"]["grpcPodConfig"]["extractContent"]["catalogDir"], "/configs",
        "a scratch catalog is served by OLM's own opm"
    );
    assert!(source["spec"]["updateStrategy"].is_null(), "a digest never changes: no polling");
    let group = find(&docs, "OperatorGroup");
    assert_eq!(
        group["spec"],
        serde_json::json!({}),
        "no target namespaces: AllNamespaces, as the operator watches them all"
    );
    let sub = find(&docs, "Subscription");
    assert_eq!(sub["spec"]["installPlanApproval"], "Automatic");
    assert_eq!(sub["spec"]["channel"], "fast-v1.3");
    assert_eq!(sub["spec"]["name"], "model-orchestra-operator");
    assert_eq!(sub["spec"]["source"], source["metadata"]["name"]);
    assert_eq!(sub["spec"]["sourceNamespace"], "mo-one");
    assert_eq!(sub["metadata"]["name"], "model-orchestra-operator-v1");
}

#[test]
fn an_image_that_serves_itself_gets_no_extract_content() {
    let (_, docs) = manifests(&[
        "--catalog-image",
        "r.example.com/c:v1",
        "--channel",
        "stable-v1",
        "--olm",
        "v0",
        "--image-serves",
    ]);
    assert!(find(&docs, "CatalogSource")["spec"]["grpcPodConfig"]["extractContent"].is_null());
}

#[test]
fn olm_v0_install_plans_of_a_line_may_wait_for_approval_by_hand() {
    #[rustfmt::skip]
    let (_, docs) = manifests(&["--catalog-image", "r.example.com/c:v1", "--channel", "stable-v0", "--olm", "v0",
        "--install-plan-approval", "Manual"]);
    assert_eq!(find(&docs, "Subscription")["spec"]["installPlanApproval"], "Manual");
}

#[test]
fn olm_v1_has_no_install_plan_approval_and_says_so() {
    #[rustfmt::skip]
    let out = tool()
        .args(["subscriptions", "--catalog-image", "r.example.com/c:v1", "--channel", "stable-v1",
            "--install-plan-approval", "Manual"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--install-plan-approval") && stderr.contains("no InstallPlans"), "{stderr}");
}

#[test]
fn a_channel_without_a_major_version_or_an_image_without_a_tag_is_refused() {
    let out = tool()
        .args(["subscriptions", "--catalog-image", "r.example.com/c:v1", "--channel", "stable"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--channel")
            && String::from_utf8_lossy(&out.stderr).contains("fix: e.g. --channel stable-v1")
    );
    let out = tool()
        .args(["subscriptions", "--catalog-image", "r.example.com:5000/c", "--channel", "stable-v1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("neither tag nor digest"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_built_in_objects_pass_kubernetes_validate_strict() {
    let (_, docs) = manifests(&["--catalog-image", "registry.example.com/mo-catalog:v2.1.0", "--channel", "stable-v2"]);
    let builtin: Vec<&Value> =
        docs.iter().filter(|d| !d["apiVersion"].as_str().unwrap().contains("operatorframework.io")).collect();
    assert_eq!(builtin.len(), 4, "Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding");
    let dir = crate::support::Temp::new("subs-kv");
    let file = dir.0.join("builtin.yaml");
    std::fs::write(
        &file,
        builtin.iter().map(|d| format!("---\n{}", serde_yaml::to_string(d).unwrap())).collect::<String>(),
    )
    .unwrap();
    let out = std::process::Command::new("kubernetes-validate")
        .args(["--strict", "-k", "1.33.0"])
        .arg(&file)
        .output()
        .expect("kubernetes-validate is not on PATH: run `make test` (it installs it) or scripts/install-test-deps.sh");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert_eq!(said.matches(" passed ").count(), 4, "{said}");
}
