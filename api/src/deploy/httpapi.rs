//! The HTTP API's own install manifests (`manifests --http-api`, `make deploy HTTP_API=1`, the
//! CSV with `--http-api`): a Deployment of the operator image running `serve-api` under a
//! ServiceAccount of its own, and the only rights it has.
//!
//! Least privilege: the server never needs the operator's rights (it writes no Deployment,
//! Service or Job) and the operator never needs the server's (impersonation). So the
//! server's ServiceAccount may read the key Secrets in its own namespace and nothing else
//! here; each key adds exactly one right, to impersonate that key's user
//! ([`key_impersonation_role`], made by `api-key create`, removed by `api-key revoke`).

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, PodSpec, PodTemplateSpec,
    Probe, ResourceRequirements, SecretVolumeSource, Service, ServiceAccount, ServicePort, ServiceSpec, Volume,
    VolumeMount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::operator::DeployOptions;
use super::rbac::rule;
use crate::{GROUP, PLURAL};

/// The Deployment, ServiceAccount, Service, Role and binding: one API per cluster, whatever
/// the operator lines (it reads at the storage version and validates with its own binary's
/// render, which knows every served version).
pub const NAME: &str = "model-orchestra-api";
/// The Secret (type `kubernetes.io/tls`) the server's certificate and key come from.
pub const TLS_SECRET: &str = "model-orchestra-api-tls";
const PORT: i32 = 8443;
const TLS_DIR: &str = "/etc/model-orchestra-api/tls";

fn labels(o: &DeployOptions) -> std::collections::BTreeMap<String, String> {
    [
        (crate::keys::NAME_LABEL, NAME.to_string()),
        (crate::keys::INSTANCE_LABEL, NAME.to_string()),
        (crate::keys::VERSION_LABEL, o.release.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").into())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn meta(o: &DeployOptions, name: &str, namespaced: bool) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespaced.then(|| o.namespace.clone()),
        labels: Some(labels(o)),
        ..Default::default()
    }
}

/// The server's rules in its own namespace: read the key Secrets (RBAC cannot narrow a list
/// or watch by label; the namespace holds no other Secret of ours).
pub fn rules() -> Vec<PolicyRule> {
    vec![rule("", &["secrets"], &["get", "list", "watch"])]
}

pub fn service_account(o: &DeployOptions) -> ServiceAccount {
    ServiceAccount { metadata: meta(o, NAME, true), ..Default::default() }
}

pub fn role(o: &DeployOptions) -> Role {
    Role { metadata: meta(o, NAME, true), rules: Some(rules()) }
}

pub fn role_binding(o: &DeployOptions) -> RoleBinding {
    RoleBinding {
        metadata: meta(o, NAME, true),
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "Role".into(), name: NAME.into() },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: NAME.into(),
            namespace: Some(o.namespace.clone()),
            ..Default::default()
        }]),
    }
}

/// What a key may do in its namespaces: `edit` (everything the API offers) or `view`.
/// `api-key create` binds one of them in each of the key's namespaces.
pub fn access_cluster_role(access: &str) -> ClusterRole {
    let mut rules = vec![rule(GROUP, &[PLURAL], &["get", "list", "watch"])];
    if access == "edit" {
        rules = vec![rule(GROUP, &[PLURAL], &["get", "list", "watch", "create", "update", "patch", "delete"])];
    }
    rules.push(rule(GROUP, &["modelorchestras/status"], &["get"]));
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(format!("{NAME}-{access}")),
            labels: Some([(crate::keys::NAME_LABEL.to_string(), NAME.to_string())].into()),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    }
}

/// The one right a key adds to the server: impersonating that key's user, by exact name.
pub fn key_impersonation_role(name: &str, user: &str, key_label: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(format!("{NAME}-key-{name}")),
            labels: Some([(key_label.to_string(), name.to_string())].into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["users".into()]),
            resource_names: Some(vec![user.to_string()]),
            verbs: vec!["impersonate".into()],
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// Binds [`key_impersonation_role`] to the server's ServiceAccount.
pub fn key_impersonation_binding(
    name: &str,
    key_label: &str,
    namespace: &str,
    service_account: &str,
) -> ClusterRoleBinding {
    let object = format!("{NAME}-key-{name}");
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(object.clone()),
            labels: Some([(key_label.to_string(), name.to_string())].into()),
            ..Default::default()
        },
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "ClusterRole".into(), name: object },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: service_account.into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    }
}

