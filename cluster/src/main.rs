//! `local-cluster` (`make cluster`): starts the local control plane, its fake GPU nodes and
//! its volume provisioner (the default StorageClass's), writes an admin kubeconfig, and runs
//! until Ctrl-C or SIGTERM, then stops every process it started.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use local_cluster::{storage, Cluster, Options};

#[derive(Parser)]
#[command(
    name = "local-cluster",
    about = "A local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok GPU nodes, a default StorageClass of hostPath volumes) on 127.0.0.1"
)]
struct Cli {
    /// Where to write the admin kubeconfig.
    #[arg(long, default_value = "target/local-cluster.kubeconfig")]
    kubeconfig: PathBuf,
    /// Keep the cluster's directory (logs, audit log, etcd data, volumes) after it stops.
    #[arg(long)]
    keep_dir: bool,
}

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(async {
        let cluster = Cluster::start(Options { keep_dir: cli.keep_dir, ..Options::default() }).await?;
        std::fs::copy(&cluster.kubeconfig, &cli.kubeconfig)
            .with_context(|| format!("writing {}", cli.kubeconfig.display()))?;
        let gpu_nodes: Vec<String> = cluster
            .nodes
            .iter()
            .filter_map(|n| n.gpus.as_ref().map(|(p, c)| format!("{} ({c} × {p})", n.name)))
            .collect();
        println!("cluster {} is up: {} nodes, GPU nodes {}", cluster.server, cluster.nodes.len(), gpu_nodes.join(", "));
        println!(
            "  export KUBECONFIG={}",
            std::fs::canonicalize(&cli.kubeconfig).unwrap_or(cli.kubeconfig.clone()).display()
        );
        println!("  kubectl get nodes -L nvidia.com/gpu.product");
        println!(
            "  default StorageClass {} ({}): volumes under {}",
            storage::STORAGE_CLASS,
            storage::PROVISIONER,
            cluster.volumes_dir().display()
        );
        println!("  logs and the audit log: {}", cluster.dir().display());
        println!("Ctrl-C stops it.");
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("SIGTERM handler")?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        println!(
            "stopping: the volume provisioner (a thread), {}",
            cluster.pids().iter().map(|(n, p)| format!("{n} ({p})")).collect::<Vec<_>>().join(", ")
        );
        cluster.stop();
        let _ = std::fs::remove_file(&cli.kubeconfig);
        anyhow::Ok(())
    })
}
