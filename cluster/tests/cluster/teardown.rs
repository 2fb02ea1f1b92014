//! Stopping a cluster with a real node — normally, after its owner panics, or when its
//! owner is killed — leaves no process, cgroup, mount, network namespace or directory
//! behind; a machine that cannot run one gets one clear error.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use local_cluster::{Cluster, Options};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{eventually, init, pid_alive};

/// What a running cluster has on the machine.
#[derive(Debug, Serialize, Deserialize)]
struct Traces {
    dir: PathBuf,
    cgroup_root: String,
    net_namespace: String,
    /// Every process: components, containerd's shims, the pod's.
    pids: Vec<u32>,
}

/// Starts a cluster with a real node and a pod running on it.
async fn cluster_with_a_running_pod() -> (Cluster, Traces) {
    let cluster = Cluster::start(Options::default()).await.unwrap_or_else(|e| panic!("{e}"));
    cluster.run_pods_for_real("teardown").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client().await.unwrap(), "teardown");
    let image = local_cluster::registry::pod_image(cluster.registry.as_deref().unwrap());
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": image, "args": ["serve", "8080"]}]}});
    pods.patch("p", &PatchParams::apply("test"), &Patch::Apply(&pod)).await.unwrap();
    eventually("the pod runs", || async {
        (pods.get("p").await.ok()?.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    let isolation = cluster.isolation();
    let traces = Traces {
        dir: cluster.dir().to_path_buf(),
        cgroup_root: isolation.cgroup_root().to_string(),
        net_namespace: isolation.net_namespace.clone(),
        pids: isolation.pids(),
    };
    let components = cluster.pids().len();
    assert!(traces.pids.len() > components + 2, "the pod's and the shim's processes are among {:?}", traces.pids);
    (cluster, traces)
}

/// What of `traces` is still on the machine (empty: nothing).
fn left_behind(traces: &Traces) -> Vec<String> {
    let mut left = Vec::new();
    left.extend(traces.pids.iter().filter(|&&p| pid_alive(p)).map(|p| format!("process {p}")));
    for h in local_cluster::isolation::hierarchies() {
        let path = h.join(&traces.cgroup_root);
        if path.exists() {
            left.push(format!("cgroup {}", path.display()));
        }
    }
    // The network namespace, held by a process or an open file descriptor.
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let proc = entry.path();
        if std::fs::read_link(proc.join("ns/net")).is_ok_and(|n| n.display().to_string() == traces.net_namespace) {
            left.push(format!("{} in the cluster's network namespace", proc.display()));
        }
        for fd in std::fs::read_dir(proc.join("fd")).into_iter().flatten().flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|n| n.display().to_string() == traces.net_namespace) {
                left.push(format!("{} holds the cluster's network namespace", fd.path().display()));
            }
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = traces.dir.display().to_string();
    left.extend(mounts.lines().filter(|l| l.contains(&dir)).map(|l| format!("mount {l}")));
    if traces.dir.exists() {
        left.push(format!("directory {dir}"));
    }
    left
}

/// Waits (the holder tears down after its owner is gone) until nothing is left.
fn assert_nothing_left(traces: &Traces) {
    let start = Instant::now();
    loop {
        let left = left_behind(traces);
        if left.is_empty() {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "left behind:\n{}", left.join("\n"));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_cluster_leaves_no_process_cgroup_mount_namespace_or_directory_behind() {
    init();
    let (cluster, traces) = cluster_with_a_running_pod().await;
    cluster.stop();
    let left = left_behind(&traces);
    assert!(left.is_empty(), "left behind after stop():\n{}", left.join("\n"));
}

/// The owner of a cluster, run by the tests below as a process of its own: it prints the
/// cluster's traces, then panics or waits to be killed (`TEARDOWN_OWNER`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the teardown tests as a process of its own"]
async fn owner_of_a_cluster() {
    init();
    let Ok(how) = std::env::var("TEARDOWN_OWNER") else { return };
    let (_cluster, traces) = cluster_with_a_running_pod().await;
    println!("TRACES {}", serde_json::to_string(&traces).unwrap());
    if how == "panic" {
        panic!("the owner of the cluster panics");
    }
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Starts [`owner_of_a_cluster`] and returns it with the traces it printed.
fn start_owner(how: &str) -> (std::process::Child, Traces) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["teardown::owner_of_a_cluster", "--exact", "--ignored", "--nocapture"])
        .env("TEARDOWN_OWNER", how)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines().map_while(Result::ok) {
        if let Some(json) = line.strip_prefix("TRACES ") {
            return (child, serde_json::from_str(json).unwrap());
        }
    }
    panic!("the owner exited without starting its cluster ({:?})", child.wait());
}

#[test]
fn a_cluster_whose_owner_panics_leaves_nothing_behind() {
    let (mut owner, traces) = start_owner("panic");
    assert!(!owner.wait().unwrap().success(), "the owner panicked");
    assert_nothing_left(&traces);
}

#[test]
fn a_cluster_whose_owner_is_killed_leaves_nothing_behind() {
    let (mut owner, traces) = start_owner("wait");
    owner.kill().unwrap();
    owner.wait().unwrap();
    assert_nothing_left(&traces);
}

/// A directory with links to some programs of the machine, as a PATH.
fn path_with(programs: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("path-{}-{}", std::process::id(), programs.len()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for program in programs {
        let target = local_cluster::isolation::which(program).unwrap();
        std::os::unix::fs::symlink(target, dir.join(program)).unwrap();
    }
    dir
}

fn local_cluster_with_path(path: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_local-cluster"))
        .args(["--kubeconfig", "/dev/null", "--registry-file", "/dev/null"])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "it started without what it needs");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_machine_without_unshare_gets_one_error_naming_it() {
    let path = path_with(&[]);
    let err = local_cluster_with_path(&path);
    assert!(err.contains("`unshare` is not installed") && err.contains("util-linux"), "{err}");
    std::fs::remove_dir_all(path).unwrap();
}

#[test]
fn a_machine_without_containerd_gets_one_error_naming_it_before_anything_starts() {
    let path = path_with(&["unshare", "ip", "bash"]);
    let err = local_cluster_with_path(&path);
    assert!(err.contains("containerd is missing") && err.contains("apt-get install containerd"), "{err}");
    std::fs::remove_dir_all(path).unwrap();
}
