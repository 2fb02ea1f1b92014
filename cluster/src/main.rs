//! `local-cluster` (`make cluster`): starts the local control plane, its fake GPU nodes, a
//! real node (containerd, kubelet, kube-proxy, cluster DNS, a registry) and its volume
//! provisioner (the default StorageClass's), all in namespaces of their own; writes an admin
//! kubeconfig and the registry's address, and runs until Ctrl-C or SIGTERM, then stops
//! everything it started.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use local_cluster::{ollama, storage, Cluster, Options};

#[derive(Parser)]
#[command(
    name = "local-cluster",
    about = "A local Kubernetes cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok GPU nodes, a real node, a default StorageClass of hostPath volumes) in namespaces of its own, reached on 127.0.0.1"
)]
struct Cli {
    /// Where to write the admin kubeconfig.
    #[arg(long, default_value = "target/local-cluster.kubeconfig")]
    kubeconfig: PathBuf,
    /// Where to write the address of the cluster's registry (`127.0.0.1:PORT`), which the
    /// real node pulls from: push images there.
    #[arg(long, default_value = "target/local-cluster.registry")]
    registry_file: PathBuf,
    /// Real nodes (0 to 16) beside kwok's fake ones: `real-0`, `real-1`, … (each its own
    /// containerd and kubelet; pods of the real namespaces spread over them). Two by default:
    /// what a drain or a lost node does to a stack shows only on two.
    #[arg(long, default_value_t = 2)]
    real_nodes: usize,
    /// Namespaces (created if missing) whose pods run on the real node; others' run on kwok's.
    #[arg(long = "real-namespace", default_values_t = ["model-orchestra-system".to_string(), "models".to_string()])]
    real_namespaces: Vec<String>,
    /// Models pushed into the cluster's models registry, with the Ollama image (`smollm2`,
    /// `gemma3`: scripts/test-models.sh downloads them); none with `--ollama-models ''`.
    #[arg(long, value_delimiter = ',', default_value = "smollm2")]
    ollama_models: Vec<String>,
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
        let options = Options { keep_dir: cli.keep_dir, real_nodes: cli.real_nodes, ..Options::default() };
        let cluster = Cluster::start(options).await?;
        std::fs::copy(&cluster.kubeconfig, &cli.kubeconfig)
            .with_context(|| format!("writing {}", cli.kubeconfig.display()))?;
        if let Some(registry) = &cluster.registry {
            std::fs::write(&cli.registry_file, format!("{registry}\n"))
                .with_context(|| format!("writing {}", cli.registry_file.display()))?;
            for namespace in &cli.real_namespaces {
                cluster.run_pods_for_real(namespace).await?;
            }
            let models: Vec<ollama::TestModel> = cli
                .ollama_models
                .iter()
                .filter(|m| !m.is_empty())
                .map(|m| match m.as_str() {
                    "smollm2" => Ok(ollama::SMOLLM2),
                    "gemma3" => Ok(ollama::GEMMA3),
                    other => Err(anyhow::anyhow!("--ollama-models {other}: the models are smollm2 and gemma3")),
                })
                .collect::<Result<_, _>>()?;
            if !models.is_empty() {
                let image =
                    cluster.push_ollama_image().await.context("the Ollama image (scripts/build-go-tools.sh ollama)")?;
                cluster.push_models(&models).await.context("the models (scripts/test-models.sh)")?;
                let names: Vec<&str> = models.iter().map(|m| m.name).collect();
                println!(
                    "  Ollama: {image} and the models {} in {}",
                    names.join(", "),
                    local_cluster::registry::models_address()
                );
            }
        }
        let gpu_nodes: Vec<String> = cluster
            .nodes
            .iter()
            .filter_map(|n| n.gpus.as_ref().map(|(p, c)| format!("{} ({c} × {p})", n.name)))
            .collect();
        println!(
            "cluster {} is up: {} nodes ({} real, {} kwok's), GPU nodes {}",
            cluster.server,
            cluster.nodes.len() + cluster.real_nodes.len(),
            cluster.real_nodes.len(),
            cluster.nodes.len(),
            gpu_nodes.join(", ")
        );
        println!(
            "  export KUBECONFIG={}",
            std::fs::canonicalize(&cli.kubeconfig).unwrap_or(cli.kubeconfig.clone()).display()
        );
        println!("  kubectl get nodes -L nvidia.com/gpu.product -L {}", local_cluster::node::REAL_NODE_LABEL);
        if let Some(registry) = &cluster.registry {
            println!(
                "  real node{} {}: images from the registry {registry} (also for docker.io, ghcr.io and quay.io)",
                if cluster.real_nodes.len() == 1 { "" } else { "s" },
                cluster.real_nodes.join(", ")
            );
            println!(
                "  pods of namespace{} {} run there; others on kwok's nodes",
                if cli.real_namespaces.len() == 1 { "" } else { "s" },
                cli.real_namespaces.join(", ")
            );
        }
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
        let _ = std::fs::remove_file(&cli.registry_file);
        anyhow::Ok(())
    })
}
