//! End-to-end: the real operator binary, under its own ServiceAccount, against a real
//! control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
//! GPU nodes). Pods are scheduled by the real scheduler, run by kwok, and Deployments report
//! status through the real controllers; the audit log is the witness of every write.
//! (`E2E_REAL_CLUSTER=1 KUBECONFIG=… cargo test --test e2e` runs them on another cluster.)

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::ResourceExt;
use model_orchestra_api::kinds::Kind;
use serde_json::{json, Value};

fn uids(children: &[(Kind, kube::api::DynamicObject)]) -> BTreeSet<String> {
    children.iter().filter_map(|(_, o)| o.uid()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_cr_gets_every_rendered_object_owned_and_managed_by_the_operator() {
    let cluster = Cluster::start("sample").await;
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let cr = cluster.apply_cr(&sample()).await;
    let name = cr.name_any();
    cluster.wait_children(&name, &cluster.expected(&sample())).await;
    let uid = cluster.cr(&name).await.uid().unwrap();
    for (kind, child) in cluster.children(&name).await {
        let owner = &child.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!((owner.uid.as_str(), owner.controller), (uid.as_str(), Some(true)), "{kind:?} {}", child.name_any());
        let managers: Vec<_> =
            child.metadata.managed_fields.iter().flatten().map(|m| (m.manager.clone(), m.operation.clone())).collect();
        assert!(managers.contains(&(Some(FIELD_MANAGER.into()), Some("Apply".into()))), "{kind:?}: {managers:?}");
    }
    let cr = cluster.wait_converged(&name).await;
    assert_eq!(
        cr.data["status"]["gatewayAddress"],
        json!(format!("my-model-orchestra-gateway.{}.svc:80", cluster.namespace))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_samples_gpu_pods_are_scheduled_on_the_requested_product_and_the_cr_becomes_ready() {
    let cluster = Cluster::start("gpu-ready").await;
    if !cluster.has_fake_nodes("the_samples_gpu_pods_are_scheduled_on_the_requested_product_and_the_cr_becomes_ready") {
        return;
    }
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let name = cluster.apply_cr(&sample()).await.name_any();
    let ready = cluster.wait_converged(&name).await;
    let status = &ready.data["status"];
    assert_eq!(status["applicationsReady"], "1/1");
    assert_eq!(status["applications"]["hello-world"], json!({"readyReplicas": 1, "desiredReplicas": 1, "ready": true}));

    let pods = cluster.component_pods(&name, "application-hello-world").await;
    assert_eq!(pods.len(), 1, "one reader pod");
    let pod = &pods[0];
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).expect("scheduled");
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(cluster.client.clone());
    let node = nodes.get(&node_name).await.unwrap();
    assert_eq!(
        node.labels().get("nvidia.com/gpu.product").map(String::as_str),
        Some("NVIDIA-GeForce-RTX-3060"),
        "placed on {node_name}"
    );
    let spec = pod.spec.as_ref().unwrap();
    let limits = spec.containers[0].resources.as_ref().and_then(|r| r.limits.clone()).unwrap_or_default();
    assert_eq!(limits.get("nvidia.com/gpu").map(|q| q.0.as_str()), Some("1"));
    assert!(spec
        .tolerations
        .iter()
        .flatten()
        .any(|t| t.key.as_deref() == Some("nvidia.com/gpu") && t.effect.as_deref() == Some("NoSchedule")));
    assert_eq!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_that_cannot_be_scheduled_are_explained_on_the_cr_with_the_schedulers_message() {
    let cluster = Cluster::start("unschedulable").await;
    if !cluster.has_fake_nodes("pods_that_cannot_be_scheduled_are_explained_on_the_cr_with_the_schedulers_message") {
        return;
    }
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = sample().replace("NVIDIA-GeForce-RTX-3060", "NVIDIA-H100-80GB-HBM3");
    let name = cluster.apply_cr(&yaml).await.name_any();
    let cr = eventually_within(Duration::from_secs(20), "the CR explains why its pod is not scheduled", || async {
        let cr = cluster.mo_api().get(&name).await.ok()?;
        let message = ready_condition(&cr)?["message"].as_str()?.to_string();
        message.contains("nodes are available").then_some(cr)
    })
    .await;
    let ready = ready_condition(&cr).unwrap();
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "Unschedulable", "{ready}");
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("hello-world"), "names the application: {message}");
    let local = cluster.local.expect("the local cluster");
    let nodes = local.nodes.len() + local.real_nodes.len();
    assert!(message.contains(&format!("0/{nodes} nodes are available")), "the scheduler's own words: {message}");
    assert!(message.contains("node affinity/selector"), "{message}");

    // More GPUs than any node has: the scheduler says the resource is insufficient.
    let greedy = sample()
        .replace("device: cuda", "device: cuda\n        tensorParallel: 16")
        .replace("      nodeSelector:\n        nvidia.com/gpu.product: NVIDIA-GeForce-RTX-3060\n", "");
    cluster.apply_cr(&greedy).await;
    let last = std::sync::Mutex::new(Value::Null);
    let says_insufficient = tokio::time::timeout(
        // Seconds, not the Deployment's 10-minute progress deadline; generous for a loaded CI machine.
        Duration::from_secs(30),
        eventually_within(Duration::MAX, "", || async {
            let cr = cluster.mo_api().get(&name).await.ok()?;
            let ready = ready_condition(&cr)?;
            *last.lock().unwrap() = ready.clone();
            ready["message"].as_str()?.contains("Insufficient nvidia.com/gpu").then_some(())
        }),
    )
    .await;
    assert!(says_insufficient.is_ok(), "after 30 s the CR still says {}", last.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_reader_config_changes_the_config_map_and_rolls_the_pods() {
    let cluster = Cluster::start("config").await;
    if !cluster.has_fake_nodes("changing_reader_config_changes_the_config_map_and_rolls_the_pods") {
        return;
    }
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_converged("demo").await;
    let checksum =
        |d: &kube::api::DynamicObject| d.data["spec"]["template"]["metadata"]["annotations"]["checksum/config"].clone();
    let before = cluster.api(Kind::Deployment).get("demo-model-orchestra-chat").await.unwrap();
    let old_pods: BTreeSet<String> =
        cluster.component_pods("demo", "application-chat").await.iter().map(|p| p.name_any()).collect();
    let changed = yaml.replace("org/chat-model", "org/other-model");
    cluster.apply_cr(&changed).await;
    let after = eventually("the deployment's checksum changes", || async {
        let d = cluster.api(Kind::Deployment).get("demo-model-orchestra-chat").await.ok()?;
        (checksum(&d) != checksum(&before)).then_some(d)
    })
    .await;
    let cm = cluster.api(Kind::ConfigMap).get("demo-model-orchestra-chat").await.unwrap();
    assert!(cm.data["data"].to_string().contains("org/other-model"), "{}", cm.data["data"]);
    assert_eq!(after.uid(), before.uid(), "updated in place, not recreated");
    // The Deployment controller rolls the pods: new ones replace the old.
    eventually("the reader pods are replaced", || async {
        let pods = cluster.component_pods("demo", "application-chat").await;
        let names: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
        (pods.len() == 1 && names.is_disjoint(&old_pods)).then_some(())
    })
    .await;
    cluster.wait_converged("demo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_an_application_deletes_exactly_its_objects() {
    let cluster = Cluster::start("remove-app").await;
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let both = cr_with_apps("demo", &["chat", "embed"], None);
    cluster.apply_cr(&both).await;
    cluster.wait_children("demo", &cluster.expected(&both)).await;
    let uids_before = uids(&cluster.children("demo").await);
    let one = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&one).await;
    cluster.wait_children("demo", &cluster.expected(&one)).await;
    let uids_after = uids(&cluster.children("demo").await);
    assert!(uids_after.is_subset(&uids_before), "the kept objects were not recreated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_child_is_recreated_and_a_hand_edited_child_is_repaired() {
    let cluster = Cluster::start("repair").await;
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    let want = cluster.expected(&yaml);
    cluster.wait_children("demo", &want).await;

    cluster.delete(Kind::Service, "demo-model-orchestra-chat").await;
    cluster.wait_children("demo", &want).await;

    let edit = json!({"data": {"config.yaml": "edited by hand"}});
    cluster
        .api(Kind::ConfigMap)
        .patch("demo-model-orchestra-chat", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    eventually("the hand edit is reverted", || async {
        let cm = cluster.api(Kind::ConfigMap).get("demo-model-orchestra-chat").await.ok()?;
        (cm.data["data"]["config.yaml"] != "edited by hand").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_kubectl_scale_and_edit_of_owned_fields_are_reverted() {
    let cluster = Cluster::start("ssa-revert").await;
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_converged("demo").await;
    let deployment = "demo-model-orchestra-chat";

    cluster.kubectl(&["scale", "deployment", deployment, "--replicas=3"]);
    eventually("kubectl scale is reverted", || async {
        let d = cluster.api(Kind::Deployment).get(deployment).await.ok()?;
        (d.data["spec"]["replicas"] == 1).then_some(())
    })
    .await;

    let edit =
        json!({"spec": {"template": {"spec": {"containers": [{"name": deployment, "imagePullPolicy": "Always"}]}}}});
    let edit = serde_json::to_string(&edit).unwrap();
    cluster.kubectl(&["patch", "deployment", deployment, "--type=strategic", "-p", &edit]);
    eventually("the edit of an owned field is reverted", || async {
        let d = cluster.api(Kind::Deployment).get(deployment).await.ok()?;
        (d.data["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_other_managers_own_are_kept() {
    let cluster = Cluster::start("ssa-keep").await;
    let op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_converged("demo").await;
    let deployment = "demo-model-orchestra-chat";
    let api = cluster.api(Kind::Deployment);

    // A sidecar injector adds a container, a volume and an annotation with its own apply.
    let injected = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": deployment, "annotations": {"sidecar.example.com/injected": "true"}},
        "spec": {"template": {"spec": {
            "containers": [{"name": "proxy-sidecar", "image": "example.com/proxy:1"}],
            "volumes": [{"name": "sidecar-certs", "emptyDir": {}}]
        }}}
    });
    api.patch(deployment, &PatchParams::apply("sidecar-injector"), &Patch::Apply(&injected)).await.unwrap();
    // The operator applies everything it owns again (a spec change)…
    cluster.apply_cr(&yaml.replace("org/chat-model", "org/chat-model-2")).await;
    eventually("the operator applied the change", || async {
        let cm = cluster.api(Kind::ConfigMap).get(deployment).await.ok()?;
        cm.data["data"].to_string().contains("chat-model-2").then_some(())
    })
    .await;
    cluster.wait_converged("demo").await;
    // …and keeps what the injector owns.
    let d = api.get(deployment).await.unwrap();
    let containers: Vec<&str> = d.data["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(containers, [deployment, "proxy-sidecar"]);
    let volumes: Vec<&str> = d.data["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(volumes.contains(&"sidecar-certs") && volumes.contains(&"config"), "{volumes:?}");
    assert_eq!(d.annotations().get("sidecar.example.com/injected").map(String::as_str), Some("true"));
    assert!(d.metadata.managed_fields.iter().flatten().any(|m| m.manager.as_deref() == Some("sidecar-injector")));
    let mark = cluster.audit_mark();
    tokio::time::sleep(Duration::from_secs(3)).await;
    if let Some(writes) = cluster.writes_by(&op.identity, mark) {
        assert!(writes.is_empty(), "no fight with the injector: {writes:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_scaling_enabled_the_autoscalers_replicas_are_never_fought_over() {
    let cluster = Cluster::start("ssa-scale").await;
    let op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = format!("{}      scaling:\n        enabled: true\n", cr_with_apps("demo", &["chat"], None));
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    let deployment = "demo-model-orchestra-chat";
    // KEDA's HPA scales the Deployment through its scale subresource.
    let scale = json!({"spec": {"replicas": 3}});
    let api = cluster.api(Kind::Deployment);
    api.patch_scale(deployment, &PatchParams::default(), &Patch::Merge(&scale)).await.unwrap();
    let mark = cluster.audit_mark();
    // A spec change makes the operator apply the Deployment again.
    cluster.apply_cr(&yaml.replace("org/chat-model", "org/chat-model-2")).await;
    eventually("the new config reached the Deployment's pods", || async {
        let d = api.get(deployment).await.ok()?;
        let cm = cluster.api(Kind::ConfigMap).get(deployment).await.ok()?;
        (cm.data["data"].to_string().contains("chat-model-2") && d.metadata.generation > Some(2)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = api.get(deployment).await.unwrap();
    assert_eq!(d.data["spec"]["replicas"], 3, "the autoscaler's replicas stand");
    if let Some(audit) = cluster.audit() {
        let scale_writes: Vec<_> = audit
            .since(mark)
            .into_iter()
            .filter(|e| is_operator_write(e, &op.identity) && e.subresource() == "scale")
            .collect();
        assert!(scale_writes.is_empty(), "{scale_writes:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_cr_lets_the_garbage_collector_remove_its_children() {
    let cluster = Cluster::start("gc").await;
    if !cluster.has_fake_nodes("deleting_the_cr_lets_the_garbage_collector_remove_its_children") {
        return;
    }
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_converged("demo").await;
    cluster.mo_api().delete("demo", &Default::default()).await.unwrap();
    cluster.wait_children("demo", &BTreeSet::new()).await;
    eventually("the pods are gone too", || async {
        cluster.component_pods("demo", "application-chat").await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_cr_reports_render_failed_and_changes_nothing() {
    let cluster = Cluster::start("invalid").await;
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    cluster.wait_converged("demo").await;
    let versions = |children: Vec<(Kind, kube::api::DynamicObject)>| -> BTreeSet<(String, Option<String>)> {
        children.into_iter().map(|(_, o)| (o.name_any(), o.resource_version())).collect()
    };
    let before = versions(cluster.children("demo").await);

    // An application key that is not a DNS label: the v1alpha1 schema cannot see map keys, the operator must.
    let invalid = cr_with_apps("demo", &["Chat_Bot"], None);
    cluster.apply_cr(&invalid).await;
    let cr = cluster.wait_reason("demo", "RenderFailed").await;
    let ready = ready_condition(&cr).unwrap();
    assert!(ready["message"].as_str().unwrap().contains("spec.applications"), "{ready}");
    assert_eq!(versions(cluster.children("demo").await), before, "nothing applied or pruned");

    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(cluster.client.clone(), &cluster.namespace);
    eventually("a RenderFailed event is published", || async {
        let list = api.list(&Default::default()).await.ok()?;
        list.items.iter().any(|e| e.reason.as_deref() == Some("RenderFailed")).then_some(())
    })
    .await;
}

/// The cluster's own policy (a ValidatingAdmissionPolicy, as Kyverno or Gatekeeper users
/// have): no NodePort Services in namespaces labelled `e2e.models.titanml.co/policy=<label>`.
/// Only the API server knows it. Returns once it is in force.
async fn no_nodeport_policy(cluster: &Cluster, label: &str) {
    let policy = format!("e2e-no-nodeport-{}", cluster.namespace);
    cluster
        .apply_value(
            &json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": policy},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["services"]}]},
                    "validations": [{"expression": "object.spec.type != 'NodePort'", "message": "NodePort Services are not allowed here", "reason": "Invalid"}]
                }
            }),
            "validatingadmissionpolicies",
            "admissionregistration.k8s.io",
            "v1",
        )
        .await;
    cluster
        .apply_value(
            &json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": policy},
                "spec": {"policyName": policy, "validationActions": ["Deny"], "matchResources": {"namespaceSelector": {"matchLabels": {"e2e.models.titanml.co/policy": label}}}}
            }),
            "validatingadmissionpolicybindings",
            "admissionregistration.k8s.io",
            "v1",
        )
        .await;
    // Policies take effect asynchronously: wait until a NodePort Service is refused.
    let probe = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "probe", "namespace": cluster.namespace}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
    eventually("the policy is in force", || async {
        let api = cluster.api(Kind::Service);
        let params = PatchParams { dry_run: true, ..PatchParams::apply("e2e").force() };
        api.patch("probe", &params, &Patch::Apply(&probe)).await.err().map(drop)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_the_api_server_refuses_means_no_write_at_all() {
    // A cluster of its own: every operator would dry-run for its policy.
    let cluster = Cluster::start_alone("refused", json!({"e2e.models.titanml.co/policy": "no-nodeport"})).await;
    no_nodeport_policy(&cluster, "no-nodeport").await;

    let op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_converged("demo").await;
    let before: BTreeSet<_> =
        cluster.children("demo").await.into_iter().map(|(_, o)| (o.name_any(), o.resource_version())).collect();
    let mark = cluster.audit_mark();

    // A change to every application object, and the gateway Service made NodePort: the
    // ConfigMaps and Deployments would be fine, the Service is refused.
    let refused = format!(
        "{}  gateway:\n    service:\n      type: NodePort\n",
        yaml.replace("org/chat-model", "org/other-model")
    );
    cluster.apply_cr(&refused).await;
    let cr = cluster.wait_reason("demo", "Invalid").await;
    let message = ready_condition(&cr).unwrap()["message"].as_str().unwrap().to_string();
    assert!(message.contains("Service demo-model-orchestra-gateway"), "names the object: {message}");
    assert!(message.contains("NodePort Services are not allowed here"), "carries the server's message: {message}");
    let after: BTreeSet<_> =
        cluster.children("demo").await.into_iter().map(|(_, o)| (o.name_any(), o.resource_version())).collect();
    assert_eq!(after, before, "nothing written");
    if let Some(writes) = cluster.writes_by(&op.identity, mark) {
        let child_writes: Vec<_> = writes.iter().filter(|e| e.resource() != "modelorchestras").collect();
        assert!(child_writes.is_empty(), "only dry runs and the status: {child_writes:?}");
    }
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(cluster.client.clone(), &cluster.namespace);
    eventually("an Invalid event is published", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.iter().any(|e| e.reason.as_deref() == Some("Invalid")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_killed_mid_reconcile_converges_after_restart_without_duplicates() {
    let cluster = Cluster::start("restart").await;
    let proxy = cluster.fault_proxy();
    let slow = match &proxy {
        Some(p) => {
            // Slow every request so the kill lands between applies.
            p.set_faults(Faults { latency: Duration::from_millis(60), ..Default::default() });
            Some(cluster.operator_kubeconfig("v0", Some(&p.url())).await)
        }
        None => None,
    };
    let mut op = Operator::start(&cluster, OperatorOptions { kubeconfig: slow.as_deref(), ..Default::default() }).await;
    let yaml = cr_with_apps("demo", &["a", "b", "c"], None);
    cluster.apply_cr(&yaml).await;
    eventually("some children exist", || async { (!cluster.child_names("demo").await.is_empty()).then_some(()) }).await;
    op.kill();
    let partial = cluster.child_names("demo").await;
    let _op = Operator::start(&cluster, OperatorOptions { identity: "op-b", ..Default::default() }).await;
    let want = cluster.expected(&yaml);
    cluster.wait_children("demo", &want).await;
    assert!(partial.len() <= want.len());
    assert_eq!(cluster.children("demo").await.len(), want.len(), "no duplicates");
    cluster.wait_converged("demo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_faults_injected_the_operator_converges_once_they_stop() {
    let cluster = Cluster::start("faults").await;
    let Some(proxy) = cluster.fault_proxy() else {
        eprintln!("skipped on an external cluster: faults are injected by the harness's proxy in front of the local API server");
        return;
    };
    let yaml = cr_with_apps("demo", &["chat", "embed"], None);
    cluster.apply_cr(&yaml).await;
    proxy.set_faults(Faults {
        latency: Duration::from_millis(5),
        error_rate: 0.15,
        reset_rate: 0.05,
        drop_watches_after: Some(Duration::from_millis(1500)),
    });
    let kubeconfig = cluster.operator_kubeconfig("v0", Some(&proxy.url())).await;
    // The Lease lasts as long as in production (15 s): a leader that cannot renew it for
    // that long stops, and here nothing would restart it.
    let _op = Operator::start(
        &cluster,
        OperatorOptions { kubeconfig: Some(&kubeconfig), lease_seconds: 15, ..Default::default() },
    )
    .await;
    // It starts, discovers, lists and watches through errors, resets and broken watches.
    eventually("every kind of fault has been injected", || async {
        let injected = proxy.injected();
        (injected.errors > 0 && injected.resets > 0 && injected.dropped_watches > 0).then_some(())
    })
    .await;
    proxy.set_faults(Faults::default());
    // Its watches back off up to 30 s (kube-runtime's default, as client-go's reflector).
    let want = cluster.expected(&yaml);
    eventually_within(Duration::from_secs(120), "the children are applied once the faults stop", || async {
        (cluster.child_names("demo").await == want).then_some(())
    })
    .await;
    cluster.wait_converged("demo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_cr_costs_no_writes_on_resync_and_its_status_survives_pruning() {
    let cluster = Cluster::start("no-writes").await;
    if !cluster.has_fake_nodes("a_converged_cr_costs_no_writes_on_resync_and_its_status_survives_pruning") {
        return;
    }
    let op = Operator::start(&cluster, OperatorOptions { resync_seconds: 1, ..Default::default() }).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    let cr = cluster.wait_converged("demo").await;
    // Every status field the operator writes is in the CRD's schema, so the API server's
    // pruning of unknown fields keeps them.
    let status = cr.data["status"].as_object().unwrap();
    let fields: BTreeSet<&str> = status.keys().map(String::as_str).collect();
    assert_eq!(
        fields,
        BTreeSet::from([
            "observedGeneration",
            "conditions",
            "applicationsReady",
            "applications",
            "gatewayAddress",
            "operatorVersion",
            "appliedHash"
        ])
    );
    assert_eq!(status["applications"]["chat"], json!({"readyReplicas": 1, "desiredReplicas": 1, "ready": true}));

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mark = cluster.audit_mark();
    let metrics_addr = op.metrics_addr().await;
    let reconciles_before =
        metric(&fetch_metrics(&metrics_addr).await, "model_orchestra_reconciles_total{result=\"success\"}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let reconciles =
        metric(&fetch_metrics(&metrics_addr).await, "model_orchestra_reconciles_total{result=\"success\"}")
            - reconciles_before;
    assert!(reconciles >= 3.0, "resyncs happened ({reconciles})");
    let Some(writes) = cluster.writes_by(&op.identity, mark) else {
        eprintln!("write count skipped on an external cluster: it needs the local API server's audit log");
        return;
    };
    assert!(writes.is_empty(), "no-op resyncs wrote: {writes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_with_different_routing_values_each_write_only_their_own_crs() {
    let cluster = Cluster::start("routing").await;
    let mark = cluster.audit_mark();
    let v0 = Operator::start(
        &cluster,
        OperatorOptions { routing: "v0", claim_unlabeled: false, identity: "op-v0", ..Default::default() },
    )
    .await;
    let v1 = Operator::start(
        &cluster,
        OperatorOptions { routing: "v1", claim_unlabeled: false, identity: "op-v1", ..Default::default() },
    )
    .await;
    let a = cr_with_apps("alpha", &["chat"], Some("v0"));
    let b = cr_with_apps("beta", &["chat"], Some("v1"));
    cluster.apply_cr(&a).await;
    cluster.apply_cr(&b).await;
    cluster.wait_converged("alpha").await;
    cluster.wait_converged("beta").await;
    let (Some(by_v0), Some(by_v1)) = (cluster.writes_by(&v0.identity, mark), cluster.writes_by(&v1.identity, mark))
    else {
        return;
    };
    let touches =
        |e: &local_cluster::audit::AuditEvent, cr: &str| e.name() == cr || e.name().starts_with(&format!("{cr}-"));
    assert!(by_v0.iter().all(|w| !touches(w, "beta")), "v0 wrote beta's objects");
    assert!(by_v1.iter().all(|w| !touches(w, "alpha")), "v1 wrote alpha's objects");
    assert!(!by_v0.is_empty() && !by_v1.is_empty());
    // Each line writes as its own ServiceAccount.
    assert!(by_v0
        .iter()
        .all(|w| w.user.username == "system:serviceaccount:model-orchestra-system:model-orchestra-operator-v0"));
    assert!(by_v1
        .iter()
        .all(|w| w.user.username == "system:serviceaccount:model-orchestra-system:model-orchestra-operator-v1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_relabelled_from_v0_to_v1_is_taken_over_without_recreating_its_children() {
    let cluster = Cluster::start("takeover").await;
    let _v0 = Operator::start(
        &cluster,
        OperatorOptions { routing: "v0", claim_unlabeled: false, identity: "op-v0", ..Default::default() },
    )
    .await;
    let v1 = Operator::start(
        &cluster,
        OperatorOptions { routing: "v1", claim_unlabeled: false, identity: "op-v1", ..Default::default() },
    )
    .await;
    let on_v0 = cr_with_apps("demo", &["chat"], Some("v0"));
    cluster.apply_cr(&on_v0).await;
    cluster.wait_children("demo", &cluster.expected(&on_v0)).await;
    cluster.wait_converged("demo").await;
    let before = uids(&cluster.children("demo").await);
    let mark = cluster.audit_mark();

    // The v1 line adds an application; only the v1 operator may apply it.
    let on_v1 = cr_with_apps("demo", &["chat", "embed"], Some("v1"));
    cluster.apply_cr(&on_v1).await;
    cluster.wait_children("demo", &cluster.expected(&on_v1)).await;
    let after = uids(&cluster.children("demo").await);
    assert!(before.is_subset(&after), "existing children kept their identity");
    if let (Some(by_v1), Some(by_v0)) = (cluster.writes_by(&v1.identity, mark), cluster.writes_by("op-v0", mark)) {
        assert!(!by_v1.is_empty(), "the v1 operator wrote");
        assert!(by_v0.is_empty(), "the v0 operator stopped writing: {by_v0:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_with_the_same_routing_value_never_both_write() {
    let cluster = Cluster::start("leader").await;
    let mark = cluster.audit_mark();
    let mut first = Operator::start(&cluster, OperatorOptions { identity: "op-a", ..Default::default() }).await;
    first.wait_logged("leading").await;
    let second = Operator::start(&cluster, OperatorOptions { identity: "op-b", ..Default::default() }).await;
    second.wait_logged("waiting for leadership").await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    cluster.wait_converged("demo").await;
    assert!(second.logged("leading").is_empty(), "the standby does not lead");
    if let Some(writes) = cluster.writes_by("op-b", mark) {
        assert!(writes.is_empty(), "the standby wrote: {writes:?}");
    }
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let lease = leases.get("model-orchestra-operator-v0").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("op-a"));

    // The leader steps down on SIGTERM; the standby takes over and reconciles a change.
    assert!(first.terminate(), "graceful exit on SIGTERM");
    second.wait_logged("leading").await;
    let changed = cr_with_apps("demo", &["chat", "embed"], None);
    cluster.apply_cr(&changed).await;
    cluster.wait_children("demo", &cluster.expected(&changed)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operations_endpoint_serves_health_readiness_and_metrics() {
    let cluster = Cluster::start("ops").await;
    let op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = cr_with_apps("demo", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_children("demo", &cluster.expected(&yaml)).await;
    let addr = op.metrics_addr().await;
    assert_eq!(http_get(&addr, "/healthz").await.0, 200);
    eventually("readyz is ok", || async { (http_get(&addr, "/readyz").await.0 == 200).then_some(()) }).await;
    let metrics = fetch_metrics(&addr).await;
    assert!(metric(&metrics, "model_orchestra_objects_applied_total") >= 4.0, "{metrics}");
    assert_eq!(metric(&metrics, "model_orchestra_leader"), 1.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_own_deployment_is_admitted_and_runs_in_a_namespace_enforcing_restricted() {
    let cluster = Cluster::start("restricted").await;
    if !cluster.has_fake_nodes("the_operators_own_deployment_is_admitted_and_runs_in_a_namespace_enforcing_restricted")
    {
        return;
    }
    let options = model_orchestra_api::deploy::operator::DeployOptions {
        namespace: format!("{}-op", cluster.namespace),
        image: "ghcr.io/titanml/model-orchestra-operator:test".into(),
        routing: "v9".into(),
        claim_unlabeled: false,
        api_version: None,
        release: None,
    };
    let objects = model_orchestra_api::deploy::operator::all(&options);
    assert_eq!(
        objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "the Namespace enforces restricted"
    );
    let yaml = model_orchestra_api::deploy::operator::all_yaml(&options);
    let dir = TempDir::new("restricted-manifests");
    let file = dir.0.join("operator.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new(local_cluster::tools::bin_dir().join("kubectl"))
        .args(["apply", "--server-side", "-f"])
        .arg(&file)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("would violate PodSecurity"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods: kube::Api<Pod> = kube::Api::namespaced(cluster.client.clone(), &options.namespace);
    eventually("the operator's pod runs", || async {
        let list = pods.list(&Default::default()).await.ok()?;
        list.items.iter().any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaled_objects_and_service_monitors_pass_their_real_crds() {
    let cluster = Cluster::start("optional-kinds").await;
    let _op = Operator::start(&cluster, OperatorOptions::default()).await;
    let yaml = format!(
        "{}      scaling:\n        enabled: true\n        spec:\n          fallback:\n            failureThreshold: 3\n            replicas: 2\n  gateway:\n    exportPrometheusMetrics: true\n",
        cr_with_apps("demo", &["chat"], None)
    );
    cluster.apply_cr(&yaml).await;
    let want = cluster.expected(&yaml);
    assert!(want.iter().any(|(k, _)| *k == Kind::ScaledObject) && want.iter().any(|(k, _)| *k == Kind::ServiceMonitor));
    cluster.wait_children("demo", &want).await;
    let so = cluster.api(Kind::ScaledObject).get("demo-model-orchestra-chat").await.unwrap();
    assert_eq!(so.data["spec"]["fallback"]["replicas"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_forgets_deleted_crs() {
    let cluster = Cluster::start("forget").await;
    let op = Operator::start(&cluster, OperatorOptions::default()).await;
    let names: Vec<String> = (0..30).map(|i| format!("cr-{i:02}")).collect();
    for name in &names {
        cluster
            .apply_cr(&format!(
                "apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata:\n  name: {name}\nspec:\n  gateway:\n    replicaCount: 0\n"
            ))
            .await;
    }
    let addr = op.metrics_addr().await;
    eventually("every CR is tracked", || async {
        (metric(&fetch_metrics(&addr).await, "model_orchestra_tracked_resources") == 30.0).then_some(())
    })
    .await;
    for name in &names {
        cluster.mo_api().delete(name, &Default::default()).await.unwrap();
    }
    eventually("deleted CRs are forgotten", || async {
        (metric(&fetch_metrics(&addr).await, "model_orchestra_tracked_resources") == 0.0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_an_admission_policy_refuses_is_only_dry_run_even_where_its_kinds_were_admitted() {
    let label = "no-nodeport-create";
    // A cluster of its own: every operator would dry-run for its policy.
    let cluster = Cluster::start_alone("refused-create", json!({"e2e.models.titanml.co/policy": label})).await;
    let op = Operator::start(&cluster, OperatorOptions { identity: "op-refused-create", ..Default::default() }).await;
    cluster.apply_cr(&cr_with_apps("first", &["chat"], None)).await;
    cluster.wait_converged("first").await;
    no_nodeport_policy(&cluster, label).await;
    let mark = cluster.audit_mark();

    let yaml = format!("{}  gateway:\n    service:\n      type: NodePort\n", cr_with_apps("second", &["chat"], None));
    cluster.apply_cr(&yaml).await;
    let cr = cluster.wait_reason("second", "Invalid").await;
    let message = ready_condition(&cr).unwrap()["message"].as_str().unwrap().to_string();
    assert!(message.contains("NodePort Services are not allowed here"), "carries the server's message: {message}");
    assert_eq!(cluster.child_names("second").await, BTreeSet::new(), "nothing created");
    if let Some(writes) = cluster.writes_by(&op.identity, mark) {
        let child_writes: Vec<_> =
            writes.iter().filter(|e| e.resource() != "modelorchestras" && !e.is_dry_run()).collect();
        assert!(child_writes.is_empty(), "only dry runs and the status: {child_writes:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_deleted_once_the_cr_is_ready_is_recreated_at_once_not_at_the_next_resync() {
    let cluster = Cluster::start("child-event").await;
    // The v1alpha1 line: its children's ownerReferences name v1alpha1, its CRs are read at
    // v1alpha2. Resyncs are 300 s apart, and no pod changes (there are none): only the
    // child's own event can bring it back.
    let _op = Operator::start(&cluster, OperatorOptions { identity: "op-child-event", ..Default::default() }).await;
    let yaml = format!(
        "{}  gateway:\n    replicaCount: 0\n  applicationTemplate:\n    replicaCount: 0\n",
        cr_with_apps("demo", &["chat"], None)
    );
    cluster.apply_cr(&yaml).await;
    cluster.wait_converged("demo").await;
    let want = cluster.expected(&yaml);
    // Past the grace in which a missing child is taken for a cache still catching up (and
    // the reconcile is requeued every second): from then on nothing is scheduled.
    tokio::time::sleep(Duration::from_secs(12)).await;

    cluster.delete(Kind::ConfigMap, "demo-model-orchestra-chat").await;
    cluster.wait_children("demo", &want).await;
    _op.dump_logs();
}
