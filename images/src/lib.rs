//! OCI images without Docker: reproducible layers, image config and manifest built in
//! memory, then written as an OCI layout ([`layout`]) or pushed with oci-client ([`push`]);
//! and what each image of the project contains ([`operator_image`], [`pod_image`]).

pub mod auth;
pub mod layout;
pub mod push;
pub mod registry;

use std::collections::BTreeMap;
use std::io::Write;

use bytes::Bytes;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// A content-addressed blob.
#[derive(Debug, Clone)]
pub struct Blob {
    pub media_type: String,
    pub data: Bytes,
    pub digest: String,
}

impl Blob {
    pub fn new(media_type: &str, data: Vec<u8>) -> Blob {
        let digest = sha256_digest(&data);
        Blob { media_type: media_type.into(), data: Bytes::from(data), digest }
    }

    fn descriptor(&self) -> Value {
        json!({"mediaType": self.media_type, "digest": self.digest, "size": self.data.len()})
    }
}

/// A file in a layer.
#[derive(Debug, Clone)]
pub struct File {
    /// Path inside the image, without a leading `/`.
    pub path: String,
    pub mode: u32,
    pub data: Vec<u8>,
}

/// A built image: layers and config first, the manifest last (the push order too).
#[derive(Debug, Clone)]
pub struct Image {
    pub layers: Vec<Blob>,
    pub config: Blob,
    pub manifest: Blob,
}

/// What goes into the image config besides the layers.
#[derive(Debug, Clone, Default)]
pub struct ImageConfig {
    pub labels: BTreeMap<String, String>,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    pub user: Option<String>,
    pub env: Vec<String>,
}

/// A reproducible gzip'd tar of `files` (sorted, parent directories added, mtime 0, root
/// owned): the same files always give the same digest. Returns (tar.gz, diff_id).
pub fn layer(files: &[File]) -> (Vec<u8>, String) {
    let mut entries: BTreeMap<String, Option<&File>> = BTreeMap::new();
    for f in files {
        let mut dir = String::new();
        for part in f.path.split('/').collect::<Vec<_>>().split_last().map(|(_, d)| d).unwrap_or(&[]) {
            dir.push_str(part);
            dir.push('/');
            entries.entry(dir.clone()).or_insert(None);
        }
        entries.insert(f.path.clone(), Some(f));
    }
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    for (path, file) in &entries {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        match file {
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                builder.append_data(&mut header, path, std::io::empty()).expect("in-memory tar");
            }
            Some(f) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(f.mode);
                header.set_size(f.data.len() as u64);
                builder.append_data(&mut header, path, f.data.as_slice()).expect("in-memory tar");
            }
        }
    }
    let tar = builder.into_inner().expect("in-memory tar");
    let diff_id = sha256_digest(&tar);
    let mut gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).expect("in-memory gzip");
    (gz.finish().expect("in-memory gzip"), diff_id)
}

/// Assembles an image for linux/amd64 from layers of files, FROM scratch.
pub fn build(config: &ImageConfig, layers: &[Vec<File>]) -> Image {
    build_on(None, config, layers)
}

