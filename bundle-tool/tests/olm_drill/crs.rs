//! The steps both drills take alike: the admin's namespaces and shared CRD, the RBAC each
//! line gets, the user's CRs reaching their lines, and what an upgrade of the v0 line must
//! keep. Each step is a function named after what it checks.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, ListParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use crate::drill::{self, condition, describe_condition, line_user, Drill, Maintainer};

/// The field manager of every operator write.
const FIELD_MANAGER: &str = "model-orchestra-operator";

// --- the maintainer ------------------------------------------------------------------------

/// Every release as released — its bundle (`bundles/VERSION`, verified against
/// `bundles/releases.yaml`) and the operator image its CSV names, built from its release
/// commit's binary, both at their ghcr.io paths in the cluster's registry — and the released
/// catalog, `catalog/configs` as checked in. Returns the operator images the CSVs name.
pub fn the_maintainer_publishes_the_released_catalog(m: &Maintainer) -> Vec<String> {
    let images = m.released_versions().iter().map(|v| m.push_release(v)).collect();
    m.publish_released_catalog("v1.0.0");
    images
}

// --- the cluster admin ---------------------------------------------------------------------

/// The namespaces OLM installs the lines into, made by the admin with the annotations that
/// place their pods on the real node (PodNodeSelector, PodTolerationRestriction), as an admin
/// pins operators to a node pool; the subscriptions' manifests then apply over them.
pub async fn the_admin_pins_the_operators_namespaces_to_the_real_node(d: &Drill) {
    for line in ["v0", "v1"] {
        d.cluster()
            .run_pods_for_real(&format!("model-orchestra-{line}"))
            .await
            .unwrap_or_else(|e| panic!("pin model-orchestra-{line} to the real node: {e}"));
    }
}

/// `bundle-tool crds | kubectl apply --server-side -f -`
pub fn the_admin_applies_the_shared_crd(d: &Drill) {
    let crds = d.maintainer.output(&["crds"]);
    d.kubectl(&["apply", "--server-side", "-f", "-"], Some(&crds));
}

/// The seconds from when the admin's object for each line was created (a Subscription, a
/// ClusterExtension: `created`, by line) to when its operator's pod became Ready, from the
/// objects' own timestamps: `from … to each line's operator pod Ready: v0 N s, v1 M s`.
pub fn subscription_to_ready(what: &str, created: &[(&str, Time)], ready: &[(&'static str, Pod)]) -> String {
    let each: Vec<String> = ready
        .iter()
        .map(|(line, pod)| {
            let became = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .and_then(|c| c.last_transition_time.clone());
            let since = created.iter().find(|(l, _)| l == line).map(|(_, t)| t.0);
            match (since, became) {
                (Some(since), Some(at)) => format!("{line} {} s", at.0.duration_since(since).as_secs()),
                _ => format!("{line} ?"),
            }
        })
        .collect();
    format!("from the {what} to each line's operator pod Ready: {}", each.join(", "))
}

/// Each line's operator runs in the pod of the Deployment OLM made from its CSV, under the
/// ServiceAccount OLM made, on the real node, and passes its readiness probe. Returns each
/// line's pod.
pub async fn each_lines_operator_runs_in_the_pod_olm_made(d: &Drill) -> Vec<(&'static str, Pod)> {
    let mut ready = Vec::new();
    for line in ["v0", "v1"] {
        let (namespace, name) = (format!("model-orchestra-{line}"), format!("model-orchestra-operator-{line}"));
        Api::<Deployment>::namespaced(d.client(), &namespace)
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("OLM did not create the Deployment {namespace}/{name}: {e}"));
        Api::<ServiceAccount>::namespaced(d.client(), &namespace)
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("OLM did not create the ServiceAccount {namespace}/{name}: {e}"));
        let pods = Api::<Pod>::namespaced(d.client(), &namespace);
        let selector = format!("app.kubernetes.io/instance={name}");
        let pod = d
            .wait_until(120, &format!("the {line} operator's pod is Ready"), || async {
                let list = pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| e.to_string())?;
                let ready = |p: &Pod| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                };
                match list.items.iter().find(|p| !ready(p)) {
                    None if !list.items.is_empty() => Ok(list.items[0].clone()),
                    None => Err(format!("no pod matches {selector}")),
                    Some(p) => Err(format!(
                        "pod {} is not Ready: {:?}",
                        p.name_any(),
                        p.status.as_ref().map(|s| &s.container_statuses)
                    )),
                }
            })
            .await;
        let spec = pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.service_account_name.as_deref(), Some(name.as_str()), "the {line} pod's ServiceAccount");
        assert_eq!(
            spec.node_name.as_deref(),
            Some(local_cluster::REAL_NODE_NAME),
            "the {line} operator's pod runs on the real node"
        );
        let image = spec.containers.first().and_then(|c| c.image.clone()).unwrap_or_default();
        d.step(&format!("the {line} operator runs in its pod {} from {image}", pod.name_any()));
        ready.push((line, pod));
    }
    ready
}

