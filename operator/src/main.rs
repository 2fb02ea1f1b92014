//! `model-orchestra-operator`: run the controller, render a ModelOrchestra offline, or print
//! the generated manifests (CRD, RBAC, values schema) and the values reference.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};
use model_orchestra::chart::Chart;
use model_orchestra::error::RenderError;
use model_orchestra_api::ApiVersion;

/// `--api-version`: one of the versions this binary serves, as the enum.
pub(crate) fn api_version_parser() -> impl TypedValueParser<Value = ApiVersion> {
    PossibleValuesParser::new(ApiVersion::ALL.map(ApiVersion::as_str))
        .map(|v| v.parse::<ApiVersion>().expect("only known versions are possible"))
}

#[derive(Parser)]
#[command(name = "model-orchestra-operator", version, about = "Deploys ModelOrchestra LLM inference stacks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller against the cluster of the current kubeconfig (or in-cluster).
    Run(Box<run::RunArgs>),
    /// Print the ModelOrchestra CustomResourceDefinition as YAML.
    Crd,
    /// Print the operator's ClusterRole (derived from the kinds the chart renders).
    Rbac {
        /// The ClusterRole's name.
        #[arg(long, default_value = "model-orchestra-operator")]
        name: String,
    },
    /// Print the manifests that deploy the operator: Namespace, ServiceAccount, ClusterRole,
    /// ClusterRoleBinding, Deployment.
    Manifests {
        /// The operator image.
        #[arg(long, env = "IMG", default_value = concat!("ghcr.io/titanml/model-orchestra-operator:", env!("CARGO_PKG_VERSION")))]
        image: String,
        /// Namespace the operator runs in.
        #[arg(long, default_value = "model-orchestra-system")]
        namespace: String,
        /// Routing value served [default: v<MAJOR>, at least the first line of --api-version].
        #[arg(long)]
        routing: Option<String>,
        /// Also take CRs without the operatorVersion label.
        #[arg(long)]
        claim_unlabeled: bool,
        /// The ModelOrchestra version the operator serves [default: the operator's, v1alpha1].
        #[arg(long, value_parser = api_version_parser())]
        api_version: Option<ApiVersion>,
        /// Also the HTTP API: its Deployment, ServiceAccount, Service and Role (docs: "HTTP API").
        #[arg(long)]
        http_api: bool,
        /// Only the HTTP API (to add it beside an installed operator).
        #[arg(long, conflicts_with = "http_api")]
        only_http_api: bool,
    },
    /// Print the JSON Schema of a chart's values (charts/model-orchestra/values.schema.json).
    ValuesSchema {
        /// The ModelOrchestra version whose values (chart) to describe.
        #[arg(long, value_parser = api_version_parser(), default_value = "v1alpha1")]
        api_version: ApiVersion,
    },
    /// Print the values reference of a chart as Markdown (docs/src/values/<version>.md): every
    /// field of the spec with its type, default (values.yaml) and description (the schema).
    ValuesReference {
        /// The ModelOrchestra version whose values (chart) to describe.
        #[arg(long, value_parser = api_version_parser(), default_value = "v1alpha1")]
        api_version: ApiVersion,
    },
    /// Serve the HTTP API (JSON under /api/v1, a status page at /) for API key holders.
    ServeApi(Box<api::ServeApiArgs>),
    /// Manage the HTTP API's keys (with an administrator's kubeconfig).
    ApiKey {
        #[command(subcommand)]
        command: api::ApiKeyCommand,
    },
    /// Print the HTTP API's OpenAPI document (httpapi/openapi.json).
    Openapi,
    /// Render a ModelOrchestra (v1alpha1 or v1alpha2) offline, like `helm template`: the exact
    /// objects the operator applies, on stdout; warnings on stderr.
    Render {
        /// The ModelOrchestra manifest (YAML or JSON); `-` reads standard input.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: String,
        /// Namespace when the manifest sets none.
        #[arg(short = 'n', long, env = "MODEL_ORCHESTRA_NAMESPACE", default_value = "default")]
        namespace: String,
        /// Render this chart directory instead of the embedded chart of the manifest's version.
        #[arg(long, env = "MODEL_ORCHESTRA_CHART", value_name = "DIR")]
        chart: Option<PathBuf>,
    },
    /// Show what the operator would change in the cluster for a ModelOrchestra (a manifest,
    /// or a live CR by name): each object created, changed (a unified diff), pruned or
    /// unchanged, from server-side dry runs. Writes nothing. Exit status: 0 no changes,
    /// 1 changes, 2 an error.
    Diff(Box<diff_cmd::DiffArgs>),
    /// Serve the model gateway of a ModelOrchestra (in its pod): route OpenAI's and Ollama's
    /// APIs by model, wake sleeping applications, put idle ones to sleep.
    Gateway(Box<gateway_cmd::GatewayArgs>),
    /// Serve `GET /wait-idle` beside an engine (in its pod), answered once nothing is
    /// connected to the engine's port: an Ollama replica's `preStop` hook, since Ollama cuts
    /// what it serves when told to stop.
    DrainHelper(drain_cmd::DrainHelperArgs),
}

