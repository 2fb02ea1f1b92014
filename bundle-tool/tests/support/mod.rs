//! Shared test parts: the bundle-tool binary, a real `docker-registry` on 127.0.0.1 with an
//! ephemeral port, `skopeo` as the independent client, and self-removing temp dirs.
#![allow(dead_code)]

pub mod oracle;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn tool() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn skopeo(args: &[&str]) -> Value {
    let out = run(Command::new("skopeo").args(args));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

pub struct Temp(pub PathBuf);

impl Temp {
    pub fn new(tag: &str) -> Temp {
        let p = std::env::temp_dir().join(format!("bt-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Temp(p)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `docker-registry serve` on 127.0.0.1 with an ephemeral port and its own storage; stopped on drop.
pub struct Registry {
    child: Child,
    pub addr: String,
    _dir: Temp,
}

impl Registry {
    pub fn start(tag: &str) -> Registry {
        let dir = Temp::new(&format!("registry-{tag}"));
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.0.join("config.yml");
        std::fs::write(
            &config,
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: /nonexistent\nhttp:\n  addr: 127.0.0.1:5000\n",
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .env("REGISTRY_HTTP_ADDR", &addr)
            .env("REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY", dir.0.join("data"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("docker-registry is not on PATH: run `make test` (scripts/install-test-deps.sh installs it)");
        let start = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(start.elapsed() < Duration::from_secs(20), "docker-registry did not start on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { child, addr, _dir: dir }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies `reference` with skopeo into an OCI directory under `work` and unpacks every
/// layer, in order, into `work/root`; returns that root.
pub fn unpack_with_skopeo(work: &Path, reference: &str) -> PathBuf {
    let copy = work.join("copy");
    run(Command::new("skopeo")
        .args(["copy", "--src-tls-verify=false", &format!("docker://{reference}")])
        .arg(format!("oci:{}:x", copy.display())));
    let raw = skopeo(&["inspect", "--raw", "--tls-verify=false", &format!("docker://{reference}")]);
    let root = work.join("root");
    std::fs::create_dir_all(&root).unwrap();
    for layer in raw["layers"].as_array().expect("an image manifest") {
        let digest = layer["digest"].as_str().unwrap().trim_start_matches("sha256:");
        run(Command::new("tar").arg("-xzf").arg(copy.join("blobs/sha256").join(digest)).arg("-C").arg(&root));
    }
    root
}

/// A generated, valid bundle directory `dir/<version>`.
pub fn bundle(dir: &Path, version: &str) -> PathBuf {
    let meta = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/manifests/metadata.yaml");
    run(tool()
        .args(["bundle", "generate", "--version", version, "--metadata", meta, "--image", "127.0.0.1/op", "--output"])
        .arg(dir));
    dir.join(version)
}

/// A base image written by hand as an OCI layout (a layer with `etc/base-release`, a config
/// with Env, Cmd and a label) and pushed with skopeo, so nothing of ours built it.
pub fn push_hand_made_base(work: &Path, reference: &str) {
    use sha2::{Digest, Sha256};
    let hex = |b: &[u8]| Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect::<String>();
    let root = work.join("base-root/etc");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("base-release"), "base 1\n").unwrap();
    let tar_path = work.join("base.tar");
    run(Command::new("tar").arg("-cf").arg(&tar_path).arg("-C").arg(work.join("base-root")).arg("etc"));
    let tar = std::fs::read(&tar_path).unwrap();
    run(Command::new("gzip").arg("-kn").arg(&tar_path));
    let gz = std::fs::read(work.join("base.tar.gz")).unwrap();
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin", "SSL_CERT_FILE=/base/certs.pem"], "Cmd": ["/bin/sh"], "Labels": {"base.example/name": "hand-made"}},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", hex(&tar))]},
    });
    let config = serde_json::to_vec(&config).unwrap();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{}", hex(&config)), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{}", hex(&gz)), "size": gz.len()}],
    }))
    .unwrap();
    let layout = work.join("base-layout");
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    for blob in [&gz, &config, &manifest] {
        std::fs::write(blobs.join(hex(blob)), blob).unwrap();
    }
    std::fs::write(layout.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{}", hex(&manifest)), "size": manifest.len(), "annotations": {"org.opencontainers.image.ref.name": "base"}}]});
    std::fs::write(layout.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    run(Command::new("skopeo")
        .args(["copy", "--dest-tls-verify=false"])
        .arg(format!("oci:{}:base", layout.display()))
        .arg(format!("docker://{reference}")));
}
