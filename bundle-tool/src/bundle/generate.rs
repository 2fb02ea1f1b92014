//! `bundle generate`: a registry+v1 bundle directory (CSV, optional CRD, annotations,
//! bundle.Dockerfile) built from the operator library's own manifests — the Deployment
//! and ClusterRole that `make deploy` applies — so nothing is written twice.

use std::collections::BTreeMap;
use std::path::Path;

use model_orchestra_api::deploy::httpapi;
use model_orchestra_api::deploy::operator::{self as deploy, DeployOptions};
use model_orchestra_api::deploy::rbac;
use model_orchestra_api::lines::default_routing;
use model_orchestra_api::ApiVersion;
use serde_json::{json, Value};

use super::{annotations, CrdMode, CRD_FILE, CSV_FILE};
use crate::error::ToolError;
use crate::metadata::OperatorMetadata;

/// The sample CR shipped as the CSV's `alm-examples`, per CRD version the bundle serves.
fn sample_cr(crd_version: &str) -> &'static str {
    match crd_version {
        "v1alpha2" => include_str!("../../../config/samples/modelorchestra-v1alpha2.yaml"),
        _ => include_str!("../../../config/samples/modelorchestra.yaml"),
    }
}

#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub version: semver::Version,
    /// The CRD version this operator version serves (e.g. `v1alpha1`).
    pub crd_version: String,
    pub channels: Vec<String>,
    pub default_channel: Option<String>,
    /// The operator image: `REPO` (tagged with the version), `REPO:TAG` or `REPO@sha256:…`.
    pub image: String,
    pub crd_mode: CrdMode,
    pub claim_unlabeled: bool,
    /// Also install the HTTP API (`serve-api`): its Deployment and namespaced permissions in
    /// the CSV, its Service and the keys' access ClusterRoles as bundle objects.
    pub http_api: bool,
}

/// The operator image reference for `image` and `version`.
pub fn image_ref(image: &str, version: &semver::Version) -> String {
    if mo_images::registry::has_tag_or_digest(image) {
        image.to_string()
    } else {
        format!("{image}:v{version}")
    }
}

pub fn csv_name(package: &str, version: &semver::Version) -> String {
    format!("{package}.v{version}")
}