/// The RBAC OLM made from each CSV, as the API server's authorizer answers for each line's
/// ServiceAccount: what the operator needs, not more; 1.0.0 may set blockOwnerDeletion
/// (update on modelorchestras/finalizers), which 0.1.0's CSV lacks.
pub async fn each_line_gets_the_rbac_its_csv_asks_for(d: &Drill) {
    for line in ["v0", "v1"] {
        let own = format!("model-orchestra-{line}");
        for (verb, resource, namespace) in [
            ("watch", "modelorchestras.models.titanml.co", None),
            ("patch", "deployments.apps", Some("drill-x")),
            ("update", "leases.coordination.k8s.io", Some(own.as_str())),
        ] {
            assert!(
                d.can(line, verb, resource, namespace).await,
                "OLM's RBAC for the {line} line lacks what its CSV grants: {verb} {resource} in {}",
                namespace.unwrap_or("every namespace")
            );
        }
        assert!(!d.can(line, "delete", "nodes", None).await, "the {line} line may delete Nodes");
    }
    let finalizers = "modelorchestras.models.titanml.co/finalizers";
    assert!(d.can("v1", "update", finalizers, None).await, "1.0.0 may not set blockOwnerDeletion");
    assert!(!d.can("v0", "update", finalizers, None).await, "0.1.0 was expected to lack modelorchestras/finalizers");
    let deployments = Api::<Deployment>::all(d.client())
        .list(&ListParams::default().labels("app.kubernetes.io/name=model-orchestra-operator"))
        .await
        .expect("list the operators' Deployments");
    let names: Vec<String> =
        deployments.items.iter().map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())).collect();
    d.step(&format!("OLM installed both lines: {} with their RBAC", names.join(" ")));
}

// --- 4. CRs reach their line ---------------------------------------------------------------

/// A sample CR renamed into `namespace`, labelled for a line when `label` is given.
pub fn sample_cr(file: &str, namespace: &str, name: &str, label: Option<&str>) -> String {
    let path = drill::root().join("config/samples").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cr: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    cr["metadata"] = json!({"name": name, "namespace": namespace});
    if let Some(label) = label {
        cr["metadata"]["labels"] = json!({"operatorVersion": label});
    }
    serde_yaml::to_string(&cr).expect("a CR as YAML")
}

pub fn modelorchestras(d: &Drill, namespace: &str) -> Api<DynamicObject> {
    d.namespaced("models.titanml.co/v1alpha2", "ModelOrchestra", "modelorchestras", namespace)
}

/// The release a CR's status names (`status.operatorVersion`).
pub async fn operator_version(d: &Drill, namespace: &str, name: &str) -> String {
    let cr = modelorchestras(d, namespace).get(name).await.unwrap_or_else(|e| panic!("{namespace}/{name}: {e}"));
    cr.data["status"]["operatorVersion"].as_str().unwrap_or("(none)").to_string()
}

