//! `bundle validate DIR`: the checks of `operator-sdk bundle validate` and opm's bundle
//! loader that apply to a registry+v1 bundle, plus what OLM v1 refuses at install. Each
//! finding names the file and the field.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use base64::Engine;
use model_orchestra_api::names::{is_dns_label, is_dns_subdomain};
use serde_json::Value;

use super::annotations::{self, REQUIRED};
use super::finding::Report;
pub use super::finding::{Finding, Severity};

/// Bundle size limit: the sum over files of len(base64(gzip(content))).
pub const MAX_BUNDLE_SIZE: usize = 1 << 20;

/// Kinds a bundle's `manifests/` may hold (operator-registry `supported_resources.go`).
pub const SUPPORTED_KINDS: [&str; 22] = [
    "ClusterServiceVersion",
    "CustomResourceDefinition",
    "Secret",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ServiceAccount",
    "Service",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
    "NetworkPolicy",
    "PodMonitor",
];

/// Every finding for the bundle in `dir` (errors first). No errors means valid.
pub fn validate(dir: &Path) -> Vec<Finding> {
    let mut r = Report(Vec::new());
    check_annotations(dir, &mut r);
    let objects = check_manifests_dir(dir, &mut r);
    check_objects(dir, &objects, &mut r);
    check_size(dir, &mut r);
    r.0.sort_by(|a, b| a.severity.cmp(&b.severity));
    r.0
}

fn check_annotations(dir: &Path, r: &mut Report) {
    let file = "metadata/annotations.yaml";
    let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
        r.error(file, "", "could not find the annotations file (registry+v1 bundles need metadata/annotations.yaml)");
        return;
    };
    let doc: Value = match serde_yaml::from_str(&text) {
        Ok(v) => v,
        Err(e) => return r.error(file, "", format!("not valid YAML: {e}")),
    };
    let Some(map) = doc.get("annotations").and_then(Value::as_object) else {
        return r.error(file, "annotations", "missing: the file must be a map under `annotations:`");
    };
    for key in REQUIRED {
        match map.get(key) {
            None => r.error(file, &format!("annotations.{key}"), "missing annotation"),
            Some(v) if !v.is_string() => r.error(file, &format!("annotations.{key}"), "must be a string"),
            _ => {}
        }
    }
    let get = |k: &str| map.get(k).and_then(Value::as_str);
    if let Some(m) = get(annotations::MEDIATYPE) {
        if m != "registry+v1" {
            r.error(
                file,
                &format!("annotations.{}", annotations::MEDIATYPE),
                format!("expected \"registry+v1\", found {m:?}"),
            );
        }
    }
    let channels: Vec<&str> = get(annotations::CHANNELS)
        .map(|c| c.split(',').map(str::trim).filter(|c| !c.is_empty()).collect())
        .unwrap_or_default();
    if get(annotations::CHANNELS).is_some() && channels.is_empty() {
        r.error(file, &format!("annotations.{}", annotations::CHANNELS), "must be a non-empty comma-separated list");
    }
    if let Some(d) = map.get(annotations::DEFAULT_CHANNEL) {
        match d.as_str() {
            Some("") | None => r.error(
                file,
                &format!("annotations.{}", annotations::DEFAULT_CHANNEL),
                "must be non-empty when present",
            ),
            Some(d) if !channels.contains(&d) => r.error(
                file,
                &format!("annotations.{}", annotations::DEFAULT_CHANNEL),
                format!("{d:?} is not one of the channels {channels:?}"),
            ),
            _ => {}
        }
    }
    if let Some(p) = get(annotations::PACKAGE) {
        if !is_dns_label(p) {
            r.error(
                file,
                &format!("annotations.{}", annotations::PACKAGE),
                format!("{p:?} must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63): catalogs refuse other package names"),
            );
        }
    }
    if !dir.join("manifests").is_dir() {
        r.error("manifests/", "", "unable to locate the manifests directory");
    }
}

/// One parsed object per file of `manifests/`, by file name.
fn check_manifests_dir(dir: &Path, r: &mut Report) -> Vec<(String, Value)> {
    let Ok(entries) = std::fs::read_dir(dir.join("manifests")) else { return vec![] };
    let mut names: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    names.sort();
    let mut objects = Vec::new();
    for path in names {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let file = format!("manifests/{name}");
        if path.is_dir() {
            r.error(&file, "", "the manifests directory must be flat (OLM v1: \"subdirectories are not allowed\")");
            continue;
        }
        if name.starts_with('.') {
            r.error(&file, "", "hidden files are not allowed in manifests/");
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            r.error(&file, "", "cannot be read as UTF-8 text");
            continue;
        };
        let docs: Vec<Value> = match serde_yaml::Deserializer::from_str(&text)
            .map(serde::Deserialize::deserialize)
            .collect::<Result<Vec<Value>, _>>()
        {
            Ok(d) => d.into_iter().filter(|v: &Value| !v.is_null()).collect(),
            Err(e) => {
                r.error(&file, "", format!("not valid YAML: {e}"));
                continue;
            }
        };
        match docs.len() {
            0 => r.error(&file, "", "empty: one object per file"),
            1 => {}
            n => r.error(&file, "", format!("{n} YAML documents: opm reads only the first; put one object per file")),
        }
        if let Some(obj) = docs.into_iter().next() {
            objects.push((file, obj));
        }
    }
    objects
}