/// Every file of the bundle, by path relative to the bundle directory.
/// `crd` is the CRD this release ships ([`crate::crds::crd`]).
pub fn bundle_files(
    opts: &GenerateOptions,
    meta: &OperatorMetadata,
    crd: &Value,
) -> Result<BTreeMap<String, String>, ToolError> {
    let served: Vec<&str> =
        crd["spec"]["versions"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
    let known = opts.crd_version.parse::<ApiVersion>().ok();
    if !served.contains(&opts.crd_version.as_str()) || known.is_none() {
        return Err(ToolError::Invalid(format!(
            "--crd-version {}: the CRD serves {}; pick one of them",
            opts.crd_version,
            served.join(", ")
        )));
    }
    let mut channels = opts.channels.clone();
    if channels.is_empty() {
        channels.push("stable".into());
    }
    if let Some(d) = &opts.default_channel {
        if !channels.contains(d) {
            return Err(ToolError::Invalid(format!(
                "--default-channel {d}: not one of --channels ({})",
                channels.join(",")
            )));
        }
    }
    let mut files = BTreeMap::new();
    files.insert(format!("manifests/{CSV_FILE}"), yaml(&csv(opts, meta, crd)));
    if opts.crd_mode == CrdMode::Owned {
        files.insert(format!("manifests/{CRD_FILE}"), yaml(crd));
    }
    if opts.http_api {
        for object in http_api_objects(opts) {
            let file = format!(
                "manifests/{}.{}.yaml",
                object["metadata"]["name"].as_str().unwrap_or_default(),
                object["kind"].as_str().unwrap_or_default().to_lowercase()
            );
            files.insert(file, yaml(&object));
        }
    }
    let annotations = annotations::for_bundle(&meta.package_name, &channels, opts.default_channel.as_deref());
    files.insert("metadata/annotations.yaml".into(), yaml(&json!({ "annotations": annotations })));
    files.insert("bundle.Dockerfile".into(), dockerfile(&annotations));
    Ok(files)
}

fn yaml(v: &Value) -> String {
    serde_yaml::to_string(v).expect("JSON values serialise as YAML")
}

fn dockerfile(annotations: &BTreeMap<String, String>) -> String {
    let mut s = String::from("# For people who build with Docker; `bundle-tool bundle build` makes the same image without it.\nFROM scratch\n\n");
    for (k, v) in annotations {
        s.push_str(&format!("LABEL {k}={v}\n"));
    }
    s.push_str("\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n");
    s
}

fn csv(opts: &GenerateOptions, meta: &OperatorMetadata, crd: &Value) -> Value {
    let version = &opts.version;
    let api_version: Option<ApiVersion> = opts.crd_version.parse().ok();
    let routing = default_routing(&version.to_string(), api_version.unwrap_or(ApiVersion::V1alpha1));
    let image = image_ref(&opts.image, version);
    let deploy_opts = DeployOptions {
        namespace: String::new(),
        image: image.clone(),
        routing: routing.clone(),
        claim_unlabeled: opts.claim_unlabeled,
        api_version,
        release: Some(version.to_string()),
    };
    let deployment = deploy::deployment(&deploy_opts);
    let role = rbac::cluster_role(&deploy_opts.name());
    let mut deployments =
        vec![json!({"name": deploy_opts.name(), "label": deployment.metadata.labels, "spec": deployment.spec})];
    let mut permissions = vec![];
    if opts.http_api {
        let api = httpapi::deployment(&deploy_opts);
        deployments.push(json!({"name": httpapi::NAME, "label": api.metadata.labels, "spec": api.spec}));
        permissions.push(json!({"serviceAccountName": httpapi::NAME, "rules": httpapi::rules()}));
    }

    let mut example: Value = serde_yaml::from_str(sample_cr(&opts.crd_version)).expect("the sample CR is YAML");
    example["metadata"]["labels"]["operatorVersion"] = json!(routing);
    // The short description: the first sentence of the first paragraph.
    let paragraph =
        meta.description.split("\n\n").next().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
    let summary = paragraph.split_inclusive(". ").next().unwrap_or_default().trim().to_string();

    let mut spec = json!({
        "displayName": meta.display_name,
        "description": meta.description,
        "version": version.to_string(),
        "keywords": meta.keywords,
        "maintainers": meta.maintainers,
        "provider": meta.provider,
        "links": meta.links,
        // The operator watches every namespace (its ClusterRole, its informers): it is an
        // AllNamespaces operator, and says so to OLM v0, whose other modes would promise it
        // watches only the OperatorGroup's target namespaces.
        "installModes": [
            {"type": "OwnNamespace", "supported": false},
            {"type": "SingleNamespace", "supported": false},
            {"type": "MultiNamespace", "supported": false},
            {"type": "AllNamespaces", "supported": true},
        ],
        "install": {
            "strategy": "deployment",
            "spec": {
                "clusterPermissions": [{"serviceAccountName": deploy_opts.name(), "rules": role.rules}],
                "deployments": deployments,
            },
        },
        "relatedImages": [{"name": "model-orchestra-operator", "image": image}],
    });
    if !permissions.is_empty() {
        spec["install"]["spec"]["permissions"] = json!(permissions);
    }
    if let Some(m) = &meta.min_kube_version {
        spec["minKubeVersion"] = json!(m);
    }
    if let Some(m) = &meta.maturity {
        spec["maturity"] = json!(m);
    }
    if let Some((data, media)) = &meta.icon_data {
        spec["icon"] = json!([{"base64data": data, "mediatype": media}]);
    }
    if opts.crd_mode == CrdMode::Owned {
        spec["customresourcedefinitions"] = json!({"owned": [{
            "name": crd["metadata"]["name"],
            "version": opts.crd_version,
            "kind": crd["spec"]["names"]["kind"],
            "displayName": "Model Orchestra",
            "description": "An LLM inference stack: a gateway and one inference application per entry of spec.applications.",
        }]});
    }
    let mut annotations = json!({
        // An example must be of an API the bundle provides (operator-sdk: "example must
        // have a provided API"); a shared-mode bundle provides none.
        "alm-examples": serde_json::to_string(&if opts.crd_mode == CrdMode::Owned { json!([example]) } else { json!([]) }).expect("JSON"),
        "capabilities": "Basic Install",
        "containerImage": image,
        "description": summary,
        "operators.operatorframework.io/builder": concat!("bundle-tool-v", env!("CARGO_PKG_VERSION")),
        super::CRD_VERSION_ANNOTATION: opts.crd_version,
        model_orchestra_api::keys::CRD_MODE_ANNOTATION: opts.crd_mode.as_str(),
        model_orchestra_api::keys::ROUTING_ANNOTATION: routing,
    });
    if let Some(c) = &meta.categories {
        annotations["categories"] = json!(c);
    }
    if let Some(repo) = meta.links.first() {
        annotations["repository"] = json!(repo.url);
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": csv_name(&meta.package_name, version), "annotations": annotations},
        "spec": spec,
    })
}

