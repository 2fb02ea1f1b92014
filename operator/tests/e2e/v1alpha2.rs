//! A `v1alpha2` operator line on the real control plane, next to a `v1alpha1` line, the
//! cluster's CRD serving both versions as shipped.

use std::collections::BTreeSet;

use crate::support::*;
use model_orchestra_api::kinds::Kind;
use serde_json::{json, Value};

fn v1alpha2_cr(namespace: &str) -> Value {
    json!({
        "apiVersion": "models.titanml.co/v1alpha2",
        "kind": "ModelOrchestra",
        "metadata": {"name": "stack", "namespace": namespace, "labels": {"operatorVersion": "v1"}},
        "spec": {"applications": {"chat": {"readerConfig": {"modelName": "org/model", "device": "cpu"}}}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_line_reconciles_its_own_version_and_the_v1alpha2_line_renders_the_v1alpha2_contract() {
    let cluster = Cluster::start("v1alpha2-line").await;
    let v1 = OperatorOptions {
        api_version: "v1alpha2",
        routing: "v1",
        claim_unlabeled: false,
        identity: "op-v1",
        ..Default::default()
    };
    let _line_v1 = Operator::start(&cluster, v1).await;
    let v0 = OperatorOptions { routing: "v0", claim_unlabeled: false, identity: "op-v0", ..Default::default() };
    let _line_v0 = Operator::start(&cluster, v0).await;

    cluster.apply_value(&v1alpha2_cr(&cluster.namespace), "modelorchestras", "models.titanml.co", "v1alpha2").await;
    let rendered = model_orchestra::render_value(&v1alpha2_cr(&cluster.namespace), &cluster.namespace).unwrap().objects;
    let expected: BTreeSet<(Kind, String)> = rendered.iter().map(|o| (o.kind, o.name.clone())).collect();
    assert!(
        !expected.contains(&(Kind::Service, "stack-model-orchestra-chat".into())),
        "readers have no Service of their own"
    );
    cluster.wait_children("stack", &expected).await;
    cluster.wait_converged("stack").await;
    let deployment = cluster.api(Kind::Deployment).get("stack-model-orchestra-chat").await.unwrap();
    let mounts = &deployment.data["spec"]["template"]["spec"]["containers"][0]["volumeMounts"];
    assert!(mounts.as_array().unwrap().iter().any(|m| m["mountPath"] == "/code/models"), "{mounts}");

    // The v1alpha1 line, beside it, reconciles its own CR by its own contract.
    let sample = sample_with_label("v0");
    let name = cluster.apply_cr(&sample).await.metadata.name.unwrap();
    cluster.wait_children(&name, &cluster.expected(&sample)).await;
    cluster.wait_converged(&name).await;
}

/// The sample CR, labelled for the line `routing`.
fn sample_with_label(routing: &str) -> String {
    let sample =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples/modelorchestra.yaml")).unwrap();
    sample.replace(
        "  name: my-model-orchestra\n",
        &format!("  name: my-model-orchestra\n  labels: {{operatorVersion: {routing}}}\n"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlabelled_crs_go_to_the_line_serving_the_version_they_were_written_with() {
    let cluster = Cluster::start("by-api-version").await;
    let mark = cluster.audit_mark();
    let v1 = OperatorOptions {
        api_version: "v1alpha2",
        routing: "v1",
        claim_unlabeled: true,
        identity: "op-v1",
        ..Default::default()
    };
    let _line_v1 = Operator::start(&cluster, v1).await;
    let v0 = OperatorOptions { routing: "v0", claim_unlabeled: true, identity: "op-v0", ..Default::default() };
    let _line_v0 = Operator::start(&cluster, v0).await;

    // Neither CR is labelled: one written as v1alpha2, the other (the sample) as v1alpha1.
    let mut written_v1alpha2 = v1alpha2_cr(&cluster.namespace);
    written_v1alpha2["metadata"].as_object_mut().unwrap().remove("labels");
    cluster.apply_value(&written_v1alpha2, "modelorchestras", "models.titanml.co", "v1alpha2").await;
    let sample =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples/modelorchestra.yaml")).unwrap();
    let sample_name = cluster.apply_cr(&sample).await.metadata.name.unwrap();
    cluster.wait_converged("stack").await;
    cluster.wait_converged(&sample_name).await;

    // Each line wrote only its own CR's children (the audit log names the writer), and
    // each child's owner reference names its line's version.
    let wrote = |identity: &str| -> BTreeSet<String> {
        cluster
            .writes_by(identity, mark)
            .expect("the local cluster's audit log")
            .iter()
            .filter(|e| e.resource() != "modelorchestras")
            .map(|e| e.name().to_string())
            .collect()
    };
    let (by_v1, by_v0) = (wrote("op-v1"), wrote("op-v0"));
    assert!(!by_v1.is_empty() && by_v1.iter().all(|n| n.starts_with("stack-")), "op-v1 wrote {by_v1:?}");
    assert!(!by_v0.is_empty() && by_v0.iter().all(|n| n.starts_with(&sample_name)), "op-v0 wrote {by_v0:?}");
    for (owner, version) in
        [("stack", "models.titanml.co/v1alpha2"), (sample_name.as_str(), "models.titanml.co/v1alpha1")]
    {
        for (kind, child) in cluster.children(owner).await {
            assert_eq!(
                child.metadata.owner_references.as_ref().unwrap()[0].api_version,
                version,
                "{kind:?} of {owner}"
            );
        }
    }
}