/// Assembles an image: the base image's layers (if any), then `layers`. The base config
/// is kept and `config` applied over it the way a Dockerfile would: labels and env merged
/// by key, a new entrypoint resets the base's cmd, user replaced when set.
pub fn build_on(base: Option<&registry::PulledImage>, config: &ImageConfig, layers: &[Vec<File>]) -> Image {
    let built: Vec<(Vec<u8>, String)> = layers.iter().map(|files| layer(files)).collect();
    let mut image_config = match base {
        Some(b) => b.config.clone(),
        None => {
            json!({"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": []}, "history": []})
        }
    };
    if !image_config["config"].is_object() {
        image_config["config"] = json!({});
    }
    let inner = &mut image_config["config"];
    if !config.labels.is_empty() {
        let mut labels: BTreeMap<String, Value> =
            inner["Labels"].as_object().map(|m| m.clone().into_iter().collect()).unwrap_or_default();
        labels.extend(config.labels.iter().map(|(k, v)| (k.clone(), json!(v))));
        inner["Labels"] = json!(labels);
    }
    if let Some(e) = &config.entrypoint {
        inner["Entrypoint"] = json!(e);
        if let Some(map) = inner.as_object_mut() {
            map.remove("Cmd");
        }
    }
    if let Some(c) = &config.cmd {
        inner["Cmd"] = json!(c);
    }
    if let Some(u) = &config.user {
        inner["User"] = json!(u);
    }
    if !config.env.is_empty() {
        let mut env: Vec<String> = inner["Env"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default();
        for var in &config.env {
            let key = var.split('=').next().unwrap_or(var);
            env.retain(|e| e.split('=').next() != Some(key));
            env.push(var.clone());
        }
        inner["Env"] = json!(env);
    }
    let mut diff_ids: Vec<Value> = image_config["rootfs"]["diff_ids"].as_array().cloned().unwrap_or_default();
    diff_ids.extend(built.iter().map(|(_, d)| json!(d)));
    image_config["rootfs"] = json!({"type": "layers", "diff_ids": diff_ids});
    let mut history: Vec<Value> = image_config["history"].as_array().cloned().unwrap_or_default();
    history.extend(built.iter().map(|_| json!({"created_by": concat!("bundle-tool ", env!("CARGO_PKG_VERSION"))})));
    image_config["history"] = json!(history);

    let config_blob = Blob::new(CONFIG_MEDIA_TYPE, serde_json::to_vec(&image_config).expect("JSON"));
    let mut layer_blobs: Vec<Blob> = base.map(|b| b.layers.clone()).unwrap_or_default();
    layer_blobs.extend(built.into_iter().map(|(data, _)| Blob::new(LAYER_MEDIA_TYPE, data)));
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": config_blob.descriptor(),
        "layers": layer_blobs.iter().map(Blob::descriptor).collect::<Vec<_>>(),
    });
    let manifest = Blob::new(MANIFEST_MEDIA_TYPE, serde_json::to_vec(&manifest).expect("JSON"));
    Image { layers: layer_blobs, config: config_blob, manifest }
}