/// The HTTP API's objects OLM installs beside the CSV: its Service and the ClusterRoles
/// that `api-key create` binds keys to.
fn http_api_objects(opts: &GenerateOptions) -> Vec<Value> {
    let deploy_opts = DeployOptions {
        namespace: String::new(),
        image: image_ref(&opts.image, &opts.version),
        routing: String::new(),
        claim_unlabeled: false,
        api_version: None,
        release: Some(opts.version.to_string()),
    };
    httpapi::all(&deploy_opts)
        .into_iter()
        .filter(|o| o["kind"] == "Service" || o["kind"] == "ClusterRole")
        .map(|mut o| {
            if let Some(meta) = o["metadata"].as_object_mut() {
                meta.remove("namespace");
            }
            o
        })
        .collect()
}

/// Whether writing `files` into `dir` creates it, leaves it as it is, or is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    Created,
    Unchanged,
}

/// Writes the bundle unless a different bundle of the same version exists: a released
/// version never changes.
pub fn write_bundle(dir: &Path, files: &BTreeMap<String, String>) -> Result<WriteOutcome, ToolError> {
    if dir.exists() {
        let existing = read_tree(dir)?;
        let mut differing: Vec<String> = files
            .iter()
            .filter(|(path, content)| existing.get(*path) != Some(*content))
            .map(|(path, _)| path.clone())
            .collect();
        differing.extend(existing.keys().filter(|p| !files.contains_key(*p)).map(|p| format!("{p} (extra)")));
        if differing.is_empty() {
            return Ok(WriteOutcome::Unchanged);
        }
        return Err(ToolError::WouldChange { dir: dir.to_path_buf(), files: differing });
    }
    // Write into a sibling temp dir and rename, so a failure leaves no half bundle.
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| ToolError::io(parent, e))?;
    let tmp = parent.join(format!(
        ".{}.tmp-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("bundle"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    for (path, content) in files {
        let file = tmp.join(path);
        if let Some(p) = file.parent() {
            std::fs::create_dir_all(p).map_err(|e| ToolError::io(p, e))?;
        }
        std::fs::write(&file, content).map_err(|e| ToolError::io(&file, e))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| ToolError::io(dir, e))?;
    Ok(WriteOutcome::Created)
}

/// Every regular file under `dir`, by relative path.
pub fn read_tree(dir: &Path) -> Result<BTreeMap<String, String>, ToolError> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<(), ToolError> {
        let entries = std::fs::read_dir(dir).map_err(|e| ToolError::io(dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| ToolError::io(dir, e))?.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).map_err(|e| ToolError::io(&path, e))?;
                out.insert(rel, text);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}
