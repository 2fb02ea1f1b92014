//! The manifests that install one major version line from a catalog image (olm.md §6,
//! §7): OLM v1 — a ClusterCatalog and a ClusterExtension named for the line (plus the
//! installer ServiceAccount and RBAC that OLM v1 before 1.11 requires); OLM v0 — a
//! CatalogSource, an AllNamespaces OperatorGroup and a Subscription in a namespace per
//! line (OLM v0 allows one operator of a package per namespace; the operator watches every
//! namespace, and its CSV provides no API, so the lines' groups do not conflict). CRs reach
//! the line through the `operatorVersion` label printed at the top.

use serde_json::{json, Value};

use crate::error::ToolError;
use crate::image::registry::has_tag_or_digest;

/// How OLM v0 applies an InstallPlan of the line's Subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approval {
    /// Every install and upgrade as soon as it is resolved.
    #[value(name = "Automatic", alias = "automatic")]
    Automatic,
    /// Each waits until someone sets the InstallPlan's `spec.approved: true` (OLM v0 makes
    /// every InstallPlan of the namespace manual then, the first install's too).
    #[value(name = "Manual", alias = "manual")]
    Manual,
}

impl Approval {
    fn as_str(self) -> &'static str {
        match self {
            Approval::Automatic => "Automatic",
            Approval::Manual => "Manual",
        }
    }
}

/// The OLM generation to install with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Olm {
    V1,
    V0,
}

#[derive(Debug, Clone)]
pub struct SubscriptionOptions {
    pub catalog_image: String,
    pub channel: String,
    /// Install namespace; default `model-orchestra-<routing>`.
    pub namespace: Option<String>,
    pub olm: Olm,
    pub package: String,
    pub catalog_name: String,
    /// OLM v0: the catalog image runs `opm serve` itself (built with `catalog build --base`);
    /// otherwise OLM extracts `/configs` and serves it.
    pub image_serves: bool,
    /// OLM v0: the Subscription's `installPlanApproval` (None: Automatic).
    pub approval: Option<Approval>,
}

/// The routing value of a channel: `stable-v1`, `fast-v1.2` → `v1`.
pub fn routing_of(channel: &str) -> Option<String> {
    let (_, version) = channel.rsplit_once("-v")?;
    let major = version.split('.').next()?;
    (!major.is_empty()
        && major.chars().all(|c| c.is_ascii_digit())
        && version.split('.').count() <= 2
        && version.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())))
    .then(|| format!("v{major}"))
}

