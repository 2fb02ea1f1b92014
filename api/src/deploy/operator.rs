//! The operator's own deployment: Namespace, ServiceAccount, ClusterRole (from
//! [`super::rbac`]), ClusterRoleBinding and a Deployment that runs under the `restricted`
//! Pod Security Standard. Every name that must be unique per installed version carries the
//! routing value, so two major versions install side by side. `bundle-tool` builds the CSV
//! from the same functions.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, Namespace, ObjectFieldSelector,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecurityContext,
    ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::rbac;

/// What varies between installs.
#[derive(Debug, Clone)]
pub struct DeployOptions {
    pub namespace: String,
    pub image: String,
    /// The routing value this install serves (`v<MAJOR>`); names carry it.
    pub routing: String,
    /// Whether this install also takes CRs without the `operatorVersion` label.
    pub claim_unlabeled: bool,
    /// The ModelOrchestra version this install serves (`--api-version`); `None` leaves
    /// the operator's default (`v1alpha1`).
    pub api_version: Option<crate::ApiVersion>,
    /// The release installed (a bundle's version); `None` is the binary's own version.
    pub release: Option<String>,
}

impl DeployOptions {
    /// `model-orchestra-operator-v1`: the name of the Deployment, ServiceAccount,
    /// ClusterRole and binding, and (by the operator) of its Lease.
    pub fn name(&self) -> String {
        crate::lines::line_name(&self.routing)
    }

    fn labels(&self) -> std::collections::BTreeMap<String, String> {
        [
            (crate::keys::NAME_LABEL, "model-orchestra-operator".to_string()),
            (crate::keys::INSTANCE_LABEL, self.name()),
            (crate::keys::VERSION_LABEL, self.release.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").into())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn meta(&self, namespaced: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name()),
            namespace: namespaced.then(|| self.namespace.clone()),
            labels: Some(self.labels()),
            ..Default::default()
        }
    }
}

/// The operator's namespace enforces the `restricted` Pod Security Standard, which its own
/// pod meets.
pub fn namespace(o: &DeployOptions) -> Namespace {
    let labels = ["enforce", "audit", "warn"]
        .map(|mode| (format!("pod-security.kubernetes.io/{mode}"), "restricted".to_string()));
    Namespace {
        metadata: ObjectMeta { name: Some(o.namespace.clone()), labels: Some(labels.into()), ..Default::default() },
        ..Default::default()
    }
}

pub fn service_account(o: &DeployOptions) -> ServiceAccount {
    ServiceAccount { metadata: o.meta(true), ..Default::default() }
}

pub fn cluster_role_binding(o: &DeployOptions) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: o.meta(false),
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "ClusterRole".into(), name: o.name() },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: o.name(),
            namespace: Some(o.namespace.clone()),
            ..Default::default()
        }]),
    }
}

fn env_from_field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: path.into(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
}

fn probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("metrics".into()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        ..Default::default()
    }
}

/// The operator Deployment: leader election on (a second replica stands by), settings
/// through env vars, restricted security context.
pub fn deployment(o: &DeployOptions) -> Deployment {
    let mut selector = std::collections::BTreeMap::new();
    selector.insert(crate::keys::INSTANCE_LABEL.to_string(), o.name());
    let mut envs = vec![
        env_from_field("POD_NAME", "metadata.name"),
        env_from_field("POD_NAMESPACE", "metadata.namespace"),
        env("MODEL_ORCHESTRA_ROUTING", &o.routing),
        env("MODEL_ORCHESTRA_LOG_FORMAT", "json"),
        env("MODEL_ORCHESTRA_METRICS_ADDR", "0.0.0.0:8080"),
    ];
    if o.claim_unlabeled {
        envs.push(env("MODEL_ORCHESTRA_CLAIM_UNLABELED", "true"));
    }
    if let Some(version) = &o.api_version {
        envs.push(env("MODEL_ORCHESTRA_API_VERSION", version.as_str()));
        // The model gateway runs the operator's own image (`gateway`).
        if *version != crate::ApiVersion::V1alpha1 {
            envs.push(env("MODEL_ORCHESTRA_MODEL_GATEWAY_IMAGE", &o.image));
        }
    }
    if let Some(release) = &o.release {
        envs.push(env("MODEL_ORCHESTRA_RELEASE", release));
    }
    let quantity = |s: &str| Quantity(s.into());
    let container = Container {
        name: "operator".into(),
        image: Some(o.image.clone()),
        args: Some(vec!["run".into()]),
        env: Some(envs),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".into()),
            container_port: 8080,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        liveness_probe: Some(probe("/healthz")),
        readiness_probe: Some(probe("/readyz")),
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), quantity("50m")), ("memory".to_string(), quantity("64Mi"))].into()),
            limits: Some([("memory".to_string(), quantity("256Mi"))].into()),
            ..Default::default()
        }),
        security_context: Some(restricted_container()),
        ..Default::default()
    };
    Deployment {
        metadata: o.meta(true),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector { match_labels: Some(selector.clone()), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(o.labels()), ..Default::default() }),
                spec: Some(PodSpec {
                    service_account_name: Some(o.name()),
                    containers: vec![container],
                    termination_grace_period_seconds: Some(30),
                    security_context: Some(restricted_pod()),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The container security context of the restricted Pod Security Standard (no privilege
/// escalation, no capabilities, a read-only root filesystem), for our own Deployments.
pub(crate) fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Default::default() }),
        ..Default::default()
    }
}

