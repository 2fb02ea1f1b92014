//! Day one, as a user meets it, on the real control plane: everyday kubectl commands —
//! which write at the cluster's preferred version, `v1alpha2` — never move a CR to another
//! contract or go unnoticed; a CR no running line serves is visible; a rollout that cannot
//! finish is never `Ready`; every mistake is reported at once.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::*;
use kube::ResourceExt;
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::ApiVersion;
use serde_json::{json, Value};

/// Both lines as the book runs them: the `v1alpha1` line and the `v1alpha2` line, each
/// taking unlabelled CRs of its version.
async fn both_lines(cluster: &Cluster) -> (Operator, Operator) {
    let v0 = Operator::start(cluster, OperatorOptions { identity: "op-v0", ..Default::default() }).await;
    let v1 = OperatorOptions { routing: "v1", api_version: "v1alpha2", identity: "op-v1", ..Default::default() };
    (v0, Operator::start(cluster, v1).await)
}

/// A `v1alpha1` CR with one CPU application `chat`, created as the book does
/// (`kubectl apply -f`, client-side, at the version the manifest names).
fn create_v1alpha1(cluster: &Cluster, name: &str) {
    cluster.kubectl_with_input(&["apply", "-f", "-"], &cr_with_apps(name, &["chat"], None));
}

