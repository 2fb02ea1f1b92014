//! `bundle-tool`: OLM bundles for model-orchestra without Docker, operator-sdk or opm.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bundle_tool::bundle::generate::{bundle_files, write_bundle, GenerateOptions, WriteOutcome};
use bundle_tool::bundle::validate::{validate, Severity};
use bundle_tool::bundle::CrdMode;
use bundle_tool::catalog::bundle::Objects;
use bundle_tool::catalog::source::Sources;
use bundle_tool::catalog::{Format, RenderSummary};
use bundle_tool::image::auth::Credentials;
use bundle_tool::image::registry::{connect, Access, PulledImage};
use bundle_tool::subscriptions::{Approval, Olm, SubscriptionOptions};
use clap::{Parser, Subcommand};

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
    /// Container images.
    #[command(subcommand)]
    Image(ImageCommand),
    /// File-Based Catalogs: render the semver template, validate, build the catalog image.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Manifests that install one version line from a catalog image (OLM v1 or v0).
    Subscriptions {
        /// The catalog image (with a tag or digest).
        #[arg(long)]
        catalog_image: String,
        /// The channel to follow, e.g. stable-v1; its major version is the routing value.
        #[arg(long)]
        channel: String,
        /// Install namespace (default model-orchestra-v<MAJOR>).
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long, value_enum, default_value_t = Olm::V1)]
        olm: Olm,
        #[arg(long, default_value = "model-orchestra-operator")]
        package: String,
        /// Name of the ClusterCatalog / CatalogSource.
        #[arg(long, default_value = "model-orchestra-catalog")]
        catalog_name: String,
        /// OLM v0: the catalog image serves itself (built with `catalog build --base`).
        #[arg(long)]
        image_serves: bool,
        /// OLM v0: how the Subscription's InstallPlans are applied (Manual: each waits for
        /// `kubectl patch installplan … -p '{"spec":{"approved":true}}'`; default Automatic).
        #[arg(long, value_enum)]
        install_plan_approval: Option<Approval>,
    },
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// Render a semver template (schema olm.semver) to FBC exactly as `opm alpha
    /// render-template semver` does.
    Render {
        template: PathBuf,
        /// Write here instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Yaml)]
        output_format: Format,
        /// As opm's --migrate-level: bundle-object-to-csv-metadata carries one olm.csv.metadata
        /// per bundle instead of every manifest as olm.bundle.object.
        #[arg(long, value_enum, default_value_t = Objects::BundleObjects)]
        migrate_level: Objects,
        /// Read an image `…:vX.Y.Z` from DIR/X.Y.Z when that bundle directory exists.
        #[arg(long, value_name = "DIR")]
        bundles_dir: Option<PathBuf>,
        /// Cache of pulled bundle content, by digest (default ~/.cache/bundle-tool/bundles).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Validate a catalog directory with opm's rules; exits non-zero on any finding.
    Validate { dir: PathBuf },
    /// Build the catalog image: DIR under /configs plus the configs label. Without
    /// --base, FROM scratch (OLM v1, or OLM v0 with extractContent); with --base (an opm
    /// image), it runs `opm serve /configs`.
    Build {
        dir: PathBuf,
        #[arg(long, value_name = "REF")]
        base: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

#[derive(clap::Args)]
struct Output {
    /// Push to this reference (registry/repository:tag).
    #[arg(long, conflicts_with = "oci_layout", required_unless_present = "oci_layout")]
    push: Option<String>,
    /// Write an OCI image layout to this directory (tagged with --tag).
    #[arg(long, value_name = "PATH")]
    oci_layout: Option<PathBuf>,
    /// The tag inside the OCI layout.
    #[arg(long, default_value = "latest")]
    tag: String,
    /// Overwrite a tag that already names different content.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// How to reach registries.
#[derive(clap::Args)]
struct RegistryArgs {
    /// Plain HTTP to the registry (loopback registries always use it).
    #[arg(long, env = "REGISTRY_INSECURE")]
    insecure: bool,
    #[arg(long, env = "REGISTRY_USERNAME")]
    username: Option<String>,
    #[arg(long, env = "REGISTRY_PASSWORD", hide_env_values = true)]
    password: Option<String>,
}

impl RegistryArgs {
    fn access(&self) -> Access {
        Access {
            insecure: self.insecure,
            credentials: Credentials {
                username: self.username.clone(),
                password: self.password.clone(),
                docker_config: None,
            },
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// Pulls `--base` (with the output's registry access) when given.
fn pull_base(base: Option<&str>, output: &Output) -> anyhow::Result<Option<PulledImage>> {
    let Some(reference) = base else { return Ok(None) };
    eprintln!("pulling base image {reference}");
    let pulled = runtime()?.block_on(async { connect(reference, &output.registry.access())?.pull().await })?;
    eprintln!("  {} ({} layers)", pulled.digest, pulled.layers.len());
    Ok(Some(pulled))
}

#[derive(Subcommand)]
enum ImageCommand {
    /// The operator image: the binary (build it static) as entrypoint, non-root.
    Build {
        #[arg(long)]
        binary: PathBuf,
        /// CA bundle to include at /etc/ssl/certs/ca-certificates.crt.
        #[arg(long, default_value = "/etc/ssl/certs/ca-certificates.crt")]
        ca_bundle: PathBuf,
        /// Append to this image (pulled for linux/amd64) instead of starting FROM scratch.
        #[arg(long, value_name = "REF")]
        base: Option<String>,
        #[command(flatten)]
        output: Output,
    },
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
        #[arg(long, value_enum, default_value_t = CrdMode::Shared)]
        crd_mode: CrdMode,
        /// The installed operator also takes CRs without the operatorVersion label.
        #[arg(long)]
        claim_unlabeled: bool,
        /// Also install the HTTP API (docs: "HTTP API").
        #[arg(long)]
        http_api: bool,
        /// The operator's catalog metadata (display name, maintainers, icon…).
        #[arg(long, default_value = "config/manifests/metadata.yaml")]
        metadata: PathBuf,
        #[arg(long, default_value = "bundles")]
        output: PathBuf,
    },
    /// Validate a bundle directory; exits non-zero on any error.
    Validate { dir: PathBuf },
    /// Build the bundle image (FROM scratch: /manifests, /metadata, annotations as labels).
    Build {
        dir: PathBuf,
        #[command(flatten)]
        output: Output,
    },
    /// Print the bundle as plain manifests, for clusters without OLM: what OLM installs
    /// from it (namespace, ServiceAccounts, RBAC, Deployments, its other objects).
    Manifests { dir: PathBuf },
    /// Cut the release of a generated bundle: record it in releases.yaml beside it (the
    /// commit, every file's SHA-256), keep the shared CRD it installs (crds/VERSION.yaml),
    /// and write its plain manifests and that CRD to DIST/VERSION/.
    Release {
        dir: PathBuf,
        /// The commit the release is cut from (`git rev-parse HEAD`, the release's changes
        /// committed).
        #[arg(long)]
        commit: String,
        #[arg(long, default_value = "dist")]
        dist: PathBuf,
    },
}

fn main() -> ExitCode {
    // kube and oci-client both use rustls; pick the crypto provider before either starts.
    let _ = rustls::crypto::ring::default_provider().install_default();
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
        Command::Bundle(BundleCommand::Generate {
            version,
            crd_version,
            channels,
            default_channel,
            image,
            crd_mode,
            claim_unlabeled,
            http_api,
            metadata,
            output,
        }) => {
            let version = semver::Version::parse(version.trim_start_matches('v'))
                .with_context(|| format!("--version {version}: not strict semver X.Y.Z (fix: e.g. --version 1.2.3)"))?;
            let meta = bundle_tool::metadata::load(&metadata)?;
            let opts = GenerateOptions {
                version: version.clone(),
                crd_version,
                channels,
                default_channel,
                image,
                crd_mode,
                claim_unlabeled,
                http_api,
            };
            let crd = bundle_tool::crds::crd();
            bundle_tool::bundle::released_crds::refuse_incompatible(&crd, &output)?;
            let files = bundle_files(&opts, &meta, &crd)?;
            let dir = output.join(version.to_string());
            match write_bundle(&dir, &files)? {
                WriteOutcome::Created => eprintln!("wrote {}", dir.display()),
                WriteOutcome::Unchanged => eprintln!("{} is up to date", dir.display()),
            }
            let findings = validate(&dir);
            report(&dir, &findings)?;
        }
        Command::Bundle(BundleCommand::Build { dir, output }) => {
            check_bundle(&dir, "published as released")?;
            let image = bundle_tool::image::bundle_image(&dir)?;
            emit(&image, &output)?;
        }
        Command::Image(ImageCommand::Build { binary, ca_bundle, base, output }) => {
            let bytes = std::fs::read(&binary)
                .with_context(|| format!("{}: cannot read the operator binary", binary.display()))?;
            let ca = std::fs::read(&ca_bundle).ok();
            if ca.is_none() {
                eprintln!("warning: {}: no CA bundle; the image will trust no TLS certificates", ca_bundle.display());
            }
            let base = pull_base(base.as_deref(), &output)?;
            let image = bundle_tool::image::operator_image(&bytes, ca.as_deref(), base.as_ref());
            emit(&image, &output)?;
        }
        Command::Catalog(CatalogCommand::Render {
            template,
            output,
            output_format,
            migrate_level,
            bundles_dir,
            cache_dir,
            registry,
        }) => {
            let text = std::fs::read_to_string(&template)
                .with_context(|| format!("{}: cannot read the template", template.display()))?;
            let sources = Sources { bundles_dir, access: registry.access(), cache_dir, ..Default::default() };
            let started = std::time::Instant::now();
            let (catalog, provenance) =
                runtime()?.block_on(bundle_tool::catalog::render(&text, &template, &sources, migrate_level))?;
            bundle_tool::catalog::write_output(
                output.as_deref(),
                &bundle_tool::catalog::encode(&catalog, output_format),
            )?;
            if let Some(path) = &output {
                eprintln!("wrote {}", path.display());
            }
            eprintln!("{} in {:.2}s", RenderSummary::of(&catalog, &provenance), started.elapsed().as_secs_f64());
        }
        Command::Catalog(CatalogCommand::Validate { dir }) => {
            validate_catalog(&dir)?;
            eprintln!("{}: valid File-Based Catalog", dir.display());
        }
        Command::Catalog(CatalogCommand::Build { dir, base, output }) => {
            validate_catalog(&dir)?;
            let base = pull_base(base.as_deref(), &output)?;
            let image = bundle_tool::catalog::image::catalog_image(&dir, base.as_ref())?;
            emit(&image, &output)?;
        }
        Command::Subscriptions {
            catalog_image,
            channel,
            namespace,
            olm,
            package,
            catalog_name,
            image_serves,
            install_plan_approval,
        } => {
            let (header, objects) = bundle_tool::subscriptions::manifests(&SubscriptionOptions {
                catalog_image,
                channel,
                namespace,
                olm,
                package,
                catalog_name,
                image_serves,
                approval: install_plan_approval,
            })?;
            eprint!("{header}");
            print!("{}", bundle_tool::subscriptions::to_yaml(&header, &objects));
        }
        Command::Bundle(BundleCommand::Manifests { dir }) => {
            print!("{}", bundle_tool::bundle::install::manifests_yaml(&dir)?);
        }
        Command::Bundle(BundleCommand::Release { dir, commit, dist }) => {
            check_bundle(&dir, "released")?;
            let crd = bundle_tool::crds::crd();
            bundle_tool::bundle::released_crds::refuse_incompatible(
                &crd,
                dir.parent().unwrap_or(std::path::Path::new(".")),
            )?;
            bundle_tool::bundle::release::cut(&dir, &commit, &crd, &dist)?;
            eprintln!(
                "released {} from {commit}: recorded, its CRD and plain manifests in {}",
                dir.display(),
                dist.display()
            );
        }
        Command::Bundle(BundleCommand::Validate { dir }) => {
            if check_bundle(&dir, "valid as released")? {
                eprintln!("{}: valid registry+v1 bundle", dir.display());
            }
        }
    }
    Ok(())
}

/// Validates a bundle directory. A released bundle (recorded in `bundles/releases.yaml`)
/// is checked byte for byte against its record instead, and what today's validator finds in
/// it is printed, not refused: it was published so and can only be superseded. Returns
/// whether the bundle passed today's validator.
fn check_bundle(dir: &std::path::Path, released_as: &str) -> anyhow::Result<bool> {
    let findings = validate(dir);
    match bundle_tool::bundle::release::record_of(dir)? {
        Some(release) => {
            bundle_tool::bundle::release::verify(dir, &release)?;
            for f in &findings {
                eprintln!(
                    "{}: released {} (commit {}), {released_as}: {f}",
                    dir.display(),
                    release.version,
                    release.commit
                );
            }
            if !findings.is_empty() {
                eprintln!(
                    "{}: the released bundle is unchanged (its files match bundles/releases.yaml)",
                    dir.display()
                );
            }
            Ok(findings.is_empty())
        }
        None => report(dir, &findings).map(|()| true),
    }
}

fn validate_catalog(dir: &std::path::Path) -> anyhow::Result<()> {
    let catalog = bundle_tool::catalog::fbc::load_dir(dir)?;
    // opm's rules, then ours: no bundle's CRD may drop a version another line relies on.
    let mut findings = bundle_tool::catalog::validate::validate(&catalog);
    findings.extend(bundle_tool::catalog::side_by_side::check(&catalog));
    for f in &findings {
        eprintln!("{}: {f}", dir.display());
    }
    if !findings.is_empty() {
        anyhow::bail!("{}: {} catalog validation error(s)", dir.display(), findings.len());
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

fn emit(image: &bundle_tool::image::Image, output: &Output) -> anyhow::Result<()> {
    if let Some(dir) = &output.oci_layout {
        bundle_tool::image::layout::write(image, dir, &output.tag)?;
        println!("{}", image.manifest.digest);
        eprintln!("wrote OCI layout {}:{} ({})", dir.display(), output.tag, image.manifest.digest);
        return Ok(());
    }
    let reference = output.push.as_deref().expect("clap requires --push or --oci-layout");
    let opts =
        bundle_tool::image::push::PushOptions { access: output.registry.access(), force: output.force, quiet: false };
    eprintln!("pushing {reference}");
    match runtime()?.block_on(bundle_tool::image::push::push(image, reference, &opts))? {
        bundle_tool::image::push::Pushed::Uploaded(d) => {
            println!("{d}");
            eprintln!("pushed {reference}@{d}");
        }
        bundle_tool::image::push::Pushed::AlreadyThere(d) => {
            println!("{d}");
            eprintln!("{reference} already is {d}");
        }
    }
    Ok(())
}
