//! `bundle-tool`: OLM bundles for model-orchestra without Docker, operator-sdk or opm.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bundle_tool::bundle::generate::{bundle_files, write_bundle, GenerateOptions, WriteOutcome};
use bundle_tool::bundle::validate::{validate, Severity};
use bundle_tool::bundle::CrdMode;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "bundle-tool", version, about = "OLM bundles for model-orchestra without Docker, operator-sdk or opm")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// registry+v1 bundles.
    #[command(subcommand)]
    Bundle(BundleCommand),
    /// Print the shared CRD (every served version), installed once per cluster.
    Crds,
}

#[derive(Subcommand)]
enum BundleCommand {
    /// Generate bundles/<version>: the CSV (from the operator's Deployment and RBAC),
    /// the CRD in owned mode, metadata/annotations.yaml and bundle.Dockerfile.
    Generate {
        /// The release, strict semver (X.Y.Z).
        #[arg(long, env = "VERSION")]
        version: String,
        /// The CRD version this release serves.
        #[arg(long, env = "CRD_VERSION", default_value = "v1alpha1")]
        crd_version: String,
        /// Channels, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "stable")]
        channels: Vec<String>,
        #[arg(long)]
        default_channel: Option<String>,
        /// Operator image repository (tagged v<version>), or a full reference.
        #[arg(long, env = "IMAGE_TAG_BASE", default_value = "ghcr.io/titanml/model-orchestra-operator")]
        image: String,
        #[arg(long, value_enum, default_value_t = Mode::Shared)]
        crd_mode: Mode,
        /// The installed operator also takes CRs without the operatorVersion label.
        #[arg(long)]
        claim_unlabeled: bool,
        /// The operator's catalog metadata (display name, maintainers, icon…).
        #[arg(long, default_value = "config/manifests/metadata.yaml")]
        metadata: PathBuf,
        #[arg(long, default_value = "bundles")]
        output: PathBuf,
    },
    /// Validate a bundle directory; exits non-zero on any error.
    Validate { dir: PathBuf },
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Shared,
    Owned,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Crds => print!("{}", serde_yaml::to_string(&bundle_tool::crds::crd())?),
        Command::Bundle(BundleCommand::Generate { version, crd_version, channels, default_channel, image, crd_mode, claim_unlabeled, metadata, output }) => {
            let version = semver::Version::parse(version.trim_start_matches('v'))
                .with_context(|| format!("--version {version}: not strict semver X.Y.Z (fix: e.g. --version 1.2.3)"))?;
            let meta = bundle_tool::metadata::load(&metadata)?;
            let crd_mode = match crd_mode {
                Mode::Shared => CrdMode::Shared,
                Mode::Owned => CrdMode::Owned,
            };
            let opts = GenerateOptions { version: version.clone(), crd_version, channels, default_channel, image, crd_mode, claim_unlabeled };
            bundle_tool::crds::refuse_incompatible(&bundle_tool::crds::crd(), &output)?;
            let files = bundle_files(&opts, &meta)?;
            let dir = output.join(version.to_string());
            match write_bundle(&dir, &files)? {
                WriteOutcome::Created => eprintln!("wrote {}", dir.display()),
                WriteOutcome::Unchanged => eprintln!("{} is up to date", dir.display()),
            }
            let findings = validate(&dir);
            report(&dir, &findings)?;
        }
        Command::Bundle(BundleCommand::Validate { dir }) => {
            let findings = validate(&dir);
            report(&dir, &findings)?;
            eprintln!("{}: valid registry+v1 bundle", dir.display());
        }
    }
    Ok(())
}

fn report(dir: &std::path::Path, findings: &[bundle_tool::bundle::validate::Finding]) -> anyhow::Result<()> {
    for f in findings {
        eprintln!("{}: {f}", dir.display());
    }
    let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
    if errors > 0 {
        anyhow::bail!("{}: {errors} validation error(s)", dir.display());
    }
    Ok(())
}
