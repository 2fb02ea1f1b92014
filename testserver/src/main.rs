//! `kube-testserver`: run the loopback Kubernetes API test server by hand, e.g.
//! `kube-testserver --kubeconfig /tmp/kc` then `KUBECONFIG=/tmp/kc kubectl get ns`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use kube_testserver::{Faults, TestServer};

#[derive(Parser)]
#[command(name = "kube-testserver", version, about = "In-memory Kubernetes API server on loopback, for tests")]
struct Cli {
    /// Address to listen on (loopback; port 0 picks a free one).
    #[arg(long, env = "KUBE_TESTSERVER_LISTEN", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Write a kubeconfig pointing at the server here.
    #[arg(long, env = "KUBE_TESTSERVER_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Fraction (0–1) of API requests that fail with 500.
    #[arg(long, env = "KUBE_TESTSERVER_ERROR_RATE", default_value_t = 0.0)]
    error_rate: f64,
    /// Latency added to every API request, in milliseconds.
    #[arg(long, env = "KUBE_TESTSERVER_LATENCY_MS", default_value_t = 0)]
    latency_ms: u64,
    /// End every watch after this many milliseconds.
    #[arg(long, env = "KUBE_TESTSERVER_DROP_WATCHES_AFTER_MS")]
    drop_watches_after_ms: Option<u64>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_writer(std::io::stderr).init();
    let cli = Cli::parse();
    let faults = Faults { error_rate: cli.error_rate, latency_ms: cli.latency_ms, drop_watches_after_ms: cli.drop_watches_after_ms };
    let server = TestServer::start_with(cli.listen, faults)?;
    if let Some(path) = &cli.kubeconfig {
        server.write_kubeconfig(path, "default")?;
        eprintln!("kubeconfig written to {}", path.display());
    }
    println!("{}", server.url());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    })?;
    drop(server);
    Ok(())
}