mod api;
mod diff_cmd;
mod drain_cmd;
mod gateway_cmd;
mod run;
mod sock_diag;

/// mimalloc, unless built with `--features system-allocator`: heap profilers such as
/// heaptrack see only the system allocator.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Both kube and (in bundle-tool) oci-client use rustls; with more than one crypto
    // provider compiled in, rustls needs to be told which one to use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let command = match Cli::parse().command {
        Command::Diff(args) => return diff_cmd::diff(*args),
        command => command,
    };
    match execute(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn execute(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run(args) => run::run(*args)?,
        Command::Gateway(args) => gateway_cmd::gateway(*args)?,
        Command::DrainHelper(args) => drain_cmd::drain_helper(args)?,
        Command::Crd => print!("{}", model_orchestra_api::crd::crd_yaml()),
        Command::Rbac { name } => print!("{}", model_orchestra_api::deploy::rbac::cluster_role_yaml(&name)),
        Command::ServeApi(args) => api::serve(*args)?,
        Command::ApiKey { command } => api::api_key(command)?,
        Command::Openapi => print!("{}", model_orchestra_http::openapi::json()),
        Command::Manifests { image, namespace, routing, claim_unlabeled, api_version, http_api, only_http_api } => {
            let served = api_version.unwrap_or(ApiVersion::V1alpha1);
            let routing = routing
                .unwrap_or_else(|| model_orchestra_api::lines::default_routing(env!("CARGO_PKG_VERSION"), served));
            let options = model_orchestra_api::deploy::operator::DeployOptions {
                namespace,
                image,
                routing,
                claim_unlabeled,
                api_version,
                release: None,
            };
            if !only_http_api {
                print!("{}", model_orchestra_api::deploy::operator::all_yaml(&options));
            }
            if http_api || only_http_api {
                print!("{}", model_orchestra_api::deploy::httpapi::all_yaml(&options));
            }
        }
        Command::ValuesSchema { api_version } => {
            print!("{}", model_orchestra_api::crd::values_schema_json(api_version))
        }
        Command::ValuesReference { api_version } => {
            print!("{}", model_orchestra::reference::values_reference(api_version))
        }
        Command::Render { file, namespace, chart } => render(&file, &namespace, chart.as_deref())?,
        Command::Diff(_) => unreachable!("diff sets its own exit status"),
    }
    Ok(())
}

/// `render`: the objects as one YAML stream on stdout, warnings on stderr, and nothing on
/// stdout when the manifest is invalid.
fn render(file: &str, namespace: &str, chart: Option<&std::path::Path>) -> anyhow::Result<()> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
        s
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?
    };
    let source = if file == "-" { "<stdin>" } else { file };
    let doc = model_orchestra_api::parse::document_from_yaml(&text)
        .with_context(|| format!("{source}: invalid ModelOrchestra"))?;
    let chart = chart.map(Chart::from_dir).transpose()?;
    let rendered = model_orchestra::render_document_yaml(&doc, chart.as_ref(), namespace).map_err(|e| match e {
        RenderError::Input(errors) => anyhow::anyhow!("{source}: invalid ModelOrchestra: {errors}"),
        chart => anyhow::Error::new(chart).context(format!("{source}: cannot render")),
    })?;
    drop((text, doc));
    for w in &rendered.warnings {
        eprintln!("warning: {source}: {w}");
    }
    // Object by object: the whole stream is never one string.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    for document in &rendered.documents {
        out.write_all(document.as_bytes()).context("writing standard output")?;
    }
    out.flush().context("writing standard output")?;
    Ok(())
}