/// The operator image: the (static) binary as entrypoint, run as a non-root user, with a
/// CA bundle (a static binary still reads one to trust the API server and registries).
pub fn operator_image(binary: &[u8], ca_bundle: Option<&[u8]>, base: Option<&registry::PulledImage>) -> Image {
    let config = ImageConfig {
        labels: BTreeMap::from([
            ("org.opencontainers.image.title".to_string(), "model-orchestra-operator".to_string()),
            ("org.opencontainers.image.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ]),
        entrypoint: Some(vec!["/model-orchestra-operator".into()]),
        user: Some("65532:65532".into()),
        env: if ca_bundle.is_some() { vec!["SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt".into()] } else { vec![] },
        ..Default::default()
    };
    let mut files = vec![File { path: "model-orchestra-operator".into(), mode: 0o755, data: binary.to_vec() }];
    if let Some(ca) = ca_bundle {
        files.push(File { path: "etc/ssl/certs/ca-certificates.crt".into(), mode: 0o644, data: ca.to_vec() });
    }
    build_on(base, &config, &[files])
}

/// An image of `mo-pod` (the static binary of the `pod/` crate): `/mo-pod` as the
/// entrypoint, `cmd` its default arguments (`["pause"]`: the pause image a real node's pod
/// sandboxes run), run as `user`.
pub fn pod_image(binary: &[u8], cmd: &[&str], user: &str) -> Image {
    let config = ImageConfig {
        labels: BTreeMap::from([
            ("org.opencontainers.image.title".to_string(), "mo-pod".to_string()),
            ("org.opencontainers.image.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ]),
        entrypoint: Some(vec!["/mo-pod".into()]),
        cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
        user: Some(user.into()),
        ..Default::default()
    };
    build(&config, &[vec![File { path: "mo-pod".into(), mode: 0o755, data: binary.to_vec() }]])
}

/// The Ollama image the tests and `make cluster` run (the official image's layout, FROM
/// scratch): the static `ollama` built from its pinned Go module at `/bin/ollama`, `serve` by
/// default on 0.0.0.0:11434, a CA bundle for registries over TLS, run as a non-root user.
pub fn ollama_image(binary: &[u8], version: &str, ca_bundle: Option<&[u8]>) -> Image {
    let config = ImageConfig {
        labels: BTreeMap::from([
            ("org.opencontainers.image.title".to_string(), "ollama".to_string()),
            ("org.opencontainers.image.version".to_string(), version.to_string()),
        ]),
        entrypoint: Some(vec!["/bin/ollama".into()]),
        cmd: Some(vec!["serve".into()]),
        user: Some("65532:65532".into()),
        env: std::iter::once("OLLAMA_HOST=0.0.0.0:11434".to_string())
            .chain(ca_bundle.map(|_| "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt".to_string()))
            .collect(),
    };
    let mut files = vec![File { path: "bin/ollama".into(), mode: 0o755, data: binary.to_vec() }];
    if let Some(ca) = ca_bundle {
        files.push(File { path: "etc/ssl/certs/ca-certificates.crt".into(), mode: 0o644, data: ca.to_vec() });
    }
    build(&config, &[files])
}

/// The programs of OLM v0's image (`quay.io/operator-framework/olm`), built from its pinned
/// Go module: the two operators and the utilities its pods copy out of the image.
pub struct OlmBinaries<'a> {
    /// `/bin/olm`: the olm-operator (CSVs, OperatorGroups).
    pub olm: &'a [u8],
    /// `/bin/catalog`: the catalog-operator (CatalogSources, Subscriptions, InstallPlans).
    pub catalog: &'a [u8],
    /// `/bin/copy-content`: copies a catalog out of its image (`extractContent`).
    pub copy_content: &'a [u8],
    /// `/bin/cpb`: copies a bundle out of its image (the unpack Jobs).
    pub cpb: &'a [u8],
    /// `/bin/cp`: a static busybox, as upstream's distroless `:debug` base links it: the
    /// unpack Jobs run `/bin/cp`, the catalog pods `cp` from `PATH`.
    pub cp: &'a [u8],
}

/// The default `PATH` of the distroless images OLM's are built on.
const DISTROLESS_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// OLM v0's image, laid out as upstream's (`/bin/olm` the entrypoint, run as user 1001).
pub fn olm_image(binaries: &OlmBinaries, version: &str) -> Image {
    let config = ImageConfig {
        labels: BTreeMap::from([
            ("org.opencontainers.image.title".to_string(), "olm".to_string()),
            ("org.opencontainers.image.version".to_string(), version.to_string()),
        ]),
        entrypoint: Some(vec!["/bin/olm".into()]),
        user: Some("1001".into()),
        env: vec![DISTROLESS_PATH.into()],
        ..Default::default()
    };
    let file = |path: &str, data: &[u8]| File { path: path.into(), mode: 0o755, data: data.to_vec() };
    build(
        &config,
        &[vec![
            file("bin/olm", binaries.olm),
            file("bin/catalog", binaries.catalog),
            file("bin/copy-content", binaries.copy_content),
            file("bin/cpb", binaries.cpb),
            file("bin/cp", binaries.cp),
        ]],
    )
}

/// opm's image (`quay.io/operator-framework/opm`), laid out as upstream's: `/bin/opm` the
/// entrypoint, and `/bin/grpc_health_probe`, which OLM v0 probes catalog pods with.
pub fn opm_image(opm: &[u8], grpc_health_probe: &[u8], version: &str) -> Image {
    let config = ImageConfig {
        labels: BTreeMap::from([
            ("org.opencontainers.image.title".to_string(), "opm".to_string()),
            ("org.opencontainers.image.version".to_string(), version.to_string()),
        ]),
        entrypoint: Some(vec!["/bin/opm".into()]),
        user: Some("1001".into()),
        env: vec![DISTROLESS_PATH.into()],
        ..Default::default()
    };
    let file = |path: &str, data: &[u8]| File { path: path.into(), mode: 0o755, data: data.to_vec() };
    build(&config, &[vec![file("bin/opm", opm), file("bin/grpc_health_probe", grpc_health_probe)]])
}
