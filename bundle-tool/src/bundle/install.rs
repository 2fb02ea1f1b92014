//! A bundle as plain manifests, for clusters without OLM: what OLM installs from it — a
//! namespace for the line, the ServiceAccounts, ClusterRoles and bindings of its
//! `clusterPermissions`, the Roles of its `permissions`, its Deployments and its other
//! manifests — as objects `kubectl apply --server-side` takes. A released bundle never
//! changes, so neither do its plain manifests (`dist/<version>/install.yaml`, made by `bundle
//! release` and checked against the bundle by the tests).
//!
//! A bundle that owns its CRD installs it too; a shared-CRD bundle's CRD is installed once
//! per cluster, beforehand (`dist/<version>/crd.yaml`): the newest release's serves every
//! version.

use std::path::Path;

use model_orchestra_api::keys::{NAME_LABEL, VERSION_LABEL};
use serde_json::{json, Value};

use super::generate::read_tree;
use super::CSV_FILE;
use crate::error::ToolError;

/// The namespace a line installs into without OLM, as with OLM (`bundle-tool
/// subscriptions`): `model-orchestra-v<MAJOR>`.
pub fn namespace_of(csv: &Value) -> Result<String, ToolError> {
    let version = csv["spec"]["version"].as_str().and_then(|v| semver::Version::parse(v).ok());
    let routing = csv["metadata"]["annotations"][model_orchestra_api::keys::ROUTING_ANNOTATION]
        .as_str()
        .map(str::to_string)
        .or_else(|| version.map(|v| format!("v{}", v.major)));
    routing.map(|r| format!("model-orchestra-{r}")).ok_or_else(|| ToolError::Field {
        file: CSV_FILE.into(),
        field: "spec.version".into(),
        message: "no strict semver version: the line's namespace cannot be named".into(),
        fix: "regenerate the bundle with `bundle generate`".into(),
    })
}

/// Every object of the bundle in `dir` as plain manifests, in apply order.
pub fn manifests(dir: &Path) -> Result<Vec<Value>, ToolError> {
    let tree = read_tree(dir)?;
    let parse = |path: &str, text: &str| -> Result<Value, ToolError> {
        serde_yaml::from_str(text).map_err(|e| ToolError::Field {
            file: dir.join(path),
            field: String::new(),
            message: e.to_string(),
            fix: "run `bundle-tool bundle validate`".into(),
        })
    };
    let mut csv = None;
    let mut others = Vec::new();
    for (path, text) in tree.iter().filter(|(p, _)| p.starts_with("manifests/")) {
        let object = parse(path, text)?;
        if object["kind"] == "ClusterServiceVersion" {
            csv = Some(object);
        } else {
            others.push(object);
        }
    }
    let csv =
        csv.ok_or_else(|| ToolError::Invalid(format!("{}: no ClusterServiceVersion in manifests/", dir.display())))?;
    let namespace = namespace_of(&csv)?;
    let release = csv["spec"]["version"].clone();
    let labels = json!({NAME_LABEL: "model-orchestra-operator", VERSION_LABEL: release});
    let meta = |name: &Value, namespaced: bool| {
        let mut m = json!({"name": name, "labels": labels});
        if namespaced {
            m["namespace"] = namespace.clone().into();
        }
        m
    };
    let strategy = &csv["spec"]["install"]["spec"];
    let mut objects =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta(&namespace.clone().into(), false)})];
    // CRDs first: the operator starts watching them.
    objects.extend(others.iter().filter(|o| o["kind"] == "CustomResourceDefinition").cloned());
    let mut accounts: Vec<&Value> = Vec::new();
    for p in strategy["clusterPermissions"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(strategy["permissions"].as_array().into_iter().flatten())
    {
        if !accounts.contains(&&p["serviceAccountName"]) {
            accounts.push(&p["serviceAccountName"]);
        }
    }
    for account in &accounts {
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(account, true)}));
    }
    let rbac = "rbac.authorization.k8s.io/v1";
    for (scope, namespaced) in [("clusterPermissions", false), ("permissions", true)] {
        let (role, binding) = if namespaced { ("Role", "RoleBinding") } else { ("ClusterRole", "ClusterRoleBinding") };
        let entries = strategy[scope].as_array().cloned().unwrap_or_default();
        for (i, p) in entries.iter().enumerate() {
            let account = &p["serviceAccountName"];
            // Named as `make deploy` names them; a second entry for one account gets a suffix.
            let name: Value = if i == 0 || entries[..i].iter().all(|e| e["serviceAccountName"] != *account) {
                account.clone()
            } else {
                format!("{}-{i}", account.as_str().unwrap_or_default()).into()
            };
            objects.push(
                json!({"apiVersion": rbac, "kind": role, "metadata": meta(&name, namespaced), "rules": p["rules"]}),
            );
            objects.push(json!({"apiVersion": rbac, "kind": binding, "metadata": meta(&name, namespaced),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]}));
        }
    }
    for mut other in others.into_iter().filter(|o| o["kind"] != "CustomResourceDefinition") {
        if !matches!(other["kind"].as_str(), Some("ClusterRole" | "ClusterRoleBinding" | "PriorityClass")) {
            other["metadata"]["namespace"] = namespace.clone().into();
        }
        objects.push(other);
    }
    for d in strategy["deployments"].as_array().into_iter().flatten() {
        let mut metadata = meta(&d["name"], true);
        if let Some(extra) = d["label"].as_object() {
            for (k, v) in extra {
                metadata["labels"][k] = v.clone();
            }
        }
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": d["spec"]}));
    }
    Ok(objects)
}

/// The manifests as one YAML stream, with a header saying what it installs and how.
pub fn manifests_yaml(dir: &Path) -> Result<String, ToolError> {
    let objects = manifests(dir)?;
    let csv_name = read_tree(dir)?
        .get(&format!("manifests/{CSV_FILE}"))
        .and_then(|t| serde_yaml::from_str::<Value>(t).ok())
        .and_then(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .unwrap_or_default();
    let namespace = objects[0]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut out = format!(
        "# {csv_name} as plain manifests, for clusters without OLM: what OLM installs from its bundle,\n\
         # into the namespace {namespace}. The ModelOrchestra CRD is shared by the lines and installed\n\
         # once, beforehand: the newest release's `crd.yaml` (it serves every version).\n\
         #   kubectl apply --server-side -f crd.yaml && kubectl apply --server-side -f install.yaml\n"
    );
    for o in &objects {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(o).expect("JSON values serialise as YAML"));
    }
    Ok(out)
}