/// Waits until the CR's Ready condition is True for its current generation.
pub async fn wait_ready(d: &Drill, limit: u64, what: &str, namespace: &str, name: &str) -> DynamicObject {
    let api = modelorchestras(d, namespace);
    d.wait_until(limit, what, || async {
        let cr = api.get(name).await.map_err(|e| e.to_string())?;
        let current = cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation;
        match condition(&cr, "Ready") {
            Some(c) if c["status"] == "True" && current => Ok(cr),
            _ => Err(format!(
                "{}; observedGeneration {} of {}",
                describe_condition(&cr, "Ready"),
                cr.data["status"]["observedGeneration"],
                cr.metadata.generation.unwrap_or_default()
            )),
        }
    })
    .await
}

/// The set of the given strings, for comparing with the audit log's answers.
pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Every patch the operators made to the CR's objects in `namespace` (its children and its
/// status) names the operator's field manager, so a line taking a CR over owns the same
/// fields. Events are left out: kube-runtime's Recorder updates a repeated Event with a
/// merge patch that names no field manager.
pub fn every_patch_names_the_operators_field_manager(d: &Drill, namespace: &str) {
    let patches: Vec<_> = d.operator_patches(namespace).into_iter().filter(|e| e.resource() != "events").collect();
    assert!(!patches.is_empty(), "no operator patched anything in {namespace}");
    let others: Vec<String> = patches
        .iter()
        .filter(|e| e.field_manager().as_deref() != Some(FIELD_MANAGER))
        .map(|e| format!("{} {} ({}): {}", e.user.username, e.verb, e.user_agent, e.request_uri))
        .collect();
    assert!(
        others.is_empty(),
        "patches in {namespace} naming another field manager than {FIELD_MANAGER}:\n{}",
        others.join("\n")
    );
}

/// KEDA's ScaledObject and the Prometheus Operator's ServiceMonitor CRDs, which the samples
/// use, installed after the operators started, as happens (the lines notice them within
/// 15 s and restart their controllers with those watches; 0.1.0 did not); then, as the
/// user: an unlabelled v1alpha2 CR in drill-a (whose embedder keeps its models on the claim
/// embedder-models, here bound to a hostPath volume, before the CR), an unlabelled v1alpha1 CR in drill-b
/// and a v1alpha1 CR labelled for v0 in drill-c, each `kubectl apply -f -`.
pub async fn the_user_applies_three_crs(d: &Drill) {
    for entry in std::fs::read_dir(local_cluster::tools::share_dir().join("crds")).expect("share/crds") {
        let path = entry.expect("a CRD file").path();
        d.apply_yaml(&std::fs::read_to_string(&path).expect("a CRD")).await;
    }
    for namespace in ["drill-a", "drill-b", "drill-c"] {
        d.apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})).await;
    }
    d.apply_yaml(
        "apiVersion: v1
kind: PersistentVolume
metadata: {name: drill-a-embedder-models}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  storageClassName: drill-manual
  hostPath: {path: /tmp/drill-a-embedder-models}
  claimRef: {namespace: drill-a, name: embedder-models}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: embedder-models, namespace: drill-a}
spec: {accessModes: [ReadWriteMany], storageClassName: drill-manual, resources: {requests: {storage: 1Gi}}}
",
    )
    .await;
    // As a user who prepared the storage: the claim bound before the CR that mounts it.
    // (A pod tried while its claim is still unbound is Unschedulable for a moment, and 1.0.0
    // reports that as a Warning; later releases wait for the volume.)
    let claims = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(d.client(), "drill-a");
    d.wait_until(120, "the claim embedder-models is Bound", || async {
        let claim = claims.get("embedder-models").await.map_err(|e| e.to_string())?;
        let phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
        if phase == "Bound" {
            Ok(())
        } else {
            Err(phase)
        }
    })
    .await;
    for (file, namespace, name, label) in [
        ("modelorchestra-v1alpha2.yaml", "drill-a", "unlabelled-v1alpha2", None),
        ("modelorchestra.yaml", "drill-b", "unlabelled-v1alpha1", None),
        ("modelorchestra.yaml", "drill-c", "labelled-v0", Some("v0")),
    ] {
        d.kubectl(&["apply", "-f", "-"], Some(&sample_cr(file, namespace, name, label)));
    }
}