/// What makes a stack what it is: its children (kind, name, UID), the application's image
/// and the root key of its `config.yaml`.
async fn identity(cluster: &Cluster, name: &str) -> (BTreeMap<(Kind, String), String>, String, String) {
    let children: BTreeMap<(Kind, String), String> = cluster
        .children(name)
        .await
        .into_iter()
        .map(|(kind, o)| ((kind, o.name_any()), o.uid().unwrap_or_default()))
        .collect();
    let deployment = cluster.api(Kind::Deployment).get(&format!("{name}-model-orchestra-chat")).await.unwrap();
    let image = deployment.data["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap().to_string();
    let config = cluster.api(Kind::ConfigMap).get(&format!("{name}-model-orchestra-chat")).await.unwrap();
    let root = config.data["data"]["config.yaml"].as_str().unwrap().lines().next().unwrap().to_string();
    (children, image, root)
}

/// Waits until the serving line has reconciled the CR's current generation, and it is Ready.
async fn settled(cluster: &Cluster, name: &str) -> Value {
    eventually(&format!("{name}'s current generation is reconciled and Ready"), || async {
        let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get(name).await.ok()?;
        let observed = cr.data["status"]["observedGeneration"].as_i64();
        let ready = ready_condition(&cr).is_some_and(|c| c["status"] == "True");
        (observed == cr.metadata.generation && ready).then(|| serde_json::to_value(&cr).unwrap())
    })
    .await
}

/// The rows of a `kubectl get` table, each cell under its header's column (kubectl leaves a
/// missing value blank).
fn table_rows(table: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let starts: Vec<(usize, &str)> = header
        .split_whitespace()
        .map(|h| (header.find(&format!("{h} ")).or_else(|| header.rfind(h)).unwrap(), h))
        .collect();
    lines
        .map(|line| {
            starts
                .iter()
                .enumerate()
                .map(|(i, (start, h))| {
                    let end = starts.get(i + 1).map_or(line.len(), |(s, _)| *s).min(line.len());
                    (h.to_string(), line.get(*start..end).unwrap_or_default().trim().to_string())
                })
                .collect()
        })
        .collect()
}

/// Writes by `identity` to the CR's children since `mark` (the audit log).
fn child_writes(cluster: &Cluster, identity: &str, mark: u64) -> Vec<String> {
    let writes = cluster.writes_by(identity, mark).expect("the local cluster's audit log");
    writes.iter().filter(|e| e.resource() != "modelorchestras").map(|e| format!("{} {}", e.verb, e.name())).collect()
}

/// Every everyday edit of an unlabelled `v1alpha1` CR, each written at the preferred
/// version: applied by the `v1alpha1` line only, the stack the same stack.
async fn everyday_edits_stay_with_the_v1alpha1_line(cluster: &Cluster, v1_running: bool) {
    let name = "edited";
    create_v1alpha1(cluster, name);
    let before = settled(cluster, name).await;
    assert_eq!(before["status"]["servedAs"], "v1alpha1", "{}", before["status"]);
    assert_eq!(before["status"]["line"], "v0");
    let (children, image, root) = identity(cluster, name).await;
    assert_eq!(root, "model-orchestra:", "the v1alpha1 contract's config.yaml");
    assert!(
        children.contains_key(&(Kind::Service, format!("{name}-model-orchestra-chat"))),
        "v1alpha1 has per-application Services"
    );
    let mark = cluster.audit_mark();

    // kubectl patch (preferred version): a new replica count.
    cluster.kubectl(&[
        "patch",
        "modelorchestra",
        name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"applications":{"chat":{"replicaCount":2}}}}"#,
    ]);
    let after = settled(cluster, name).await;
    let deployment = cluster.api(Kind::Deployment).get(&format!("{name}-model-orchestra-chat")).await.unwrap();
    assert_eq!(deployment.data["spec"]["replicas"], 2, "the patch was applied");
    assert_eq!(after["status"]["servedAs"], "v1alpha1");

    // An edit-style update: the object read at v1alpha2, changed, written back whole.
    let mut current = serde_json::to_value(cluster.mo_api_at(ApiVersion::V1alpha2).get(name).await.unwrap()).unwrap();
    current["spec"]["applications"]["chat"]["podLabels"] = json!({"edited": "yes"});
    current.as_object_mut().unwrap().remove("status");
    cluster.kubectl_with_input(&["replace", "-f", "-"], &serde_json::to_string(&current).unwrap());
    settled(cluster, name).await;
    let deployment = cluster.api(Kind::Deployment).get(&format!("{name}-model-orchestra-chat")).await.unwrap();
    assert_eq!(deployment.data["spec"]["template"]["metadata"]["labels"]["edited"], "yes", "the update was applied");

    // kubectl label and annotate: metadata only, at the preferred version.
    cluster.kubectl(&["label", "modelorchestra", name, "team=a"]);
    cluster.kubectl(&["annotate", "modelorchestra", name, "note=hello"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let last = settled(cluster, name).await;
    assert_eq!(last["status"]["servedAs"], "v1alpha1");
    assert_eq!(last["status"]["line"], "v0");

    let (children_after, image_after, root_after) = identity(cluster, name).await;
    assert_eq!(children_after, children, "the same children, with the same UIDs");
    assert_eq!((image_after, root_after), (image, root), "the same contract: image and config.yaml root");
    assert!(!child_writes(cluster, "op-v0", mark).is_empty(), "the v1alpha1 line applied the edits");
    if v1_running {
        assert_eq!(child_writes(cluster, "op-v1", mark), Vec::<String>::new(), "the v1alpha2 line wrote nothing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_edits_at_the_preferred_version_stay_with_the_v1alpha1_line_with_both_lines_running() {
    let cluster = Cluster::start("edits-both").await;
    if cluster.audit().is_none() {
        return eprintln!("skipped on an external cluster: it needs the audit log");
    }
    let _lines = both_lines(&cluster).await;
    everyday_edits_stay_with_the_v1alpha1_line(&cluster, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_edits_at_the_preferred_version_are_applied_with_only_the_v1alpha1_line_running() {
    let cluster = Cluster::start("edits-one").await;
    if cluster.audit().is_none() {
        return eprintln!("skipped on an external cluster: it needs the audit log");
    }
    let _v0 = Operator::start(&cluster, OperatorOptions { identity: "op-v0", ..Default::default() }).await;
    everyday_edits_stay_with_the_v1alpha1_line(&cluster, false).await;
}

/// `kubectl label mo X operatorVersion=v0`, then `kubectl label mo X operatorVersion-`, on a
/// CR the v1 line serves: the label moves X to the v0 line, which records that it serves X
/// as `v1alpha1`; without the label, routing's next rule is that record, so X stays the v0
/// line's — the label chose a line, and removing it does not undo the choice (the
/// `models.titanml.co/api-version` annotation moves X back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_label_added_then_removed_leaves_the_cr_with_the_line_the_label_chose() {
    let cluster = Cluster::start("label-flip").await;
    if cluster.audit().is_none() {
        return eprintln!("skipped on an external cluster: it needs the audit log");
    }
    let _lines = both_lines(&cluster).await;
    let name = "flipped";
    let v1alpha2 =
        cr_with_apps(name, &["chat"], None).replace("models.titanml.co/v1alpha1", "models.titanml.co/v1alpha2");
    cluster.kubectl_with_input(&["apply", "-f", "-"], &v1alpha2);
    let first = settled(&cluster, name).await;
    assert_eq!((&first["status"]["line"], &first["status"]["servedAs"]), (&json!("v1"), &json!("v1alpha2")));

    cluster.kubectl(&["label", "modelorchestra", name, "operatorVersion=v0"]);
    eventually("the v0 line serves the labelled CR", || async {
        let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get(name).await.ok()?;
        (cr.data["status"]["line"] == "v0" && ready_condition(&cr)?["status"] == "True").then_some(())
    })
    .await;
    let labelled = settled(&cluster, name).await;
    assert_eq!(labelled["status"]["servedAs"], "v1alpha1", "the v0 line records the version it serves");

    cluster.kubectl(&["label", "modelorchestra", name, "operatorVersion-"]);
    let mark = cluster.audit_mark();
    // A change for the serving line to apply, so a line that took the CR back would write.
    cluster.kubectl(&[
        "patch",
        "modelorchestra",
        name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"applications":{"chat":{"replicaCount":2}}}}"#,
    ]);
    let unlabelled = settled(&cluster, name).await;
    let deployment = cluster.api(Kind::Deployment).get(&format!("{name}-model-orchestra-chat")).await.unwrap();
    assert_eq!(deployment.data["spec"]["replicas"], 2, "the patch after the label's removal was applied");
    assert_eq!(
        (&unlabelled["status"]["line"], &unlabelled["status"]["servedAs"]),
        (&json!("v0"), &json!("v1alpha1")),
        "without the label, the line that recorded serving it"
    );
    assert!(!child_writes(&cluster, "op-v0", mark).is_empty(), "the v0 line applied the patch");
    assert_eq!(child_writes(&cluster, "op-v1", mark), Vec::<String>::new(), "the v1 line did not take the CR back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_version_annotation_moves_a_cr_and_the_move_stays() {
    let cluster = Cluster::start("move").await;
    let _lines = both_lines(&cluster).await;
    let name = "moving";
    create_v1alpha1(&cluster, name);
    settled(&cluster, name).await;

    cluster.kubectl(&["annotate", "modelorchestra", name, "models.titanml.co/api-version=v1alpha2"]);
    let moved = eventually("the v1alpha2 line serves the moved CR", || async {
        let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get(name).await.ok()?;
        (cr.data["status"]["servedAs"] == "v1alpha2" && ready_condition(&cr)?["status"] == "True").then_some(cr)
    })
    .await;
    assert_eq!(moved.data["status"]["line"], "v1");
    let (children, _, root) = identity(&cluster, name).await;
    assert_eq!(root, "takeoff:", "rendered by the v1alpha2 contract");
    eventually("the per-application Service of v1alpha1 is pruned", || async {
        let names: Vec<(Kind, String)> = cluster.child_names(name).await.into_iter().collect();
        (!names.contains(&(Kind::Service, format!("{name}-model-orchestra-chat")))).then_some(())
    })
    .await;

    // The move is recorded: removing the annotation does not move it back.
    cluster.kubectl(&["annotate", "modelorchestra", name, "models.titanml.co/api-version-"]);
    cluster.kubectl(&[
        "patch",
        "modelorchestra",
        name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"applications":{"chat":{"replicaCount":2}}}}"#,
    ]);
    let after = settled(&cluster, name).await;
    assert_eq!(after["status"]["servedAs"], "v1alpha2");
    let (children_after, _, root_after) = identity(&cluster, name).await;
    assert_eq!(root_after, "takeoff:");
    let deployment_uid =
        |c: &BTreeMap<(Kind, String), String>| c[&(Kind::Deployment, format!("{name}-model-orchestra-chat"))].clone();
    assert_eq!(deployment_uid(&children_after), deployment_uid(&children), "the same Deployment throughout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_of_another_version_is_refused_naming_how_to_move_and_nothing_is_written() {
    let cluster = Cluster::start("foreign-field").await;
    let _v0 = Operator::start(&cluster, OperatorOptions { identity: "op-v0", ..Default::default() }).await;
    let name = "foreign";
    create_v1alpha1(&cluster, name);
    settled(&cluster, name).await;
    let mark = cluster.audit_mark();

    // modelsVolume exists in v1alpha2 only; kubectl writes at v1alpha2, which accepts it.
    cluster.kubectl(&[
        "patch",
        "modelorchestra",
        name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"applications":{"chat":{"modelsVolume":{"name":"models","emptyDir":{}}}}}}"#,
    ]);
    let cr = cluster.wait_reason(name, "RenderFailed").await;
    let message = ready_condition(&cr).unwrap()["message"].as_str().unwrap().to_string();
    assert!(message.contains("spec.applications.chat.modelsVolume"), "{message}");
    assert!(
        message.contains("served as v1alpha1") && message.contains("models.titanml.co/api-version=v1alpha2"),
        "{message}"
    );
    if cluster.audit().is_some() {
        assert_eq!(child_writes(&cluster, "op-v0", mark), Vec::<String>::new(), "nothing applied or pruned");
    }
    // The field survives the line's status writes (they are at the storage version).
    let stored = cluster.mo_api_at(ApiVersion::V1alpha2).get(name).await.unwrap();
    assert!(stored.data["spec"]["applications"]["chat"]["modelsVolume"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_no_running_line_serves_is_visible_and_said_once() {
    let cluster = Cluster::start("unserved").await;
    let options =
        OperatorOptions { identity: "op-v0", extra_args: &["--unserved-after-seconds", "3"], ..Default::default() };
    let _v0 = Operator::start(&cluster, options).await;
    let cr = json!({
        "apiVersion": "models.titanml.co/v1alpha2",
        "kind": "ModelOrchestra",
        "metadata": {"name": "waiting", "namespace": cluster.namespace},
        "spec": {"applications": {"chat": {"readerConfig": {"modelName": "org/m", "device": "cpu"}}}}
    });
    cluster.kubectl_with_input(&["apply", "-f", "-"], &serde_json::to_string(&cr).unwrap());

    let events = || async {
        let list = cluster.kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=waiting,reason=NotServed",
            "-o",
            "json",
        ]);
        serde_json::from_str::<Value>(&list).unwrap()["items"].as_array().cloned().unwrap_or_default()
    };
    let found = eventually("a NotServed Event on the CR", || async { events().await.into_iter().next() }).await;
    let note = found["message"].as_str().or(found["note"].as_str()).unwrap_or_default().to_string();
    assert!(note.contains("v1alpha2") && note.contains("--api-version v1alpha2"), "{note}");
    // kubectl get shows it: a generation, and no reconciled one.
    let table = cluster.kubectl(&["get", "modelorchestra", "waiting"]);
    let row = &table_rows(&table)[0];
    let columns: Vec<&str> = row.keys().map(String::as_str).collect();
    assert_eq!(
        columns,
        ["AGE", "APPLICATIONS", "ASLEEP", "GENERATION", "LINE", "MODELS", "NAME", "OBSERVED", "READY", "SERVED-AS"]
    );
    assert_eq!((row["NAME"].as_str(), row["GENERATION"].as_str()), ("waiting", "1"), "{table}");
    assert_eq!((row["OBSERVED"].as_str(), row["LINE"].as_str(), row["READY"].as_str()), ("", "", ""), "{table}");
    // Once: a line says it once per generation.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let count: i64 = events()
        .await
        .iter()
        .map(|e| e["count"].as_i64().unwrap_or(1).max(e["series"]["count"].as_i64().unwrap_or(1)))
        .sum();
    assert_eq!(count, 1, "{:?}", events().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_quantity_and_two_more_mistakes_are_refused_at_once_and_nothing_is_written() {
    let cluster = Cluster::start("three-mistakes").await;
    let v1 = OperatorOptions { routing: "v1", api_version: "v1alpha2", identity: "op-v1", ..Default::default() };
    let _v1 = Operator::start(&cluster, v1).await;
    let mark = cluster.audit_mark();
    let cr = |size: &str| {
        json!({
            "apiVersion": "models.titanml.co/v1alpha2",
            "kind": "ModelOrchestra",
            "metadata": {"name": "mistakes", "namespace": cluster.namespace},
            "spec": {"applications": {"chat": {
                "readerConfig": {"modelName": "org/m", "device": "cpu"},
                "modelCache": {"enabled": true, "size": size},
                "resources": {"limits": {"memory": "2gb"}},
                "env": [{"name": "A=B", "value": "x"}],
                "podLabels": {"bad key!": "x"}
            }}}
        })
    };
    // The cache size is a quantity the CRD checks itself: kubectl apply is refused.
    let refused = std::process::Command::new(local_cluster::tools::bin_dir().join("kubectl"))
        .args(["apply", "-n", &cluster.namespace, "-f", "-"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(serde_json::to_string(&cr("40gb")).unwrap().as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("modelCache.size"), "{stderr}");

    // The other mistakes pass the CRD and are all reported by the operator, at once.
    cluster.kubectl_with_input(&["apply", "-f", "-"], &serde_json::to_string(&cr("40Gi")).unwrap());
    let cr = eventually("the CR reports RenderFailed", || async {
        let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get("mistakes").await.ok()?;
        (ready_condition(&cr)?["reason"] == "RenderFailed").then_some(cr)
    })
    .await;
    let message = ready_condition(&cr).unwrap()["message"].as_str().unwrap().to_string();
    assert!(message.contains("3 errors"), "{message}");
    let fields = [
        "spec.applications.chat.resources.limits.memory",
        "spec.applications.chat.env[0].name",
        "spec.applications.chat.podLabels.bad key!",
    ];
    for field in fields {
        assert!(message.contains(field), "{field} in {message}");
    }
    if cluster.audit().is_some() {
        assert_eq!(child_writes(&cluster, "op-v1", mark), Vec::<String>::new(), "nothing written");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_change_on_a_full_gpu_node_is_progressing_with_the_schedulers_message_then_stuck() {
    // A cluster of its own: the GPU node's capacity is the point.
    let cluster = Cluster::start_alone("full-gpu", serde_json::json!({})).await;
    if !cluster
        .has_fake_nodes("a_model_change_on_a_full_gpu_node_is_progressing_with_the_schedulers_message_then_stuck")
    {
        return;
    }
    let v1 = OperatorOptions { routing: "v1", api_version: "v1alpha2", identity: "op-v1", ..Default::default() };
    let _v1 = Operator::start(&cluster, v1).await;
    // Every GPU of the RTX 3060 node (4) for one reader; the default rolling update needs
    // room for a second pod.
    let cr = |model: &str| {
        json!({
            "apiVersion": "models.titanml.co/v1alpha2",
            "kind": "ModelOrchestra",
            "metadata": {"name": "full", "namespace": cluster.namespace},
            "spec": {"applications": {"chat": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3060"},
                "readerConfig": {"modelName": model, "device": "cuda", "tensorParallel": 4},
                "progressDeadlineSeconds": 15
            }}}
        })
    };
    cluster.kubectl_with_input(&["apply", "-f", "-"], &serde_json::to_string(&cr("org/first")).unwrap());
    settled(&cluster, "full").await;

    cluster.kubectl_with_input(&["apply", "-f", "-"], &serde_json::to_string(&cr("org/second")).unwrap());
    // Until the deadline: never Ready=True with Progressing=False; Progressing with the
    // scheduler's message once the new pod is placed nowhere.
    let generation = 2;
    let seen_progressing = std::sync::Mutex::new(None::<String>);
    let stuck = eventually_within(Duration::from_secs(90), "the rollout is RolloutStuck", || {
        let (seen, cluster) = (&seen_progressing, &cluster);
        async move {
            let cr = cluster.mo_api_at(ApiVersion::V1alpha2).get("full").await.ok()?;
            let conditions = cr.data["status"]["conditions"].as_array()?.clone();
            let of = |t: &str| conditions.iter().find(|c| c["type"] == t).cloned().unwrap_or_default();
            if cr.data["status"]["observedGeneration"] == generation {
                assert!(
                    !(of("Ready")["status"] == "True" && of("Progressing")["status"] == "False"),
                    "Ready over an unfinished rollout: {conditions:?}"
                );
                if of("Progressing")["reason"] == "Unschedulable" {
                    *seen.lock().unwrap() = Some(of("Progressing")["message"].as_str().unwrap_or_default().to_string());
                }
            }
            (of("Degraded")["reason"] == "RolloutStuck").then_some(of("Degraded"))
        }
    })
    .await;
    let progressing = seen_progressing
        .into_inner()
        .unwrap()
        .expect("Progressing=True, reason Unschedulable, was reported before the deadline");
    assert!(
        progressing.contains("Insufficient nvidia.com/gpu") && progressing.contains("previous pods keep serving"),
        "{progressing}"
    );
    assert_eq!(stuck["status"], "True");
    assert!(stuck["message"].as_str().unwrap().contains("progress deadline"), "{stuck}");
}

/// The names of `expected` (one CR's objects).
fn names(expected: &std::collections::BTreeSet<(Kind, String)>) -> std::collections::BTreeSet<String> {
    expected.iter().map(|(_, name)| name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_nothing_in_the_cluster_could_refuse_is_created_without_dry_runs() {
    let cluster = Cluster::start("no-dry-run").await;
    let op = Operator::start(&cluster, OperatorOptions { identity: "op-no-dry-run", ..Default::default() }).await;
    // The first stack: by the time it is Ready, the operator's watches of admission have
    // listed (until then, creations are dry-run).
    cluster.apply_cr(&cr_with_apps("first", &["chat"], None)).await;
    cluster.wait_converged("first").await;
    let mark = cluster.audit_mark();

    let yaml = cr_with_apps("second", &["chat"], None);
    cluster.apply_cr(&yaml).await;
    cluster.wait_converged("second").await;
    let Some(audit) = cluster.audit() else { return };
    let objects = names(&cluster.expected(&yaml));
    let by_operator = format!("; {})", op.identity);
    let patches: Vec<_> = audit
        .since(mark)
        .into_iter()
        .filter(|e| e.verb == "patch" && e.user_agent.contains(&by_operator) && objects.contains(e.name()))
        .collect();
    let dry_runs: Vec<_> = patches.iter().filter(|e| e.is_dry_run()).map(|e| e.name()).collect();
    assert!(dry_runs.is_empty(), "no dry run: {dry_runs:?}");
    let written: std::collections::BTreeSet<String> = patches.iter().map(|e| e.name().to_string()).collect();
    assert_eq!(written, objects, "every object applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_refused_without_its_dry_run_is_rolled_back_and_named() {
    let cluster = Cluster::start("rolled-back").await;
    let _op = Operator::start(&cluster, OperatorOptions { identity: "op-rolled-back", ..Default::default() }).await;
    cluster.apply_cr(&cr_with_apps("first", &["chat"], None)).await;
    cluster.wait_converged("first").await;

    // Where the second stack's gateway ConfigMap goes, another controller's ConfigMap
    // (unlabelled: no watch of the operator sees it; only an apply meets it).
    let yaml = cr_with_apps("second", &["chat"], None);
    let expected = cluster.expected(&yaml);
    let taken = expected
        .iter()
        .find(|(kind, name)| *kind == Kind::ConfigMap && name.contains("gateway"))
        .map(|(_, name)| name.clone())
        .expect("a gateway ConfigMap");
    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "another-controller", "namespace": cluster.namespace}});
    let owner = cluster.apply_value(&owner, "configmaps", "", "v1").await;
    let owned = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": taken, "namespace": cluster.namespace, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "another-controller",
            "uid": owner.uid().unwrap(), "controller": true
        }]}
    });
    cluster.apply_value(&owned, "configmaps", "", "v1").await;

    cluster.apply_cr(&yaml).await;
    let cr = cluster.wait_reason("second", "Invalid").await;
    let message = ready_condition(&cr).unwrap()["message"].as_str().unwrap().to_string();
    assert!(message.contains(&format!("ConfigMap {taken}")), "names the object: {message}");
    assert_eq!(cluster.child_names("second").await, Default::default(), "what was created is deleted again");
}
