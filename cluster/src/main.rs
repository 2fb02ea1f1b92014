//! `local-cluster` (`make cluster`): starts the local control plane and its fake GPU
//! nodes, writes an admin kubeconfig, and runs until Ctrl-C or SIGTERM, then stops every
//! process it started.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use local_cluster::{Cluster, Options};

#[derive(Parser)]
#[command(
    name = "local-cluster",
    about = "A local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok GPU nodes) on 127.0.0.1"
)]
struct Cli {
    /// Where to write the admin kubeconfig.
    #[arg(long, default_value = "target/local-cluster.kubeconfig")]
    kubeconfig: PathBuf,
    /// Keep the cluster's directory (logs, audit log) after it stops.
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
        println!("  logs and the audit log: {}", cluster.dir().display());
        println!("Ctrl-C stops it.");
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("SIGTERM handler")?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        println!(
            "stopping: {}",
            cluster.pids().iter().map(|(n, p)| format!("{n} ({p})")).collect::<Vec<_>>().join(", ")
        );
        cluster.stop();
        let _ = std::fs::remove_file(&cli.kubeconfig);
        anyhow::Ok(())
    })
}