/// The manifests, as one multi-document YAML stream with a header naming the label.
pub fn manifests(o: &SubscriptionOptions) -> Result<(String, Vec<Value>), ToolError> {
    let routing = routing_of(&o.channel).ok_or_else(|| ToolError::Field {
        file: "(command line)".into(),
        field: "--channel".into(),
        message: format!(
            "{:?} is not a channel of the semver template (<candidate|fast|stable>-v<MAJOR>[.<MINOR>])",
            o.channel
        ),
        fix: "e.g. --channel stable-v1".into(),
    })?;
    if !has_tag_or_digest(&o.catalog_image) {
        return Err(ToolError::Field {
            file: "(command line)".into(),
            field: "--catalog-image".into(),
            message: format!("{:?} has neither tag nor digest; OLM requires one", o.catalog_image),
            fix: "e.g. --catalog-image registry.example.com/model-orchestra-catalog:v1.2.0".into(),
        });
    }
    if o.olm == Olm::V1 && o.approval.is_some() {
        return Err(ToolError::Field {
            file: "(command line)".into(),
            field: "--install-plan-approval".into(),
            message: "OLM v1 has no InstallPlans: a ClusterExtension installs and upgrades as it resolves".into(),
            fix: "drop --install-plan-approval, or pin the ClusterExtension's version; or use --olm v0".into(),
        });
    }
    let name = format!("{}-{routing}", o.package);
    let namespace = o.namespace.clone().unwrap_or_else(|| format!("model-orchestra-{routing}"));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    let objects = match o.olm {
        Olm::V1 => {
            let mut image = json!({"ref": o.catalog_image});
            if !o.catalog_image.contains('@') {
                image["pollIntervalMinutes"] = 10.into();
            }
            let installer = format!("{name}-installer");
            vec![
                json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": o.catalog_name}, "spec": {"source": {"type": "Image", "image": image}}}),
                ns,
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": installer, "namespace": namespace}}),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": installer}, "rules": installer_rules(&name)}),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": installer},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": installer},
                    "subjects": [{"kind": "ServiceAccount", "name": installer, "namespace": namespace}]}),
                json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension", "metadata": {"name": name},
                    "spec": {"namespace": namespace, "serviceAccount": {"name": installer},
                        "source": {"sourceType": "Catalog", "catalog": {"packageName": o.package, "channels": [o.channel],
                            "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": o.catalog_name}}}}}}),
            ]
        }
        Olm::V0 => {
            let mut source = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "metadata": {"name": o.catalog_name, "namespace": namespace},
                "spec": {"sourceType": "grpc", "image": o.catalog_image, "displayName": "Model Orchestra", "grpcPodConfig": {"securityContextConfig": "restricted"}}});
            if !o.image_serves {
                source["spec"]["grpcPodConfig"]["extractContent"] = json!({"catalogDir": "/configs"});
            }
            if !o.catalog_image.contains('@') {
                source["spec"]["updateStrategy"] = json!({"registryPoll": {"interval": "10m"}});
            }
            vec![
                ns,
                source,
                // AllNamespaces (no target namespaces): the operator watches every namespace.
                json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": name, "namespace": namespace}, "spec": {}}),
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": name, "namespace": namespace},
                    "spec": {"name": o.package, "channel": o.channel, "source": o.catalog_name, "sourceNamespace": namespace,
                        "installPlanApproval": o.approval.unwrap_or(Approval::Automatic).as_str()}}),
            ]
        }
    };
    let header = format!(
        "# Installs the {routing} line of {} from channel {} ({}).\n\
         # The ModelOrchestra CRD is shared by the lines and installed once, before them:\n\
         #   bundle-tool crds | kubectl apply --server-side -f -\n\
         # A ModelOrchestra reaches this line with the label operatorVersion: {routing}. Without the label\n\
         # (lines released from 0.1.1 on), it reaches the line serving the apiVersion it is served as\n\
         # (its models.titanml.co/api-version annotation, else the version it was created with):\n\
         # v1alpha1 -> v0, v1alpha2 -> v1. The label wins.\n",
        o.package,
        o.channel,
        if o.olm == Olm::V1 { "OLM v1" } else { "OLM v0" }
    );
    Ok((header, objects))
}

/// What the OLM v1 installer must hold: what it creates for the bundle, plus everything
/// the operator's ClusterRole grants (RBAC forbids granting more than one holds).
fn installer_rules(extension: &str) -> Vec<Value> {
    let all = ["create", "delete", "get", "list", "patch", "update", "watch"];
    let rbac_verbs = [all.as_slice(), &["bind", "escalate"]].concat();
    let mut rules = vec![
        json!({"apiGroups": ["olm.operatorframework.io"], "resources": ["clusterextensions/finalizers"], "verbs": ["update"], "resourceNames": [extension]}),
        json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": all}),
        json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "clusterrolebindings", "roles", "rolebindings"], "verbs": rbac_verbs}),
        json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": all}),
        json!({"apiGroups": [""], "resources": ["serviceaccounts", "services", "configmaps"], "verbs": all}),
    ];
    let operator = model_orchestra_api::deploy::rbac::cluster_role("installer-needs");
    rules.extend(
        operator.rules.unwrap_or_default().into_iter().map(|r| serde_json::to_value(r).expect("PolicyRule serialises")),
    );
    rules
}

pub fn to_yaml(header: &str, objects: &[Value]) -> String {
    let mut out = header.to_string();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(o).expect("YAML"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routing_value_is_the_channels_major_version() {
        assert_eq!(routing_of("stable-v1").as_deref(), Some("v1"));
        assert_eq!(routing_of("fast-v2.3").as_deref(), Some("v2"));
        assert_eq!(routing_of("stable"), None);
        assert_eq!(routing_of("stable-v1.2.3"), None);
    }
}