/// Without a label, a v1alpha2 CR goes to the line serving v1alpha2 (v1, 1.0.0): Ready, no
/// Warning Event, and every write in its namespace is the v1 line's, with the operator's
/// field manager.
pub async fn an_unlabelled_v1alpha2_cr_is_the_v1_lines(d: &Drill) {
    let cr = wait_ready(d, 120, "the unlabelled v1alpha2 CR is Ready", "drill-a", "unlabelled-v1alpha2").await;
    assert_eq!(d.writers("drill-a"), set(&[&line_user("v1")]), "drill-a (the unlabelled v1alpha2 CR) written by");
    every_patch_names_the_operators_field_manager(d, "drill-a");
    assert_eq!(
        operator_version(d, "drill-a", "unlabelled-v1alpha2").await,
        "1.0.0",
        "the operator the v1alpha2 CR's status names"
    );
    // A correct CR gets no warning, right after OLM installed its line too.
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(d.client(), "drill-a")
        .list(&ListParams::default())
        .await
        .expect("the Events of drill-a");
    let warnings: Vec<String> = events
        .items
        .iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning") && e.involved_object.kind.as_deref() == Some("ModelOrchestra")
        })
        .map(|e| format!("{}: {}", e.reason.clone().unwrap_or_default(), e.message.clone().unwrap_or_default()))
        .collect();
    assert_eq!(warnings, Vec::<String>::new(), "Warning Events on the unlabelled v1alpha2 CR");
    d.step(&format!(
        "the unlabelled v1alpha2 CR is the v1 line's, without a warning: {}",
        describe_condition(&cr, "Ready")
    ));
}

/// 0.1.0's RBAC lacks update on modelorchestras/finalizers, which an API server enforcing
/// owner-reference permissions (this one, and OpenShift's) requires of an owner reference
/// with blockOwnerDeletion: the released 0.1.0 is refused on its first write, and says so.
pub async fn released_0_1_0_is_refused_its_first_write(d: &Drill) {
    let api = modelorchestras(d, "drill-c");
    let cr = d
        .wait_until(60, "0.1.0 reports its refused write (blockOwnerDeletion) on the labelled CR", || async {
            let cr = api.get("labelled-v0").await.map_err(|e| e.to_string())?;
            let conditions = cr.data["status"]["conditions"].to_string();
            if conditions.contains("blockOwnerDeletion") {
                Ok(cr)
            } else {
                Err(conditions)
            }
        })
        .await;
    let message = describe_condition(&cr, "Ready");
    d.step(&format!(
        "0.1.0 as released is refused by the API server: {}…",
        message.chars().take(160).collect::<String>()
    ));
}

/// The book's workaround for a cluster on 0.1.0 — grant it the finalizers — as the user
/// types it; the CR, retried (annotated), is then 0.1.0's alone.
pub async fn granted_the_finalizers_0_1_0_takes_the_labelled_v1alpha1_cr(d: &Drill) {
    d.kubectl(
        &[
            "create",
            "clusterrole",
            "mo-finalizers",
            "--verb=update",
            "--resource=modelorchestras.models.titanml.co/finalizers",
        ],
        None,
    );
    d.kubectl(
        &[
            "create",
            "clusterrolebinding",
            "mo-finalizers",
            "--clusterrole=mo-finalizers",
            "--serviceaccount=model-orchestra-v0:model-orchestra-operator-v0",
        ],
        None,
    );
    d.kubectl(&["annotate", "-n", "drill-c", "modelorchestra/labelled-v0", "drill/retry=1"], None);
    wait_ready(d, 120, "the labelled v1alpha1 CR is Ready under 0.1.0", "drill-c", "labelled-v0").await;
    assert_eq!(d.writers("drill-c"), set(&[&line_user("v0")]), "drill-c (the labelled v1alpha1 CR) written by");
    assert_eq!(
        operator_version(d, "drill-c", "labelled-v0").await,
        "0.1.0",
        "the operator the labelled CR's status names"
    );
}

