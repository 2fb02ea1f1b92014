//! `model-orchestra-operator diff` on the real control plane, run as the operator (its
//! ServiceAccount's token) against a CR the operator has converged: what it would create,
//! change and prune, its exit status, and that the API server saw only reads and dry runs
//! from it (the audit log).

use std::process::Command;

use crate::support::*;
use local_cluster::audit::AuditEvent;

/// What one `diff` run printed and returned, and what it asked the API server.
struct DiffRun {
    code: i32,
    stdout: String,
    stderr: String,
    /// The audit events of its requests (None on an external cluster).
    requests: Option<Vec<AuditEvent>>,
}

/// A CR `name` with the applications `apps`, applied and converged by the operator.
async fn converged(cluster: &Cluster, name: &str, apps: &[&str]) -> Operator {
    let operator = Operator::start(cluster, OperatorOptions::default()).await;
    cluster.apply_cr(&cr_with_apps(name, apps, None)).await;
    cluster.wait_converged(name).await;
    operator
}

/// Runs `diff -f` on `manifest` as the operator's ServiceAccount, in the test's namespace.
async fn diff(cluster: &Cluster, manifest: &str) -> DiffRun {
    let file = cluster.dir.0.join("cr.yaml");
    std::fs::write(&file, manifest).expect("write the manifest");
    diff_with(cluster, &["-f", file.to_str().unwrap()]).await
}

/// Runs `diff ARGS -n <the test's namespace>` as the operator's ServiceAccount.
async fn diff_with(cluster: &Cluster, args: &[&str]) -> DiffRun {
    let kubeconfig = cluster.operator_kubeconfig("v0", None).await;
    let mark = cluster.audit_mark();
    let out = Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"))
        .arg("diff")
        .args(args)
        .args(["-n", &cluster.namespace])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("run diff");
    let requests = cluster.audit().map(|audit| {
        // The audit log is written as requests complete; a moment later every one is in.
        std::thread::sleep(std::time::Duration::from_secs(1));
        audit
            .since(mark)
            .into_iter()
            .filter(|e| e.user_agent.starts_with("model-orchestra-operator/") && e.user_agent.ends_with("(diff)"))
            .collect()
    });
    DiffRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        requests,
    }
}

/// The status line `diff` prints for one object.
fn line(change: &str, kind: &str, name: &str) -> String {
    format!("{change} {kind} {name}\n")
}

#[tokio::test]
async fn an_unchanged_cr_exits_0_and_lists_every_object_as_unchanged() {
    let cluster = Cluster::start("diff_unchanged").await;
    let manifest = cr_with_apps("same", &["chat"], None);
    let _operator = converged(&cluster, "same", &["chat"]).await;
    let run = diff(&cluster, &manifest).await;
    assert_eq!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let expected = cluster.expected(&manifest);
    for (kind, name) in &expected {
        assert!(run.stdout.contains(&line("unchanged", kind.kind(), name)), "{kind:?} {name}:\n{}", run.stdout);
    }
    let summary = format!("0 created, 0 changed, 0 pruned, {} unchanged\n", expected.len());
    assert!(run.stdout.ends_with(&summary), "{}", run.stdout);
}

#[tokio::test]
async fn a_live_cr_by_name_that_the_operator_converged_has_nothing_to_change() {
    let cluster = Cluster::start("diff_by_name").await;
    let _operator = converged(&cluster, "live", &["chat"]).await;
    let run = diff_with(&cluster, &["--name", "live"]).await;
    assert_eq!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(&line("unchanged", "Deployment", "live-model-orchestra-chat")), "{}", run.stdout);
}

