//! The open engine the local cluster offers its real node: Ollama built from its pinned Go
//! module (`tools/ollama`) as an image in the cluster's registry under the official image's
//! name — `docker.io/ollama/ollama:<version>` is pulled from there, since the cluster
//! mirrors docker.io — and small real models (`scripts/test-models.sh`: GGUF files from PyPI)
//! pushed into its registry as Ollama models, as `ollama push` writes them, for Ollama to pull
//! from the models registry ([`crate::registry`]).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::{tools, Cluster, Error};

/// The Ollama version `tools/ollama` pins, and the official image's tag.
pub const VERSION: &str = "0.17.4";
/// The official image's path on docker.io.
pub const IMAGE_PATH: &str = "ollama/ollama";

/// A model the cluster can serve: its Ollama name and the GGUF file it is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestModel {
    pub name: &'static str,
    pub gguf: &'static str,
}

/// SmolLM2-135M-Instruct (Q4_1, 98 MB): a chat model with a chat template.
pub const SMOLLM2: TestModel = TestModel { name: "smollm2:135m", gguf: "SmolLM2-135M-Instruct.Q4_1.gguf" };
/// Gemma 3 270M (Q4_K_M, 253 MB): a base model (no chat template).
pub const GEMMA3: TestModel = TestModel { name: "gemma3:270m", gguf: "gemma-3-270m-q4_k_m.gguf" };

/// Where `scripts/test-models.sh` puts the models.
pub fn models_dir() -> PathBuf {
    tools::bin_dir().join("../models")
}

/// The image reference of Ollama in `registry`, at the official image's path.
pub fn image_in(registry: &str) -> String {
    format!("{registry}/{IMAGE_PATH}:{VERSION}")
}

fn failed(what: &str, message: impl std::fmt::Display) -> Error {
    Error::Start { component: what.into(), message: message.to_string(), log: PathBuf::new(), tail: String::new() }
}

impl Cluster {
    /// Pushes the Ollama image (the static binary `scripts/build-go-tools.sh ollama` built)
    /// into the cluster's registry under the official image's path; returns the name pods
    /// use, `docker.io/ollama/ollama:<version>`.
    pub async fn push_ollama_image(&self) -> Result<String, Error> {
        let registry =
            self.registry.as_deref().ok_or_else(|| failed("the Ollama image", "the cluster has no real node"))?;
        let program = tools::program("ollama")?;
        let binary = std::fs::read(&program).map_err(|e| Error::io(&program, e))?;
        let ca = std::fs::read("/etc/ssl/certs/ca-certificates.crt").ok();
        let image = mo_images::ollama_image(&binary, VERSION, ca.as_deref());
        let options = mo_images::push::PushOptions {
            access: mo_images::registry::Access { insecure: true, ..Default::default() },
            force: true,
            quiet: true,
        };
        mo_images::push::push(&image, &image_in(registry), &options)
            .await
            .map_err(|e| failed("the Ollama image", e))?;
        Ok(format!("docker.io/{IMAGE_PATH}:{VERSION}"))
    }

    /// Pushes `models` into the cluster's registry as Ollama models (`library/<name>`), with
    /// an `ollama serve` of the cluster's own in its namespace: `create` from the GGUF file,
    /// then `push` (plain HTTP: the registry is the node's). Pods pull them from the models
    /// registry as `registry.kube-system.svc:5000/library/<name>`.
    pub async fn push_models(&self, models: &[TestModel]) -> Result<(), Error> {
        let models_registry =
            self.models_registry.as_ref().ok_or_else(|| failed("pushing models", "the cluster has no real node"))?;
        let ollama = tools::program("ollama")?;
        for m in models {
            let file = models_dir().join(m.gguf);
            if !file.is_file() {
                return Err(Error::MissingProgram {
                    name: format!("the model file {} (scripts/test-models.sh)", m.gguf),
                    path: file,
                });
            }
        }
        let work = self.dir().join(format!("model-push-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
        let port = crate::process::free_port().map_err(|e| Error::io(&work, e))?;
        let host = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(work.join("serve.log")).map_err(|e| Error::io(&work, e))?;
        let mut serve = self.isolation.command(&ollama);
        serve
            .arg("serve")
            .env("OLLAMA_HOST", &host)
            .env("OLLAMA_MODELS", work.join("models"))
            .env("HOME", &work)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| Error::io(&work, e))?)
            .stderr(log);
        let mut server = crate::process::spawn(serve).map_err(|e| failed("ollama serve", e))?;
        let up = crate::wait_http_ok(
            || self.isolation.connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
            "/",
            "ollama serve",
            &work,
        )
        .await;
        let result = async {
            up?;
            for m in models {
                let modelfile = work.join(format!("{}.Modelfile", m.name.replace(':', "-")));
                std::fs::write(&modelfile, format!("FROM {}\n", models_dir().join(m.gguf).display()))
                    .map_err(|e| Error::io(&modelfile, e))?;
                let pushed = format!("{}/library/{}", models_registry.push, m.name);
                for args in [
                    vec!["create".to_string(), m.name.to_string(), "-f".into(), modelfile.display().to_string()],
                    vec!["cp".into(), m.name.to_string(), pushed.clone()],
                    vec!["push".into(), "--insecure".into(), pushed.clone()],
                ] {
                    let started = Instant::now();
                    let out = self
                        .isolation
                        .command(&ollama)
                        .args(&args)
                        .env("OLLAMA_HOST", &host)
                        .env("HOME", &work)
                        .stdin(Stdio::null())
                        .output()
                        .map_err(|e| failed("ollama", e))?;
                    if !out.status.success() {
                        return Err(failed(
                            &format!("ollama {}", args.join(" ")),
                            format!(
                                "{} after {:?}: {}",
                                out.status,
                                started.elapsed(),
                                String::from_utf8_lossy(&out.stderr)
                            ),
                        ));
                    }
                }
            }
            Ok(())
        }
        .await;
        server.stop(Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&work);
        result
    }
}
