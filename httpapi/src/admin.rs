//! `model-orchestra-operator api-key create|list|revoke`, run by a cluster administrator
//! with their own kubeconfig. A key is: a Secret holding its SHA-256 (never the key), a
//! RoleBinding in each of its namespaces granting its user `edit` or `view`, and a
//! ClusterRole and binding letting the server impersonate exactly that user.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use model_orchestra_api::deploy::httpapi as deploy;
use model_orchestra_api::names::is_dns_label;

use crate::keys::{self, Access, KeyRecord, KEY_LABEL};

const FIELD_MANAGER: &str = "model-orchestra-api-key";

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Invalid(String),
    #[error("a key named `{0}` exists: revoke it first (`api-key revoke --name {0}`), or choose another name")]
    Exists(String),
    #[error("no key named `{0}` in namespace {1} (`api-key list` shows the keys)")]
    NotFound(String, String),
    /// Not a `source`: the message carries it (error chains would print it twice).
    #[error("{what}: {error}")]
    Kube { what: String, error: kube::Error },
    #[error("the key's rights did not take effect within {0:?}: {1}")]
    NotEffective(Duration, String),
    #[error("no random numbers from the operating system: {0}")]
    Random(String),
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> AdminError {
    let what = what.into();
    move |error| AdminError::Kube { what, error }
}

/// Where the server runs: its namespace (the key Secrets are there) and ServiceAccount.
#[derive(Debug, Clone)]
pub struct Server {
    pub namespace: String,
    pub service_account: String,
}

#[derive(Debug, Clone)]
pub struct NewKey {
    pub name: String,
    pub namespaces: Vec<String>,
    pub access: Access,
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

async fn apply<K>(api: &Api<K>, object: &K, what: &str) -> Result<(), AdminError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut value = serde_json::to_value(object).expect("serialises");
    value["apiVersion"] = K::api_version(&()).into();
    value["kind"] = K::kind(&()).into();
    let name = value["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch(&name, &apply_params(), &Patch::Apply(&value)).await.map_err(kube_err(format!("{what} {name}")))?;
    Ok(())
}

/// Makes the key and returns it: the only time it is ever shown.
pub async fn create(client: &Client, server: &Server, new: &NewKey) -> Result<String, AdminError> {
    keys::check_name(&new.name).map_err(AdminError::Invalid)?;
    if new.namespaces.is_empty() {
        return Err(AdminError::Invalid("give at least one --namespace the key may use".into()));
    }
    if let Some(bad) = new.namespaces.iter().find(|n| !is_dns_label(n)) {
        return Err(AdminError::Invalid(format!("--namespace `{bad}` is not a namespace name")));
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &server.namespace);
    let object = keys::object_name(&new.name);
    if secrets.get_opt(&object).await.map_err(kube_err(format!("reading Secret {object}")))?.is_some() {
        return Err(AdminError::Exists(new.name.clone()));
    }
    let user = keys::user(&new.name);
    let key = keys::generate(&new.name).map_err(|e| AdminError::Random(e.to_string()))?;

    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    apply(&cluster_roles, &deploy::access_cluster_role(new.access.as_str()), "ClusterRole").await?;
    apply(&cluster_roles, &deploy::key_impersonation_role(&new.name, &user, KEY_LABEL), "ClusterRole").await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = deploy::key_impersonation_binding(&new.name, KEY_LABEL, &server.namespace, &server.service_account);
    apply(&bindings, &binding, "ClusterRoleBinding").await?;
    for ns in &new.namespaces {
        let role_binding = RoleBinding {
            metadata: ObjectMeta {
                name: Some(object.clone()),
                namespace: Some(ns.clone()),
                labels: Some([(KEY_LABEL.to_string(), new.name.clone())].into()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: new.access.cluster_role(),
            },
            subjects: Some(vec![Subject {
                kind: "User".into(),
                name: user.clone(),
                api_group: Some("rbac.authorization.k8s.io".into()),
                ..Default::default()
            }]),
        };
        apply(&Api::<RoleBinding>::namespaced(client.clone(), ns), &role_binding, "RoleBinding").await?;
    }
    // The Secret last: the key works only once every right it needs exists.
    let record = KeyRecord {
        name: new.name.clone(),
        sha256: keys::hash(&key),
        namespaces: new.namespaces.clone(),
        access: new.access.as_str().into(),
        created: k8s_openapi::jiff::Timestamp::now().to_string(),
    };
    secrets
        .create(
            &PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() },
            &record.to_secret(&server.namespace),
        )
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => AdminError::Exists(new.name.clone()),
            e => AdminError::Kube { what: format!("creating Secret {object}"), error: e },
        })?;
    wait_effective(client, server, new, &user).await?;
    Ok(key)
}