/// The pod security context of the restricted Pod Security Standard: the image's nonroot
/// user (65532) and the runtime's default seccomp profile.
pub(crate) fn restricted_pod() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(65532),
        run_as_group: Some(65532),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
        ..Default::default()
    }
}

/// Every object `make deploy` applies, in apply order.
pub fn all(o: &DeployOptions) -> Vec<Value> {
    let mut role = serde_json::to_value(rbac::cluster_role(&o.name())).expect("serialises");
    role["metadata"]["labels"] = serde_json::to_value(o.labels()).expect("serialises");
    let typed = |apiv: &str, kind: &str, v: Value| {
        let mut v = v;
        v["apiVersion"] = apiv.into();
        v["kind"] = kind.into();
        v
    };
    vec![
        typed("v1", "Namespace", serde_json::to_value(namespace(o)).expect("serialises")),
        typed("v1", "ServiceAccount", serde_json::to_value(service_account(o)).expect("serialises")),
        typed("rbac.authorization.k8s.io/v1", "ClusterRole", role),
        typed(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            serde_json::to_value(cluster_role_binding(o)).expect("serialises"),
        ),
        typed("apps/v1", "Deployment", serde_json::to_value(deployment(o)).expect("serialises")),
    ]
}

pub fn all_yaml(o: &DeployOptions) -> String {
    all(o).iter().map(|v| format!("---\n{}", serde_yaml::to_string(v).expect("serialises"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> DeployOptions {
        DeployOptions {
            namespace: "ops".into(),
            image: "registry.example/op:0.1.0".into(),
            routing: "v1".into(),
            claim_unlabeled: false,
            api_version: None,
            release: None,
        }
    }

    #[test]
    fn names_that_must_be_unique_per_version_carry_the_routing_value() {
        let o = opts();
        assert_eq!(deployment(&o).metadata.name.as_deref(), Some("model-orchestra-operator-v1"));
        assert_eq!(cluster_role_binding(&o).role_ref.name, "model-orchestra-operator-v1");
        assert_eq!(crate::lines::line_name(&o.routing), o.name(), "the Lease is named like the install");
    }

    #[test]
    fn the_deployment_runs_restricted() {
        let d = deployment(&opts());
        let pod = d.spec.unwrap().template.spec.unwrap();
        let psc = pod.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
        let c = &pod.containers[0];
        let sc = c.security_context.clone().unwrap();
        assert_eq!((sc.allow_privilege_escalation, sc.read_only_root_filesystem), (Some(false), Some(true)));
        assert_eq!(sc.capabilities.unwrap().drop.unwrap(), vec!["ALL".to_string()]);
        assert!(c.resources.as_ref().unwrap().requests.as_ref().unwrap().contains_key("memory"));
    }

    #[test]
    fn the_deployment_passes_the_routing_value_and_its_namespace_for_the_lease() {
        let d = deployment(&opts());
        let envs = d.spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap();
        let value = |n: &str| envs.iter().find(|e| e.name == n).cloned();
        assert_eq!(value("MODEL_ORCHESTRA_ROUTING").unwrap().value.as_deref(), Some("v1"));
        assert!(value("POD_NAMESPACE").unwrap().value_from.is_some());
        assert!(value("MODEL_ORCHESTRA_CLAIM_UNLABELED").is_none());
    }

    #[test]
    fn the_deployment_names_the_api_version_it_serves_only_when_told() {
        let env_of = |o: &DeployOptions| {
            let envs = deployment(o).spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap();
            envs.iter().find(|e| e.name == "MODEL_ORCHESTRA_API_VERSION").and_then(|e| e.value.clone())
        };
        assert_eq!(env_of(&opts()), None, "without one the operator keeps its default");
        assert_eq!(
            env_of(&DeployOptions { api_version: Some(crate::ApiVersion::V1alpha2), ..opts() }).as_deref(),
            Some("v1alpha2")
        );
    }

    #[test]
    fn a_release_is_named_in_the_version_label_and_passed_to_the_operator() {
        let d = deployment(&DeployOptions { release: Some("1.0.0".into()), ..opts() });
        assert_eq!(d.metadata.labels.unwrap()["app.kubernetes.io/version"], "1.0.0");
        let envs = d.spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap();
        assert_eq!(
            envs.iter().find(|e| e.name == "MODEL_ORCHESTRA_RELEASE").and_then(|e| e.value.as_deref()),
            Some("1.0.0")
        );
    }
}