fn check_objects(dir: &Path, objects: &[(String, Value)], r: &mut Report) {
    for (file, obj) in objects {
        let kind = obj["kind"].as_str().unwrap_or_default();
        if obj["apiVersion"].as_str().is_none() || kind.is_empty() {
            r.error(file, "", "every manifest needs apiVersion and kind");
        } else if !SUPPORTED_KINDS.contains(&kind) {
            r.error(
                file,
                "kind",
                format!("{kind} is not a kind a bundle may contain (deployments belong in the CSV's install strategy)"),
            );
        }
    }
    let csvs: Vec<&(String, Value)> = objects.iter().filter(|(_, o)| o["kind"] == "ClusterServiceVersion").collect();
    match csvs.len() {
        0 => return r.error("manifests/", "", "no ClusterServiceVersion in the bundle"),
        1 => {}
        _ => r.error("manifests/", "", format!("{} ClusterServiceVersions: a bundle has exactly one", csvs.len())),
    }
    let (csv_file, csv) = csvs[0];
    check_csv(csv_file, csv, r);
    let crds: Vec<&(String, Value)> = objects.iter().filter(|(_, o)| o["kind"] == "CustomResourceDefinition").collect();
    check_owned_crds(csv_file, csv, &crds, r);
    super::beside::check(dir, (csv_file, csv), &crds, r);
    let sa_names: BTreeSet<&str> = csv["spec"]["install"]["spec"]["deployments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["spec"]["template"]["spec"]["serviceAccountName"].as_str())
        .collect();
    for (file, obj) in objects.iter().filter(|(_, o)| o["kind"] == "ServiceAccount") {
        if let Some(n) = obj["metadata"]["name"].as_str() {
            if sa_names.contains(n) {
                r.error(
                    file,
                    "metadata.name",
                    format!("ServiceAccount {n:?} clashes with the CSV deployment's serviceAccountName: OLM creates that account itself"),
                );
            }
        }
    }
}

fn check_csv(file: &str, csv: &Value, r: &mut Report) {
    let name = csv["metadata"]["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        r.error(file, "metadata.name", "required");
    } else if name.len() > 63 || !is_dns_subdomain(name) {
        r.error(file, "metadata.name", format!("{name:?} must be a DNS-1123 subdomain of at most 63 characters"));
    }
    let spec = &csv["spec"];
    match spec["version"].as_str() {
        None => r.error(file, "spec.version", "required"),
        Some(v) => {
            if semver::Version::parse(v).is_err() {
                r.error(file, "spec.version", format!("{v:?} is not strict semver X.Y.Z[-pre][+build] (no `v` prefix): opm and the semver template reject it"));
            }
        }
    }
    if spec["displayName"].as_str().is_none_or(str::is_empty) {
        r.error(file, "spec.displayName", "required");
    }
    if let Some(m) = spec["minKubeVersion"].as_str() {
        if semver::Version::parse(m).is_err() {
            r.error(file, "spec.minKubeVersion", format!("{m:?} must be X.Y.Z"));
        }
    }
    let modes = spec["installModes"].as_array().cloned().unwrap_or_default();
    if modes.is_empty() {
        r.error(file, "spec.installModes", "required");
    }
    let all_namespaces = modes.iter().any(|m| m["type"] == "AllNamespaces" && m["supported"] == true);
    if !modes.is_empty() && !all_namespaces {
        r.error(file, "spec.installModes", "AllNamespaces must be supported: OLM v1 refuses bundles without it");
    }
    let install = &spec["install"];
    if install["strategy"] != "deployment" {
        r.error(file, "spec.install.strategy", "must be \"deployment\"");
    }
    let deployments = install["spec"]["deployments"].as_array().cloned().unwrap_or_default();
    if deployments.is_empty() {
        r.error(file, "spec.install.spec.deployments", "at least one deployment is required");
    }
    let mut seen = BTreeSet::new();
    for (i, d) in deployments.iter().enumerate() {
        let n = d["name"].as_str().unwrap_or_default();
        if !is_dns_subdomain(n) {
            r.error(
                file,
                &format!("spec.install.spec.deployments[{i}].name"),
                format!("{n:?} must be a DNS-1123 name"),
            );
        }
        if !seen.insert(n) {
            r.error(file, &format!("spec.install.spec.deployments[{i}].name"), format!("{n:?} is not unique"));
        }
    }
    if spec["customresourcedefinitions"]["required"].as_array().is_some_and(|a| !a.is_empty()) {
        r.error(
            file,
            "spec.customresourcedefinitions.required",
            "becomes an olm.gvk.required dependency, which OLM v1 refuses to install",
        );
    }
    if spec["apiservicedefinitions"]["owned"].as_array().is_some_and(|a| !a.is_empty()) {
        r.error(file, "spec.apiservicedefinitions.owned", "API services are not supported by OLM v1");
    }
    if let Some(examples) = csv["metadata"]["annotations"]["alm-examples"].as_str() {
        match serde_json::from_str::<Value>(examples) {
            Ok(Value::Array(items)) => {
                let provided = provided_apis(spec);
                for (i, example) in items.iter().enumerate() {
                    let gvk = (
                        example["apiVersion"].as_str().unwrap_or_default().to_string(),
                        example["kind"].as_str().unwrap_or_default().to_string(),
                    );
                    if !provided.contains(&gvk) {
                        r.error(
                            file,
                            &format!("metadata.annotations.alm-examples[{i}]"),
                            format!(
                                "example must have a provided API: {} {} is not an owned CRD or API service (a shared-mode bundle carries no examples)",
                                gvk.0, gvk.1
                            ),
                        );
                    }
                }
            }
            _ => r.error(file, "metadata.annotations.alm-examples", "must be a JSON array of example objects"),
        }
    }
}

/// (apiVersion, kind) of every API the CSV owns: its CRDs and API services.
fn provided_apis(spec: &Value) -> Vec<(String, String)> {
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let crds = spec["customresourcedefinitions"]["owned"].as_array().into_iter().flatten().map(|o| {
        let group = o["name"].as_str().and_then(|n| n.split_once('.')).map(|(_, g)| g).unwrap_or_default();
        (format!("{group}/{}", str_of(&o["version"])), str_of(&o["kind"]))
    });
    let services = spec["apiservicedefinitions"]["owned"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| (format!("{}/{}", str_of(&a["group"]), str_of(&a["version"])), str_of(&a["kind"])));
    crds.chain(services).collect()
}

fn check_owned_crds(csv_file: &str, csv: &Value, crds: &[&(String, Value)], r: &mut Report) {
    let owned = csv["spec"]["customresourcedefinitions"]["owned"].as_array().cloned().unwrap_or_default();
    for (i, o) in owned.iter().enumerate() {
        let field = format!("spec.customresourcedefinitions.owned[{i}]");
        let name = o["name"].as_str().unwrap_or_default();
        let Some((_, crd)) = crds.iter().find(|(_, c)| c["metadata"]["name"] == name) else {
            r.error(csv_file, &field, format!("owned CRD {name:?} is not in the bundle"));
            continue;
        };
        let group = name.split_once('.').map(|(_, g)| g).unwrap_or_default();
        if crd["spec"]["group"] != group {
            r.error(csv_file, &format!("{field}.name"), format!("group {group:?} does not match the CRD's spec.group"));
        }
        if crd["spec"]["names"]["kind"] != o["kind"] {
            r.error(
                csv_file,
                &format!("{field}.kind"),
                format!("{} does not match the CRD's kind {}", o["kind"], crd["spec"]["names"]["kind"]),
            );
        }
        let versions: Vec<&str> =
            crd["spec"]["versions"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
        if !o["version"].as_str().is_some_and(|v| versions.contains(&v)) {
            r.error(
                csv_file,
                &format!("{field}.version"),
                format!("{} is not a version of the CRD ({versions:?})", o["version"]),
            );
        }
    }
    for (file, crd) in crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        if !owned.iter().any(|o| o["name"] == name) {
            r.error(
                file,
                "metadata.name",
                format!(
                    "CRD {name:?} is in the bundle but not owned by the CSV (spec.customresourcedefinitions.owned)"
                ),
            );
        }
        if crd["apiVersion"] != "apiextensions.k8s.io/v1" {
            r.warning(file, "apiVersion", "use apiextensions.k8s.io/v1");
        }
    }
}

fn check_size(dir: &Path, r: &mut Report) {
    let Ok(entries) = std::fs::read_dir(dir.join("manifests")) else { return };
    let mut total = 0usize;
    for path in entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_file()) {
        let Ok(bytes) = std::fs::read(&path) else { continue };
        total += compressed_size(&bytes);
    }
    if total > MAX_BUNDLE_SIZE {
        r.error("manifests/", "", format!("maximum bundle compressed size with gzip exceeded: {total} bytes > {MAX_BUNDLE_SIZE} (sum of base64(gzip(file)))"));
    } else if total * 100 > MAX_BUNDLE_SIZE * 85 {
        r.warning(
            "manifests/",
            "",
            format!("bundle compressed size {total} bytes is over 85% of the {MAX_BUNDLE_SIZE} limit"),
        );
    }
}

/// len(base64(gzip(content))), as the bundle loaders measure it.
pub fn compressed_size(content: &[u8]) -> usize {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(content).expect("writing to memory");
    let compressed = gz.finish().expect("writing to memory");
    base64::engine::general_purpose::STANDARD.encode(compressed).len()
}
