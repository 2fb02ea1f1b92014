//! bundle-tool: OLM artifacts for model-orchestra without Docker, operator-sdk or opm.
//! Only the skeleton exists so far; see the issues for the bundle and catalog commands.
use clap::Parser;

#[derive(Parser)]
#[command(name = "bundle-tool", version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    anyhow::bail!("no command implemented yet: bundle and catalog commands are tracked in the bundle-tool issues")
}