/// A distributed-llama group of two (a root and a worker, one per kwok node), its model
/// downloaded into a cache: the reconciler gates its root on the workers' pods and on the
/// download, which the plain render knows nothing of.
fn group_cr(name: &str) -> String {
    format!(
        "apiVersion: models.titanml.co/v1alpha2
kind: ModelOrchestra
metadata:
  name: {name}
spec:
  applications:
    chat:
      engine:
        distributedLlama:
          nodes: 2
      readerConfig:
        modelName: qwen3_0.6b_q40
        device: cpu
      modelCache:
        size: 1Gi
      tolerations:
        - operator: Exists
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untouched_ready_group_cr_shows_no_changes() {
    let test = "diff_group";
    let cluster = Cluster::start(test).await;
    if !cluster.has_fake_nodes(test) {
        return;
    }
    let options =
        OperatorOptions { api_version: "v1alpha2", routing: "v1", identity: "op-group", ..Default::default() };
    let _operator = Operator::start(&cluster, options).await;
    cluster.kubectl_with_input(&["apply", "-f", "-"], &group_cr("group"));
    cluster.wait_reason("group", "Ready").await;
    let run = diff_with(&cluster, &["--name", "group"]).await;
    assert_eq!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    for change in ["created", "changed", "pruned"] {
        assert!(!run.stdout.lines().any(|l| l.starts_with(&format!("{change} "))), "{}", run.stdout);
    }
    assert!(run.stdout.contains(&line("unchanged", "Deployment", "group-model-orchestra-chat")), "{}", run.stdout);
    assert!(run.stdout.contains("0 created, 0 changed, 0 pruned"), "{}", run.stdout);
}

#[tokio::test]
async fn a_changed_model_shows_the_configmap_and_deployment_fields_and_exits_1() {
    let cluster = Cluster::start("diff_changed").await;
    let _operator = converged(&cluster, "changed", &["chat"]).await;
    let manifest = cr_with_apps("changed", &["chat"], None).replace("org/chat-model", "org/chat-model-v2");
    let run = diff(&cluster, &manifest).await;
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let name = "changed-model-orchestra-chat";
    assert!(run.stdout.contains(&line("changed", "ConfigMap", name)), "{}", run.stdout);
    assert!(run.stdout.contains(&line("changed", "Deployment", name)), "{}", run.stdout);
    assert!(run.stdout.contains("+          model_name: \"org/chat-model-v2\""), "{}", run.stdout);
    assert!(run.stdout.contains("-          model_name: \"org/chat-model\""), "{}", run.stdout);
    assert!(run.stdout.contains("+        checksum/config: "), "{}", run.stdout);
    assert!(run.stdout.contains(&line("unchanged", "Service", name)), "{}", run.stdout);
    assert!(run.stdout.contains("0 created, 2 changed, 0 pruned"), "{}", run.stdout);
}

#[tokio::test]
async fn a_removed_application_lists_its_objects_as_pruned() {
    let cluster = Cluster::start("diff_pruned").await;
    let _operator = converged(&cluster, "two", &["chat", "code"]).await;
    let manifest = cr_with_apps("two", &["chat"], None);
    let run = diff(&cluster, &manifest).await;
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let before = cluster.expected(&cr_with_apps("two", &["chat", "code"], None));
    let gone: Vec<_> = before.difference(&cluster.expected(&manifest)).cloned().collect();
    assert!(!gone.is_empty());
    for (kind, name) in &gone {
        assert!(run.stdout.contains(&line("pruned", kind.kind(), name)), "{kind:?} {name}:\n{}", run.stdout);
    }
    assert!(run.stdout.contains(&format!("0 created, 0 changed, {} pruned", gone.len())), "{}", run.stdout);
    // Still there: diff deletes nothing.
    assert_eq!(cluster.child_names("two").await, before);
}

#[tokio::test]
async fn an_invalid_cr_exits_2_naming_the_field_and_prints_nothing() {
    let cluster = Cluster::start("diff_invalid").await;
    let manifest = cr_with_apps("bad", &["chat"], None).replace("device: cpu", "device: tpu");
    let run = diff(&cluster, &manifest).await;
    assert_eq!(run.code, 2, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("spec.applications.chat.readerConfig.device"), "{}", run.stderr);
    assert_eq!(run.stdout, "");
}

#[tokio::test]
async fn diff_only_reads_and_dry_runs() {
    let cluster = Cluster::start("diff_reads_only").await;
    let _operator = converged(&cluster, "ro", &["chat", "code"]).await;
    // A changed model and a removed application: applies and a prune, were it the operator.
    let manifest = cr_with_apps("ro", &["chat"], None).replace("org/chat-model", "org/other-model");
    let run = diff(&cluster, &manifest).await;
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let Some(requests) = run.requests else {
        eprintln!("diff_only_reads_and_dry_runs: skipped on an external cluster: it needs the audit log");
        return;
    };
    assert!(requests.iter().any(|e| e.verb == "patch" && e.is_dry_run()), "no dry-run apply: {requests:?}");
    let writes: Vec<_> = requests.iter().filter(|e| e.is_write()).collect();
    assert!(writes.is_empty(), "diff wrote: {writes:?}");
    let other: Vec<_> = requests.iter().filter(|e| !matches!(e.verb.as_str(), "get" | "list" | "patch")).collect();
    assert!(other.is_empty(), "requests other than reads and dry-run applies: {other:?}");
}
