//! `gateway`: the model gateway of one ModelOrchestra (the chart runs it in the gateway's
//! place when every application is an open engine).

use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;
use model_orchestra::gateway::{self, GatewayOptions};

use crate::run::{init_logging, LogFormat};

#[derive(Args)]
pub(crate) struct GatewayArgs {
    /// The namespace of the ModelOrchestra (and of its applications).
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: String,
    /// The ModelOrchestra whose applications it routes to.
    #[arg(long)]
    name: String,
    /// Port to serve on (every address of the pod).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to serve on [default: every address, the pod's].
    #[arg(long, default_value = "0.0.0.0")]
    address: std::net::IpAddr,
    #[arg(long, value_enum, default_value = "plain")]
    log_format: LogFormat,
}

pub(crate) fn gateway(args: GatewayArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(async {
        let mut config =
            kube::Config::infer().await.context("no Kubernetes configuration (in-cluster or kubeconfig) found")?;
        let agent = concat!("model-orchestra-gateway/", env!("CARGO_PKG_VERSION"));
        config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(agent)));
        let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
        let options = GatewayOptions {
            namespace: args.namespace,
            name: args.name,
            listen: SocketAddr::new(args.address, args.port),
        };
        let listen = options.listen;
        gateway::run(client, options).await.with_context(|| format!("serving on {listen}"))
    })
}
