//! `model-orchestra-operator diff`: what the operator would change in the cluster for one
//! ModelOrchestra (a manifest, or a live CR by name). Exit status 0: nothing would change;
//! 1: something would; 2: an error (an invalid ModelOrchestra, the cluster unreachable, a
//! refusal).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use model_orchestra::chart::Chart;
use model_orchestra::diff::{self, DiffError, Target};
use model_orchestra::error::RenderError;
use model_orchestra_api::ApiVersion;

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("cr").required(true).args(["file", "name"]))]
pub struct DiffArgs {
    /// The ModelOrchestra manifest as it would be applied (YAML or JSON); `-` reads
    /// standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    file: Option<String>,
    /// A live ModelOrchestra, by name: what its next reconcile would change.
    #[arg(long)]
    name: Option<String>,
    /// Namespace when the manifest sets none [default: the kubeconfig's].
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// The version the CR is served as [default: the manifest's; for a live CR, its route].
    #[arg(long, value_parser = crate::api_version_parser())]
    api_version: Option<ApiVersion>,
    /// Render this chart directory instead of the embedded chart of the CR's version.
    #[arg(long, env = "MODEL_ORCHESTRA_CHART", value_name = "DIR")]
    chart: Option<PathBuf>,
}

/// Exit status when something would change.
const CHANGES: u8 = 1;
/// Exit status of an error.
const ERROR: u8 = 2;

pub fn diff(args: DiffArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return error(anyhow::Error::new(e).context("starting the async runtime")),
    };
    match runtime.block_on(run(args)) {
        Ok(report) => {
            for w in &report.warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", report.text());
            if report.has_changes() {
                ExitCode::from(CHANGES)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => error(e),
    }
}

fn error(e: anyhow::Error) -> ExitCode {
    eprintln!("error: {e:#}");
    ExitCode::from(ERROR)
}

async fn run(args: DiffArgs) -> anyhow::Result<diff::Report> {
    // The manifest is read and parsed before the cluster is contacted.
    let manifest = match &args.file {
        Some(file) => {
            let text = if file == "-" {
                let mut s = String::new();
                std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
                s
            } else {
                std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?
            };
            let source = if file == "-" { "<stdin>" } else { file.as_str() };
            let doc = model_orchestra_api::parse::document_from_yaml(&text)
                .with_context(|| format!("{source}: invalid ModelOrchestra"))?;
            Some((source.to_string(), doc))
        }
        None => None,
    };
    let chart = args.chart.as_deref().map(Chart::from_dir).transpose()?;
    let mut config =
        kube::Config::infer().await.context("no Kubernetes configuration (in-cluster or kubeconfig) found")?;
    let default_namespace = config.default_namespace.clone();
    config.headers.push((
        http::header::USER_AGENT,
        format!("model-orchestra-operator/{} (diff)", env!("CARGO_PKG_VERSION")).parse().expect("a header value"),
    ));
    let client = kube::Client::try_from(config).context("creating the Kubernetes client")?;
    let (source, target) = match (manifest, &args.name) {
        (Some((source, doc)), _) => {
            let namespace =
                doc.metadata.namespace.clone().or(args.namespace.clone()).unwrap_or(default_namespace.clone());
            let live = diff::live_cr(&client, &namespace, doc.name()).await?;
            let serves = args.api_version.unwrap_or(doc.api_version);
            (source, Target { doc, namespace, serves, live })
        }
        (None, Some(name)) => {
            let namespace = args.namespace.clone().unwrap_or(default_namespace);
            let live = diff::live_cr(&client, &namespace, name)
                .await?
                .with_context(|| format!("ModelOrchestra {namespace}/{name} not found"))?;
            let value = serde_json::to_value(&live).expect("objects serialise");
            let doc = model_orchestra_api::parse::document(&value)
                .with_context(|| format!("ModelOrchestra {namespace}/{name}: invalid"))?;
            let serves = args.api_version.unwrap_or_else(|| diff::served_as(&live));
            (format!("ModelOrchestra {namespace}/{name}"), Target { doc, namespace, serves, live: Some(live) })
        }
        (None, None) => unreachable!("clap requires --filename or --name"),
    };
    diff::diff(&client, &target, chart.as_ref()).await.map_err(|e| match e {
        DiffError::Render(RenderError::Input(errors)) => anyhow::anyhow!("{source}: invalid ModelOrchestra: {errors}"),
        e @ DiffError::Render(_) => anyhow::Error::new(e).context(format!("{source}: cannot render")),
        e => anyhow::Error::new(e).context(format!("{source}: cannot diff")),
    })
}
