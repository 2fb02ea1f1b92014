//! Shared test parts: the bundle-tool binary, a real `docker-registry` on 127.0.0.1 with an
//! ephemeral port, `skopeo` as the independent client, and self-removing temp dirs.
#![allow(dead_code)]

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
    assert!(out.status.success(), "{cmd:?} failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
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
        std::fs::write(&config, "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: /nonexistent\nhttp:\n  addr: 127.0.0.1:5000\n").unwrap();
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


/// A generated, valid bundle directory `dir/<version>`.
pub fn bundle(dir: &Path, version: &str) -> PathBuf {
    let meta = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/manifests/metadata.yaml");
    run(tool().args(["bundle", "generate", "--version", version, "--metadata", meta, "--image", "127.0.0.1/op", "--output"]).arg(dir));
    dir.join(version)
}
