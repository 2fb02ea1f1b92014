//! `model-orchestra-operator`: run the controller, render a ModelOrchestra offline, or print
//! the generated manifests (CRD, RBAC, values schema).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use model_orchestra::chart::{to_yaml_stream, Chart, Contract};
use model_orchestra::input::Versioned;

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
        /// Routing value served [default: v<MAJOR>].
        #[arg(long)]
        routing: Option<String>,
        /// Also take CRs without the operatorVersion label.
        #[arg(long)]
        claim_unlabeled: bool,
        /// The ModelOrchestra version the operator serves [default: the operator's, v1alpha1].
        #[arg(long, value_parser = ["v1alpha1", "v1alpha2"])]
        api_version: Option<String>,
    },
    /// Print the JSON Schema of the chart's values (charts/model-orchestra/values.schema.json).
    ValuesSchema {
        /// The ModelOrchestra version whose values (chart) to describe.
        #[arg(long, value_parser = ["v1alpha1", "v1alpha2"], default_value = "v1alpha1")]
        api_version: String,
    },
    /// Render a ModelOrchestra (v1alpha1 or v1alpha2) offline, like `helm template`: the exact
    /// objects the operator applies.
    Render {
        /// The ModelOrchestra manifest (YAML or JSON); `-` reads standard input.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: String,
        /// Namespace when the manifest sets none.
        #[arg(short = 'n', long, env = "MODEL_ORCHESTRA_NAMESPACE", default_value = "default")]
        namespace: String,
        /// Render this chart directory instead of the embedded chart.
        #[arg(long, env = "MODEL_ORCHESTRA_CHART", value_name = "DIR")]
        chart: Option<PathBuf>,
    },
}

mod run;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Both kube and (in bundle-tool) oci-client use rustls; with more than one crypto
    // provider compiled in, rustls needs to be told which one to use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match execute(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn execute(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => run::run(*args)?,
        Command::Crd => print!("{}", model_orchestra::crd::crd_yaml()),
        Command::Rbac { name } => print!("{}", model_orchestra::manifests::rbac::cluster_role_yaml(&name)),
        Command::Manifests { image, namespace, routing, claim_unlabeled, api_version } => {
            let routing = routing.unwrap_or_else(|| {
                model_orchestra::reconcile::routing::default_routing_value(env!("CARGO_PKG_VERSION"))
            });
            let options = model_orchestra::manifests::deploy::DeployOptions {
                namespace,
                image,
                routing,
                claim_unlabeled,
                api_version,
                release: None,
            };
            print!("{}", model_orchestra::manifests::deploy::all_yaml(&options));
        }
        Command::ValuesSchema { api_version } => {
            let contract = Contract::from_api_version(Some(&api_version)).map_err(anyhow::Error::msg)?;
            print!("{}", model_orchestra::crd::values_schema_json_for(contract))
        }
        Command::Render { file, namespace, chart } => {
            let text = if file == "-" {
                let mut s = String::new();
                std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
                s
            } else {
                std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?
            };
            let source = if file == "-" { "<stdin>" } else { file.as_str() };
            let mo = model_orchestra::input::parse_versioned(&text)
                .with_context(|| format!("{source}: invalid ModelOrchestra"))?;
            let contract = match &mo {
                Versioned::V1alpha1(_) => Contract::V1alpha1,
                Versioned::V1alpha2(_) => Contract::V1alpha2,
            };
            let chart = match chart {
                Some(dir) => Chart::from_dir(&dir),
                None => Chart::embedded_for(contract),
            }?;
            let objects = match &mo {
                Versioned::V1alpha1(mo) => model_orchestra::render(&chart, mo, &namespace),
                Versioned::V1alpha2(mo) => model_orchestra::render_v1alpha2(&chart, mo, &namespace),
            }
            .with_context(|| format!("{source}: cannot render"))?;
            print!("{}", to_yaml_stream(&objects));
        }
    }
    Ok(())
}
