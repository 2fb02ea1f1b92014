//! `model-orchestra-operator run`: wiring of the controller, leader election, the
//! operations endpoint, logging and signals. Every flag can also be set by env var.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgAction, Args, ValueEnum};
use model_orchestra::chart::Chart;
use model_orchestra::controller::{self, Settings};
use model_orchestra::operations::http::{self, Health};
use model_orchestra::operations::leader::LeaseLock;
use model_orchestra::operations::metrics::Metrics;
use model_orchestra::reconcile::routing::Line;
use model_orchestra_api::lines::{default_routing, line_name};
use model_orchestra_api::ApiVersion;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Reconcile only CRs labelled `operatorVersion=<this>` [default: v<MAJOR> of this build].
    #[arg(long, env = "MODEL_ORCHESTRA_ROUTING")]
    routing: Option<String>,
    /// Also reconcile CRs without the `operatorVersion` label (give this to one instance only).
    #[arg(long, env = "MODEL_ORCHESTRA_CLAIM_UNLABELED")]
    claim_unlabeled: bool,
    /// Watch only this namespace [default: all namespaces].
    #[arg(long, env = "MODEL_ORCHESTRA_WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    /// Take part in leader election; only the holder of the Lease reconciles.
    #[arg(long, env = "MODEL_ORCHESTRA_LEADER_ELECT", default_value_t = true, action = ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the Lease [default: $POD_NAMESPACE, else the kubeconfig's namespace].
    #[arg(long, env = "MODEL_ORCHESTRA_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// How long a Lease lasts without renewal.
    #[arg(long, env = "MODEL_ORCHESTRA_LEASE_DURATION_SECONDS", default_value_t = 15)]
    lease_duration_seconds: u64,
    /// How often the leader renews (and a standby retries).
    #[arg(long, env = "MODEL_ORCHESTRA_LEASE_RENEW_SECONDS", default_value_t = 5)]
    lease_renew_seconds: u64,
    /// This instance's name in the Lease and in Events [default: $POD_NAME, else host-pid].
    #[arg(long, env = "MODEL_ORCHESTRA_IDENTITY")]
    identity: Option<String>,
    /// Re-check every CR this often even without changes (no writes when nothing changed).
    #[arg(long, env = "MODEL_ORCHESTRA_RESYNC_SECONDS", default_value_t = 300)]
    resync_seconds: u64,
    /// Say (an Event on the CR) when no line has reconciled a CR's latest generation for this
    /// long.
    #[arg(long, env = "MODEL_ORCHESTRA_UNSERVED_AFTER_SECONDS", default_value_t = 30)]
    unserved_after_seconds: u64,
    /// CRs reconciled at once.
    #[arg(long, env = "MODEL_ORCHESTRA_CONCURRENCY", default_value_t = 8)]
    concurrency: u16,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "MODEL_ORCHESTRA_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Log format (level filter: RUST_LOG, default info).
    #[arg(long, env = "MODEL_ORCHESTRA_LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    log_format: LogFormat,
    /// The release this operator was installed as (its bundle's version), reported in
    /// `status.operatorVersion` [default: the binary's version].
    #[arg(long, env = "MODEL_ORCHESTRA_RELEASE")]
    release: Option<String>,
    /// The ModelOrchestra version this line serves: CRs created at this version (or moved
    /// to it) are rendered with that version's chart. The routing default follows it.
    #[arg(long, env = "MODEL_ORCHESTRA_API_VERSION", value_parser = crate::api_version_parser(), default_value = "v1alpha1")]
    api_version: ApiVersion,
    /// Render this chart directory instead of the embedded chart (its version must be
    /// `--api-version`).
    #[arg(long, env = "MODEL_ORCHESTRA_CHART", value_name = "DIR")]
    chart: Option<PathBuf>,
    /// The image the model gateways run (`spec.modelGateway.image`'s default): the
    /// operator's own [default: the chart's, the released image of this version].
    #[arg(long, env = "MODEL_ORCHESTRA_MODEL_GATEWAY_IMAGE")]
    model_gateway_image: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum LogFormat {
    Plain,
    Json,
}