pub fn service(o: &DeployOptions) -> Service {
    Service {
        metadata: meta(o, NAME, true),
        spec: Some(ServiceSpec {
            selector: Some([(crate::keys::INSTANCE_LABEL.to_string(), NAME.to_string())].into()),
            ports: Some(vec![ServicePort {
                name: Some("https".into()),
                port: 443,
                target_port: Some(IntOrString::String("https".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn probe() -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::String("https".into()),
            scheme: Some("HTTPS".into()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        ..Default::default()
    }
}

/// The server: the operator image, `serve-api`, TLS from [`TLS_SECRET`] (it does not start
/// without it), restricted security context.
pub fn deployment(o: &DeployOptions) -> Deployment {
    let quantity = |s: &str| Quantity(s.into());
    let container = Container {
        name: "api".into(),
        image: Some(o.image.clone()),
        args: Some(
            [
                "serve-api",
                &format!("--listen=0.0.0.0:{PORT}"),
                &format!("--tls-cert={TLS_DIR}/tls.crt"),
                &format!("--tls-key={TLS_DIR}/tls.key"),
                "--log-format=json",
            ]
            .map(String::from)
            .to_vec(),
        ),
        env: Some(vec![EnvVar {
            name: "MODEL_ORCHESTRA_API_KEYS_NAMESPACE".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "metadata.namespace".into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ports: Some(vec![ContainerPort {
            name: Some("https".into()),
            container_port: PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        liveness_probe: Some(probe()),
        readiness_probe: Some(probe()),
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), quantity("50m")), ("memory".to_string(), quantity("32Mi"))].into()),
            limits: Some([("memory".to_string(), quantity("128Mi"))].into()),
            ..Default::default()
        }),
        security_context: Some(super::operator::restricted_container()),
        volume_mounts: Some(vec![VolumeMount {
            name: "tls".into(),
            mount_path: TLS_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    };
    Deployment {
        metadata: meta(o, NAME, true),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some([(crate::keys::INSTANCE_LABEL.to_string(), NAME.to_string())].into()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(o)), ..Default::default() }),
                spec: Some(PodSpec {
                    service_account_name: Some(NAME.into()),
                    containers: vec![container],
                    volumes: Some(vec![Volume {
                        name: "tls".into(),
                        secret: Some(SecretVolumeSource { secret_name: Some(TLS_SECRET.into()), ..Default::default() }),
                        ..Default::default()
                    }]),
                    security_context: Some(super::operator::restricted_pod()),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Every object of the API's install, in apply order (after the operator's Namespace).
pub fn all(o: &DeployOptions) -> Vec<Value> {
    let typed = |api_version: &str, kind: &str, v: Value| {
        let mut v = v;
        v["apiVersion"] = api_version.into();
        v["kind"] = kind.into();
        v
    };
    let value = |v: Result<Value, serde_json::Error>| v.expect("serialises");
    let rbac = "rbac.authorization.k8s.io/v1";
    vec![
        typed("v1", "ServiceAccount", value(serde_json::to_value(service_account(o)))),
        typed(rbac, "Role", value(serde_json::to_value(role(o)))),
        typed(rbac, "RoleBinding", value(serde_json::to_value(role_binding(o)))),
        typed(rbac, "ClusterRole", value(serde_json::to_value(access_cluster_role("edit")))),
        typed(rbac, "ClusterRole", value(serde_json::to_value(access_cluster_role("view")))),
        typed("v1", "Service", value(serde_json::to_value(service(o)))),
        typed("apps/v1", "Deployment", value(serde_json::to_value(deployment(o)))),
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
            routing: "v0".into(),
            claim_unlabeled: false,
            api_version: None,
            release: None,
        }
    }

    #[test]
    fn the_server_may_only_read_secrets_in_its_own_namespace() {
        let all = all(&opts());
        let roles: Vec<&Value> =
            all.iter().filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRoleBinding").collect();
        assert_eq!(roles.len(), 1, "one Role, no ClusterRoleBinding: keys add their own");
        assert_eq!(roles[0]["metadata"]["namespace"], "ops");
        assert_eq!(
            roles[0]["rules"],
            serde_json::json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}])
        );
    }

    #[test]
    fn a_key_adds_impersonation_of_exactly_its_user() {
        let role = key_impersonation_role("team-a", "model-orchestra-api:team-a", "l");
        let rule = &role.rules.unwrap()[0];
        assert_eq!(rule.verbs, ["impersonate"]);
        assert_eq!(rule.resources.as_deref(), Some(&["users".to_string()][..]));
        assert_eq!(rule.resource_names.as_deref(), Some(&["model-orchestra-api:team-a".to_string()][..]));
    }

    #[test]
    fn the_view_role_cannot_write() {
        let role = access_cluster_role("view");
        assert!(role
            .rules
            .unwrap()
            .iter()
            .all(|r| r.verbs.iter().all(|v| ["get", "list", "watch"].contains(&v.as_str()))));
    }

    #[test]
    fn the_server_runs_restricted_with_its_tls_secret() {
        let d = deployment(&opts());
        let pod = d.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some(NAME));
        assert_eq!(pod.volumes.unwrap()[0].secret.as_ref().unwrap().secret_name.as_deref(), Some(TLS_SECRET));
        let sc = pod.containers[0].security_context.clone().unwrap();
        assert_eq!((sc.allow_privilege_escalation, sc.read_only_root_filesystem), (Some(false), Some(true)));
    }
}