/// 0.1.0 takes labelled CRs only, and the v1 line leaves v1alpha1 writes alone: nobody has
/// written in drill-b.
pub fn an_unlabelled_v1alpha1_cr_waits_for_a_line_that_routes_it(d: &Drill) {
    assert_eq!(
        d.writers("drill-b"),
        BTreeSet::new(),
        "the unlabelled v1alpha1 CR was written before a line routing it was installed"
    );
    d.step("the labelled v1alpha1 CR is 0.1.0's: Ready; the unlabelled v1alpha1 CR waits (0.1.0 takes labelled CRs only; v1 leaves v1alpha1 writes alone)");
}

// --- 5. the upgrade to 0.1.1 ---------------------------------------------------------------

/// The objects a CR's line made in its namespace, `Kind/name` → UID.
#[derive(Debug, PartialEq)]
pub struct Children(pub BTreeMap<String, String>);

impl Children {
    pub async fn of(d: &Drill, namespace: &str) -> Children {
        async fn uids<K>(d: &Drill, namespace: &str, kind: &str, into: &mut BTreeMap<String, String>)
        where
            K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
                + Clone
                + serde::de::DeserializeOwned
                + std::fmt::Debug,
            K::DynamicType: Default,
        {
            let list = Api::<K>::namespaced(d.client(), namespace)
                .list(&ListParams::default())
                .await
                .unwrap_or_else(|e| panic!("list {kind}s in {namespace}: {e}"));
            for o in list.items {
                // What the cluster puts in every namespace is not a child.
                if matches!(
                    (kind, o.name_any().as_str()),
                    ("ConfigMap", "kube-root-ca.crt") | ("ServiceAccount", "default")
                ) {
                    continue;
                }
                into.insert(format!("{kind}/{}", o.name_any()), o.uid().unwrap_or_default());
            }
        }
        let mut children = BTreeMap::new();
        uids::<Deployment>(d, namespace, "Deployment", &mut children).await;
        uids::<Service>(d, namespace, "Service", &mut children).await;
        uids::<ConfigMap>(d, namespace, "ConfigMap", &mut children).await;
        uids::<ServiceAccount>(d, namespace, "ServiceAccount", &mut children).await;
        Children(children)
    }
}

/// The operator's pod is replaced: OLM's Deployment rolls to 0.1.1's image, 0.1.0's pod goes;
/// meanwhile the workaround goes (0.1.1's own RBAC has the finalizers) and the CR is edited.
pub async fn the_v0_pod_is_replaced_while_the_cr_is_edited(d: &Drill, old: &Pod) {
    d.kubectl(&["delete", "clusterrolebinding/mo-finalizers", "clusterrole/mo-finalizers"], None);
    assert!(
        d.can("v0", "update", "modelorchestras.models.titanml.co/finalizers", None).await,
        "0.1.1's own RBAC lacks modelorchestras/finalizers"
    );
    d.kubectl(
        &[
            "patch",
            "-n",
            "drill-c",
            "modelorchestra/labelled-v0",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"applications":{"hello-world":{"podLabels":{"drill":"edited-during-upgrade"}}}}}"#,
        ],
        None,
    );
    let deployments = Api::<Deployment>::namespaced(d.client(), "model-orchestra-v0");
    d.wait_until(120, "the upgraded v0 Deployment's pod is Ready (updated/ready/replicas 1/1/1)", || async {
        let deployment = deployments.get("model-orchestra-operator-v0").await.map_err(|e| e.to_string())?;
        let status = deployment.status.unwrap_or_default();
        let seen = format!(
            "{}/{}/{}",
            status.updated_replicas.unwrap_or(0),
            status.ready_replicas.unwrap_or(0),
            status.replicas.unwrap_or(0)
        );
        if seen == "1/1/1" {
            Ok(())
        } else {
            Err(seen)
        }
    })
    .await;
    let pods = d.line_pods("v0").await;
    let new = pods.iter().find(|p| p.uid() != old.uid()).expect("a new v0 pod");
    let image =
        |p: &Pod| p.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone()).unwrap_or_default();
    assert!(image(new).ends_with(":v0.1.1"), "the new pod runs 0.1.1's image: {}", image(new));
    let pods = Api::<Pod>::namespaced(d.client(), "model-orchestra-v0");
    d.wait_until(60, "0.1.0's pod is gone", || async {
        match pods.get_opt(&old.name_any()).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(p) => Err(format!("{} is still there", p.name_any())),
        }
    })
    .await;
    d.step(&format!(
        "the v0 pod was replaced: {} ({}) by {} ({})",
        old.name_any(),
        image(old),
        new.name_any(),
        image(new)
    ));
}