pub(crate) fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    // Colour only for a person at a terminal; logs collected from a pipe or a file stay plain.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Plain => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: RunArgs) -> anyhow::Result<()> {
    let settings = settings(&args);
    let (version, routing, identity) = (&settings.release, &settings.line.routing, &settings.identity);
    let mut chart = match &args.chart {
        Some(dir) => Chart::from_dir(dir),
        None => Chart::embedded(args.api_version),
    }
    .context("loading the chart")?;
    if let Some(image) = &args.model_gateway_image {
        chart.set_model_gateway_image(image);
    }
    if chart.api_version() != args.api_version {
        anyhow::bail!(
            "the chart renders {} ModelOrchestras, but --api-version is {}",
            chart.api_version(),
            args.api_version
        );
    }

    let mut config =
        kube::Config::infer().await.context("no Kubernetes configuration (in-cluster or kubeconfig) found")?;
    let user_agent = format!("model-orchestra-operator/{version} ({routing}; {identity})");
    config
        .headers
        .push((hyper::header::USER_AGENT, user_agent.parse().context("identity is not a valid header value")?));
    let lease_namespace = args
        .lease_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| config.default_namespace.clone());
    // Probes of promotion candidates go through their own client: a gateway's 503 is an
    // answer to report, not a transient failure for kube's default retries to wait out.
    let mut probe_config = config.clone();
    probe_config.default_retry = false;
    let clients = controller::Clients {
        api: kube::Client::try_from(config).context("building the Kubernetes client")?,
        probes: kube::Client::try_from(probe_config).context("building the Kubernetes client")?,
    };
    let client = clients.api.clone();

    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health { ready: Default::default() });
    let (bound, ops) = http::serve(args.metrics_addr, metrics.clone(), health.clone())
        .await
        .with_context(|| format!("listening on {}", args.metrics_addr))?;
    tracing::info!(
        %version,
        %routing,
        api_version = %args.api_version,
        claim_unlabeled = args.claim_unlabeled,
        %identity,
        metrics = %bound,
        "starting"
    );

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(signal_stop(stop_tx.clone()));
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    let lock = args.leader_elect.then(|| {
        Arc::new(LeaseLock::new(
            client.clone(),
            &lease_namespace,
            line_name(routing),
            identity.clone(),
            Duration::from_secs(args.lease_duration_seconds),
            args.api_version.to_string(),
        ))
    });
    let renew = Duration::from_secs(args.lease_renew_seconds.max(1));
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Some(lock) = &lock {
        health.ready.store(true, Ordering::Relaxed);
        tracing::info!(lease = %lock.name, namespace = %lease_namespace, "waiting for leadership");
        tokio::select! {
            acquired = lock.acquire(renew) => {
                if let Err(e) = acquired {
                    ops.abort();
                    return Err(e.into());
                }
            }
            _ = stopped() => {
                ops.abort();
                return Ok(());
            }
        }
        health.ready.store(false, Ordering::Relaxed);
        metrics.leader.set(1);
        tracing::info!(lease = %lock.name, "leading");
        let (lock2, stop, lost2, metrics2) = (lock.clone(), stop_tx.clone(), lost.clone(), metrics.clone());
        tokio::spawn(async move {
            lock2.hold(renew).await;
            tracing::error!(lease = %lock2.name, "leadership lost; stopping");
            metrics2.leader.set(0);
            lost2.store(true, Ordering::Relaxed);
            let _ = stop.send(true);
        });
    }

    let ready = health.clone();
    let result = controller::run(
        clients,
        chart,
        settings,
        metrics,
        move || ready.ready.store(true, Ordering::Relaxed),
        stopped(),
    )
    .await;
    if let Some(lock) = &lock {
        if !lost.load(Ordering::Relaxed) {
            lock.release().await;
        }
    }
    ops.abort();
    result?;
    if lost.load(Ordering::Relaxed) {
        anyhow::bail!("lost the leader lease");
    }
    tracing::info!("stopped");
    Ok(())
}

/// The settings of this instance, from its flags (and environment), built once.
fn settings(args: &RunArgs) -> Settings {
    let release = args.release.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").into());
    let routing = args.routing.clone().unwrap_or_else(|| default_routing(&release, args.api_version));
    let identity = args.identity.clone().or_else(|| std::env::var("POD_NAME").ok()).unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
        format!("{}-{}", host.trim(), std::process::id())
    });
    Settings {
        line: Line { routing, serves: args.api_version, claim_unlabeled: args.claim_unlabeled },
        namespace: args.watch_namespace.clone(),
        resync: Duration::from_secs(args.resync_seconds),
        unserved_after: Duration::from_secs(args.unserved_after_seconds),
        concurrency: args.concurrency,
        identity,
        release,
    }
}

/// SIGTERM (Kubernetes) or SIGINT (a terminal) starts a graceful stop.
async fn signal_stop(stop: tokio::sync::watch::Sender<bool>) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: stopping"),
    }
    let _ = stop.send(true);
}