/// Waits until the API server's authorizer has the new bindings (they reach it by a watch),
/// so the key works as soon as it is printed.
async fn wait_effective(client: &Client, server: &Server, new: &NewKey, user: &str) -> Result<(), AdminError> {
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let service_account = format!("system:serviceaccount:{}:{}", server.namespace, server.service_account);
    let mut checks = vec![(
        service_account,
        ResourceAttributes {
            verb: Some("impersonate".into()),
            resource: Some("users".into()),
            name: Some(user.to_string()),
            ..Default::default()
        },
    )];
    for ns in &new.namespaces {
        checks.push((
            user.to_string(),
            ResourceAttributes {
                verb: Some("list".into()),
                group: Some(model_orchestra_api::GROUP.into()),
                resource: Some(model_orchestra_api::PLURAL.into()),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
        ));
    }
    let limit = Duration::from_secs(15);
    let start = std::time::Instant::now();
    for (who, attributes) in checks {
        loop {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(who.clone()),
                    resource_attributes: Some(attributes.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .map_err(kube_err("asking the API server whether the key's rights are in place"))?;
            if answer.status.is_some_and(|s| s.allowed) {
                break;
            }
            if start.elapsed() > limit {
                return Err(AdminError::NotEffective(
                    limit,
                    format!("{who} may not {} {:?}", attributes.verb.unwrap_or_default(), attributes.resource),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Every key (what the Secrets record: never a key).
pub async fn list(client: &Client, server: &Server) -> Result<Vec<KeyRecord>, AdminError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &server.namespace);
    let list = secrets
        .list(&ListParams::default().labels(KEY_LABEL))
        .await
        .map_err(kube_err(format!("listing the key Secrets in {}", server.namespace)))?;
    let mut records: Vec<KeyRecord> = list.items.iter().filter_map(KeyRecord::from_secret).collect();
    records.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(records)
}

/// Removes the key: its Secret first (the server refuses it within seconds), then its rights.
pub async fn revoke(client: &Client, server: &Server, name: &str) -> Result<(), AdminError> {
    keys::check_name(name).map_err(AdminError::Invalid)?;
    let object = keys::object_name(name);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &server.namespace);
    let mut found = deleted(secrets.delete(&object, &DeleteParams::default()).await.map(|_| ()), "Secret")?;
    // Then every right of the key, also those a create that failed half-way left behind.
    let selector = format!("{KEY_LABEL}={name}");
    let bindings: Api<RoleBinding> = Api::all(client.clone());
    for b in bindings
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(kube_err("listing the key's RoleBindings"))?
    {
        let ns = b.metadata.namespace.clone().unwrap_or_default();
        let api: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
        found |= deleted(api.delete(&object, &DeleteParams::default()).await.map(|_| ()), "RoleBinding")?;
    }
    let name_of = format!("{}-key-{name}", deploy::NAME);
    let crb: Api<ClusterRoleBinding> = Api::all(client.clone());
    found |= deleted(crb.delete(&name_of, &DeleteParams::default()).await.map(|_| ()), "ClusterRoleBinding")?;
    let cr: Api<ClusterRole> = Api::all(client.clone());
    found |= deleted(cr.delete(&name_of, &DeleteParams::default()).await.map(|_| ()), "ClusterRole")?;
    if !found {
        return Err(AdminError::NotFound(name.to_string(), server.namespace.clone()));
    }
    Ok(())
}

/// Whether there was something to delete.
fn deleted(result: Result<(), kube::Error>, what: &str) -> Result<bool, AdminError> {
    match result {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(AdminError::Kube { what: format!("deleting the key's {what}"), error: e }),
    }
}