/// 0.1.1 applies the edit made while no v0 operator ran, and its CR is Ready again with the
/// same children (same UIDs: nothing recreated); the v1 line's children did not change.
pub async fn the_upgrade_applies_the_edit_and_keeps_the_childrens_uids(
    d: &Drill,
    before: &Children,
    before_v1: &Children,
) {
    let deployments = Api::<Deployment>::namespaced(d.client(), "drill-c");
    d.wait_until(120, "the edit made during the upgrade reaches the CR's Deployment", || async {
        let list = deployments.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let labels: Vec<String> = list
            .items
            .iter()
            .filter_map(|o| o.spec.as_ref()?.template.metadata.as_ref()?.labels.as_ref()?.get("drill").cloned())
            .collect();
        if labels == ["edited-during-upgrade"] {
            Ok(())
        } else {
            Err(format!("the Deployments' drill labels: {labels:?}"))
        }
    })
    .await;
    wait_ready(d, 120, "the labelled v0 CR is Ready after the upgrade", "drill-c", "labelled-v0").await;
    let after = Children::of(d, "drill-c").await;
    assert_eq!(&after, before, "the children of the v0 CR (Kind/name → UID) after the upgrade, and before");
    assert_eq!(&Children::of(d, "drill-a").await, before_v1, "the v1 line's children changed during the v0 upgrade");
    d.step(&format!(
        "0.1.1 took over: the {} children of the v0 CR kept their UIDs, the edit made meanwhile applied",
        after.0.len()
    ));
}

/// 0.1.1 routes unlabelled CRs by apiVersion: the waiting v1alpha1 CR is now the v0 line's.
/// Every namespace is still written by its line alone, with the operator's field manager,
/// and the v0 CRs' status names 0.1.1.
pub async fn the_waiting_unlabelled_v1alpha1_cr_becomes_0_1_1s(d: &Drill) {
    wait_ready(d, 120, "the unlabelled v1alpha1 CR is Ready under 0.1.1", "drill-b", "unlabelled-v1alpha1").await;
    let (v0, v1) = (line_user("v0"), line_user("v1"));
    assert_eq!(d.writers("drill-b"), set(&[&v0]), "drill-b (the unlabelled v1alpha1 CR) written by");
    assert_eq!(d.writers("drill-a"), set(&[&v1]), "drill-a (the unlabelled v1alpha2 CR) written by");
    assert_eq!(d.writers("drill-c"), set(&[&v0]), "drill-c (the labelled v1alpha1 CR) written by");
    for namespace in ["drill-b", "drill-c"] {
        every_patch_names_the_operators_field_manager(d, namespace);
    }
    for (namespace, name) in [("drill-c", "labelled-v0"), ("drill-b", "unlabelled-v1alpha1")] {
        assert_eq!(
            operator_version(d, namespace, name).await,
            "0.1.1",
            "the operator {namespace}/{name}'s status names"
        );
    }
    d.step("the unlabelled v1alpha1 CR is the v0 line's");
}
