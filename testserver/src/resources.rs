//! The resource types the server knows: built-in kinds and those that CRDs add, and the
//! discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}`) built from them.

use serde_json::{json, Value};

/// One served resource: the facts discovery publishes and the store needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    /// Has a `/status` subresource: the main endpoint ignores `.status`, the subresource
    /// ignores everything else.
    pub status: bool,
    pub short_names: Vec<String>,
    /// Extra columns for `kubectl get` (CRD additionalPrinterColumns): (name, jsonPath).
    pub printer_columns: Vec<(String, String)>,
    /// Set for types a CRD added: the CRD's name.
    pub crd: Option<String>,
}

impl ResourceType {
    fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool, status: bool, short: &[&str]) -> Self {
        ResourceType {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            status,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            printer_columns: vec![],
            crd: None,
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn discovery_entry(&self) -> Vec<Value> {
        let mut verbs = vec!["create", "delete", "get", "list", "patch", "update", "watch"];
        if self.kind != "Namespace" {
            verbs.push("deletecollection");
        }
        let mut out = vec![json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
            "shortNames": self.short_names,
        })];
        if self.status {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        out
    }
}

/// The kinds every test cluster serves: what the operator renders and needs, plus what
/// `kubectl` and the e2e tests touch.
pub fn builtin_types() -> Vec<ResourceType> {
    let b = ResourceType::builtin;
    vec![
        b("", "v1", "Namespace", "namespaces", false, true, &["ns"]),
        b("", "v1", "ConfigMap", "configmaps", true, false, &["cm"]),
        b("", "v1", "Secret", "secrets", true, false, &[]),
        b("", "v1", "ServiceAccount", "serviceaccounts", true, false, &["sa"]),
        b("", "v1", "Service", "services", true, true, &["svc"]),
        b("", "v1", "Pod", "pods", true, true, &["po"]),
        b("", "v1", "Event", "events", true, false, &["ev"]),
        b("apps", "v1", "Deployment", "deployments", true, true, &["deploy"]),
        b("networking.k8s.io", "v1", "Ingress", "ingresses", true, true, &["ing"]),
        b("coordination.k8s.io", "v1", "Lease", "leases", true, false, &[]),
        b("events.k8s.io", "v1", "Event", "events", true, false, &["ev"]),
        b("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, false, &[]),
        b("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false, false, &[]),
        b("rbac.authorization.k8s.io", "v1", "Role", "roles", true, false, &[]),
        b("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, false, &[]),
        b("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false, true, &["crd", "crds"]),
    ]
}

/// The resource types a CustomResourceDefinition object declares (one per served version).
pub fn types_from_crd(crd: &Value) -> Result<Vec<ResourceType>, String> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().ok_or("spec.group is required")?;
    let names = &spec["names"];
    let kind = names["kind"].as_str().ok_or("spec.names.kind is required")?;
    let plural = names["plural"].as_str().ok_or("spec.names.plural is required")?;
    let expected = format!("{plural}.{group}");
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if name != expected {
        return Err(format!("metadata.name: must be spec.names.plural+\".\"+spec.group ({expected})"));
    }
    let namespaced = match spec["scope"].as_str() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => return Err("spec.scope: must be Namespaced or Cluster".into()),
    };
    let versions = spec["versions"].as_array().ok_or("spec.versions is required")?;
    if versions.iter().filter(|v| v["storage"] == true).count() != 1 {
        return Err("spec.versions: exactly one version must be the storage version".into());
    }
    Ok(versions
        .iter()
        .filter(|v| v["served"] == true)
        .map(|v| ResourceType {
            group: group.into(),
            version: v["name"].as_str().unwrap_or_default().into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: names["singular"].as_str().map(String::from).unwrap_or_else(|| kind.to_ascii_lowercase()),
            namespaced,
            status: v["subresources"]["status"].is_object(),
            short_names: names["shortNames"].as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default(),
            printer_columns: v["additionalPrinterColumns"]
                .as_array()
                .map(|cols| cols.iter().filter_map(|c| Some((c["name"].as_str()?.to_string(), c["jsonPath"].as_str()?.to_string()))).collect())
                .unwrap_or_default(),
            crd: Some(name.into()),
        })
        .collect())
}

/// `/api`: the core group's versions.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

/// `/apis`: every non-core group with its versions.
pub fn group_list(types: &[ResourceType]) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, versions)) if !versions.contains(&t.version) => versions.push(t.version.clone()),
            Some(_) => {}
            None => groups.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, versions)| {
            let gvs: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
            json!({"name": name, "versions": gvs, "preferredVersion": gvs[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/api/v1` or `/apis/{group}/{version}`; `None` when nothing is served there.
pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = types.iter().filter(|t| t.group == group && t.version == version).flat_map(ResourceType::discovery_entry).collect();
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}))
}

/// `/apis/{group}`: one group.
pub fn group(types: &[ResourceType], group: &str) -> Option<Value> {
    group_list(types)["groups"].as_array()?.iter().find(|g| g["name"] == group).cloned().map(|mut g| {
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        g
    })
}
