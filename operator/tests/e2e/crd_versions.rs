//! The ModelOrchestra CRD gaining `v1alpha2`, on a real API server (the pinned
//! kube-apiserver of `local_cluster`, driven with its own kubectl as a user would): the
//! released `v1alpha1` CRD is installed first and a CR created with it; then the CRD serving
//! both versions replaces it. One test, because the steps share the cluster-wide CRD; on a
//! cluster of its own, since every other test of the tier uses the CRD it replaces.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

fn own_cluster() -> &'static local_cluster::Cluster {
    static OWN: std::sync::OnceLock<local_cluster::Cluster> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        local_cluster::Cluster::start_blocking(local_cluster::Options::fake_nodes_only())
            .unwrap_or_else(|e| panic!("a cluster of its own: {e}"))
    })
}

fn kubectl(args: &[&str], stdin: Option<&str>) -> Result<String, String> {
    let cluster = own_cluster();
    let mut command: Command = cluster.kubectl();
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("kubectl runs");
    child.stdin.take().expect("stdin").write_all(stdin.unwrap_or_default().as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("kubectl finishes");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        Err(text(&out.stderr))
    }
}

fn apply(yaml: &str) -> Result<String, String> {
    kubectl(&["apply", "--server-side", "--field-manager", "user", "-f", "-"], Some(yaml))
}

fn install(crd: &str) {
    apply(crd).unwrap_or_else(|e| panic!("the API server refused the CRD: {e}"));
    // `kubectl wait` fails instead of waiting while the new CRD has no conditions yet.
    let established = r#"jsonpath={.status.conditions[?(@.type=="Established")].status}"#;
    for _ in 0..600 {
        if kubectl(&["get", "crd", "modelorchestras.models.titanml.co", "-o", established], None)
            .is_ok_and(|s| s == "True")
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the CRD was not established within 60 s");
}

fn cr(api_version: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: models.titanml.co/{api_version}\nkind: ModelOrchestra\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}")
}

#[test]
fn the_crd_gains_v1alpha2_keeps_v1alpha1_objects_and_refuses_bad_v1alpha2_crs_naming_the_field() {
    let released = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../bundles/crds/0.1.0.yaml")).unwrap();
    install(&released);
    let before_spec = "  applications:\n    chat:\n      readerConfig: {modelName: org/model, device: cpu}\n      service: {type: ClusterIP}\n";
    apply(&cr("v1alpha1", "before", before_spec)).expect("a v1alpha1 CR on the released CRD");
    let read = |version: &str| -> Value {
        let json = kubectl(
            &["get", &format!("modelorchestras.{version}.models.titanml.co"), "before", "-n", "default", "-o", "json"],
            None,
        )
        .unwrap();
        serde_json::from_str(&json).unwrap()
    };
    let original = read("v1alpha1");

    // The CRD with both versions is accepted (its CEL rules within the cost budget).
    install(&serde_yaml::to_string(&model_orchestra_api::crd::crd()).unwrap());
    let after = read("v1alpha1");
    assert_eq!(after["apiVersion"], "models.titanml.co/v1alpha1");
    assert_eq!(after["spec"], original["spec"], "a v1alpha1 object reads back unchanged");
    assert_eq!(after["metadata"]["resourceVersion"], original["metadata"]["resourceVersion"], "nothing rewrote it");

    // Good v1alpha2 CRs are accepted, bad ones refused at apply time naming the field.
    let app = |name: &str| format!("  applications:\n    {name}:\n      readerConfig: {{modelName: org/model}}\n");
    apply(&cr("v1alpha2", "good", &app("chat"))).expect("a valid v1alpha2 CR is accepted");
    apply(&cr("v1alpha2", "fifty-one", &format!("  fullnameOverride: x\n{}", app(&"a".repeat(51)))))
        .expect("a 51-character application name fits");
    let refused = |name: &str, spec: &str| apply(&cr("v1alpha2", name, spec)).expect_err("the API server refuses it");

    let err = refused("gw", &app("gateway"));
    assert!(err.contains("spec.applications") && err.contains("`gateway` is reserved"), "{err}");
    let err = refused("upper", &app("Chat"));
    assert!(err.contains("spec.applications") && err.contains("must be DNS labels"), "{err}");
    let err = refused("long", &app(&"a".repeat(52)));
    assert!(err.contains("spec.applications") && err.contains("at most 51 characters"), "{err}");
    let err = refused(&"n".repeat(40), &app(&"a".repeat(20)));
    assert!(err.contains("spec.applications") && err.contains("would exceed 63 characters"), "{err}");
    let err = refused(&"n".repeat(50), "  {}\n");
    assert!(err.contains("`<fullname>-gateway` would exceed 63 characters"), "{err}");
    let err = refused("cache-size", &format!("{}      modelCache: {{enabled: true, size: 40gb}}\n", app("chat")));
    assert!(err.contains("modelCache.size") && err.contains("must be a quantity"), "{err}");
    apply(&cr(
        "v1alpha2",
        "cache-size-ok",
        &format!("{}      modelCache: {{enabled: true, size: 40Gi}}\n", app("chat")),
    ))
    .expect("a quantity is accepted");
    let err = refused("bad-expect", &format!("{}      promotion: {{enabled: true, expect: '(yes'}}\n", app("chat")));
    assert!(err.contains("promotion.expect"), "{err}");
    apply(&cr(
        "v1alpha2",
        "good-expect",
        &format!("{}      promotion: {{enabled: true, expect: '^\\s*yes\\b'}}\n", app("chat")),
    ))
    .expect("a regular expression is accepted");
    let err = refused("with-service", &format!("{}      service: {{type: ClusterIP}}\n", app("chat")));
    assert!(
        err.contains("spec.applications[chat].service") && err.contains("v1alpha2 has no per-application service"),
        "{err}"
    );

    // Stored as v1alpha2, an object written in either version is kept whole: v1alpha2's
    // model cache, and v1alpha1's per-application Service after a v1alpha1 write.
    let cached = format!("{}      modelCache: {{enabled: true, size: 5Gi}}\n", app("chat"));
    apply(&cr("v1alpha2", "cached", &cached)).expect("a v1alpha2 CR with a model cache");
    let json =
        kubectl(&["get", "modelorchestras.v1alpha2.models.titanml.co", "cached", "-n", "default", "-o", "json"], None)
            .unwrap();
    let cached: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(cached["spec"]["applications"]["chat"]["modelCache"]["size"], "5Gi", "not pruned on its way to storage");
    let rewritten = before_spec.replace("      service:", "      replicaCount: 2\n      service:");
    apply(&cr("v1alpha1", "before", &rewritten)).expect("a v1alpha1 write");
    assert_eq!(
        read("v1alpha1")["spec"]["applications"]["chat"]["service"]["type"],
        "ClusterIP",
        "stored as v1alpha2, still there"
    );
    // A v1alpha2 writer that leaves a v1alpha1 CR's Service alone is not refused for it.
    kubectl(&["label", "modelorchestras.v1alpha2.models.titanml.co", "before", "-n", "default", "team=a"], None)
        .expect("ratcheting lets the unchanged field through");
    own_cluster().stop();
}
