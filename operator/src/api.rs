//! `serve-api` and `api-key`: the HTTP API ([`model_orchestra_http`]) wired to this
//! binary's validation (the render the operator runs), and the key commands for admins.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use model_orchestra::error::RenderError;
use model_orchestra_api::InputError;
use model_orchestra_http::admin::{self, NewKey, Server};
use model_orchestra_http::keys::Access;
use model_orchestra_http::{ServeOptions, TlsFiles, Validator};

use crate::run::{init_logging, LogFormat};

#[derive(Args, Debug)]
pub struct ServeApiArgs {
    /// Address to listen on.
    #[arg(long, env = "MODEL_ORCHESTRA_API_LISTEN", default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The server's certificate chain (PEM). Required, with --tls-key, unless --insecure-listen.
    #[arg(long, env = "MODEL_ORCHESTRA_API_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, env = "MODEL_ORCHESTRA_API_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve plain HTTP, on a loopback address only: for development, never in a cluster.
    #[arg(long)]
    insecure_listen: bool,
    /// The namespace of the key Secrets (where `api-key create` puts them).
    #[arg(long, env = "MODEL_ORCHESTRA_API_KEYS_NAMESPACE", default_value = "model-orchestra-system")]
    keys_namespace: String,
    /// Requests per second per key, on average.
    #[arg(long, env = "MODEL_ORCHESTRA_API_RATE_LIMIT", default_value_t = 20.0)]
    rate_limit: f64,
    /// Requests per key in a burst.
    #[arg(long, env = "MODEL_ORCHESTRA_API_RATE_BURST", default_value_t = 40)]
    rate_burst: u32,
    /// The largest request body accepted.
    #[arg(long, env = "MODEL_ORCHESTRA_API_MAX_BODY_BYTES", default_value_t = 256 * 1024)]
    max_body_bytes: usize,
    /// How long a request (other than a watch) may take.
    #[arg(long, env = "MODEL_ORCHESTRA_API_REQUEST_TIMEOUT_SECONDS", default_value_t = 30)]
    request_timeout_seconds: u64,
    /// How long a list made for a key is served to its reads (0: every read asks the API
    /// server). Reads may be this old; a RoleBinding removed takes effect within it.
    #[arg(long, env = "MODEL_ORCHESTRA_API_READ_CACHE_SECONDS", default_value_t = 1.0)]
    read_cache_seconds: f64,
    /// Log format (one line per request; level filter: RUST_LOG, default info).
    #[arg(long, env = "MODEL_ORCHESTRA_LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    log_format: LogFormat,
}

#[derive(Subcommand, Debug)]
pub enum ApiKeyCommand {
    /// Make a key for the namespaces given; prints it once, on stdout. Stores only its SHA-256.
    Create {
        /// The key's name: its Kubernetes user is `model-orchestra-api:<name>`.
        #[arg(long)]
        name: String,
        /// A namespace the key may use (repeat for more).
        #[arg(long = "namespace", short = 'n', required = true)]
        namespaces: Vec<String>,
        /// `edit` (read, create, replace, delete, refresh, retry) or `view` (read only).
        #[arg(long, default_value = "edit")]
        access: Access,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// The keys: name, namespaces, access, created.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Revoke a key: the server refuses it within seconds; its rights are removed.
    Revoke {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The API server's namespace (its key Secrets live there).
    #[arg(long, env = "MODEL_ORCHESTRA_API_NAMESPACE", default_value = "model-orchestra-system")]
    api_namespace: String,
    /// The API server's ServiceAccount (it gets the right to impersonate the key's user).
    #[arg(long, env = "MODEL_ORCHESTRA_API_SERVICE_ACCOUNT", default_value = model_orchestra_api::deploy::httpapi::NAME)]
    api_service_account: String,
}

impl ServerArgs {
    fn server(&self) -> Server {
        Server { namespace: self.api_namespace.clone(), service_account: self.api_service_account.clone() }
    }
}

/// The operator's own check of a ModelOrchestra: parse and render, every error with its field.
fn validator() -> Validator {
    Arc::new(|value, namespace| match model_orchestra::render_value(value, namespace) {
        Ok(rendered) => Ok(rendered.warnings.iter().map(|w| w.to_string()).collect()),
        Err(RenderError::Input(errors)) => Err(errors.into_vec()),
        Err(chart) => Err(vec![InputError::new("(chart)", chart.to_string())]),
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")
}

async fn kube_config() -> anyhow::Result<kube::Config> {
    let mut config =
        kube::Config::infer().await.context("no Kubernetes configuration (in-cluster or kubeconfig) found")?;
    let agent = concat!("model-orchestra-api/", env!("CARGO_PKG_VERSION"));
    config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(agent)));
    Ok(config)
}

pub fn serve(args: ServeApiArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    let options = ServeOptions {
        listen: args.listen,
        tls,
        insecure_listen: args.insecure_listen,
        keys_namespace: args.keys_namespace,
        rate_per_second: args.rate_limit,
        burst: args.rate_burst,
        max_body_bytes: args.max_body_bytes,
        request_timeout: Duration::from_secs(args.request_timeout_seconds),
        read_cache: Duration::from_secs_f64(args.read_cache_seconds.clamp(0.0, 60.0)),
    };
    model_orchestra_http::check_options(&options)?;
    // Load the charts before the first request needs them.
    for version in model_orchestra_api::ApiVersion::ALL {
        model_orchestra::embedded_chart(version).context("loading the embedded chart")?;
    }
    runtime()?.block_on(async { model_orchestra_http::serve(options, kube_config().await?, validator()).await })
}

pub fn api_key(command: ApiKeyCommand) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let client = kube::Client::try_from(kube_config().await?).context("a Kubernetes client")?;
        match command {
            ApiKeyCommand::Create { name, namespaces, access, server } => {
                let new = NewKey { name: name.clone(), namespaces: namespaces.clone(), access };
                let key = admin::create(&client, &server.server(), &new).await?;
                println!("{key}");
                eprintln!(
                    "key {name} created: user model-orchestra-api:{name}, {} in {}. It is shown only this once; it is stored as its SHA-256.",
                    access.as_str(),
                    namespaces.join(", ")
                );
            }
            ApiKeyCommand::List { server } => {
                println!("{:<24} {:<6} {:<28} NAMESPACES", "NAME", "ACCESS", "CREATED");
                for r in admin::list(&client, &server.server()).await? {
                    println!("{:<24} {:<6} {:<28} {}", r.name, r.access, r.created, r.namespaces.join(","));
                }
            }
            ApiKeyCommand::Revoke { name, server } => {
                admin::revoke(&client, &server.server(), &name).await?;
                eprintln!("key {name} revoked");
            }
        }
        Ok(())
    })
}
