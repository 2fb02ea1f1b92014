//! API keys: what a key looks like, how it is stored (only its SHA-256, in a Secret labelled
//! for the API) and checked (in constant time), and the live set the server holds (a watch
//! of those Secrets, so a revoked key stops working within seconds).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use base64::Engine;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::runtime::watcher;
use kube::{Api, Client};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// On every object made for a key (Secret, ClusterRole, bindings); its value is the key's name.
pub use model_orchestra_api::keys::API_KEY_LABEL as KEY_LABEL;
/// The Kubernetes user a key acts as: `model-orchestra-api:<name>`.
pub const USER_PREFIX: &str = "model-orchestra-api:";
/// Every key starts so (secret scanners and people recognise it).
pub const KEY_PREFIX: &str = "mo_";
/// Random bytes per key: 256 bits.
const SECRET_BYTES: usize = 32;

/// The key's name becomes part of object names (`model-orchestra-api-key-<name>`): a DNS
/// label short enough for them.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "key name `{name}`: use 1 to 40 lowercase letters, digits and `-`, starting and ending with a letter or digit"
        ))
    }
}

pub fn user(name: &str) -> String {
    format!("{USER_PREFIX}{name}")
}

/// The Secret, ClusterRole, ClusterRoleBinding and RoleBindings of the key `name`.
pub fn object_name(name: &str) -> String {
    format!("model-orchestra-api-key-{name}")
}

/// A new key for `name`: `mo_<name>.<43 characters>` (256 random bits, base64url). The
/// name in it lets the server find the key's record without comparing against every key.
pub fn generate(name: &str) -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{KEY_PREFIX}{name}.{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
}

pub fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
    }
    Some(out)
}

/// The name a presented key claims, if it has the shape of a key.
pub fn claimed_name(key: &str) -> Option<&str> {
    let (name, secret) = key.strip_prefix(KEY_PREFIX)?.split_once('.')?;
    (check_name(name).is_ok() && !secret.is_empty()).then_some(name)
}

/// The role a key's RoleBindings grant in its namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read, create, replace, delete, refresh, retry.
    Edit,
    /// Read only.
    View,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Edit => "edit",
            Access::View => "view",
        }
    }

    pub fn cluster_role(self) -> String {
        format!("model-orchestra-api-{}", self.as_str())
    }
}

impl std::str::FromStr for Access {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "edit" => Ok(Access::Edit),
            "view" => Ok(Access::View),
            other => Err(format!("`{other}` is not an access level (edit, view)")),
        }
    }
}

/// What the server knows of a key: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub name: String,
    pub sha256: [u8; 32],
    /// The namespaces it was created for (what the status page shows; RBAC decides access).
    pub namespaces: Vec<String>,
    pub access: String,
    pub created: String,
}

impl KeyRecord {
    pub fn user(&self) -> String {
        user(&self.name)
    }

    /// The Secret that stores this record in `namespace`.
    pub fn to_secret(&self, namespace: &str) -> Secret {
        let data: BTreeMap<String, ByteString> = [
            ("sha256", hex(&self.sha256)),
            ("name", self.name.clone()),
            ("namespaces", self.namespaces.join(",")),
            ("access", self.access.clone()),
            ("created", self.created.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
        .collect();
        Secret {
            metadata: ObjectMeta {
                name: Some(object_name(&self.name)),
                namespace: Some(namespace.to_string()),
                labels: Some([(KEY_LABEL.to_string(), self.name.clone())].into()),
                ..Default::default()
            },
            type_: Some(KEY_LABEL.into()),
            data: Some(data),
            ..Default::default()
        }
    }

    /// The record a Secret holds, if it is a well-formed key Secret.
    pub fn from_secret(secret: &Secret) -> Option<KeyRecord> {
        let data = secret.data.as_ref()?;
        let text = |k: &str| data.get(k).and_then(|b| String::from_utf8(b.0.clone()).ok());
        let name = text("name")?;
        if secret.metadata.labels.as_ref()?.get(KEY_LABEL) != Some(&name) || check_name(&name).is_err() {
            return None;
        }
        Some(KeyRecord {
            sha256: unhex(&text("sha256")?)?,
            namespaces: text("namespaces")
                .unwrap_or_default()
                .split(',')
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect(),
            access: text("access").unwrap_or_else(|| "edit".into()),
            created: text("created").unwrap_or_default(),
            name,
        })
    }
}

/// The keys the server accepts, kept current by a watch of the key Secrets.
#[derive(Clone, Default)]
pub struct KeyStore {
    keys: Arc<RwLock<HashMap<String, KeyRecord>>>,
}

impl KeyStore {
    pub fn new(records: impl IntoIterator<Item = KeyRecord>) -> KeyStore {
        let store = KeyStore::default();
        store.replace(records);
        store
    }

    pub fn len(&self) -> usize {
        self.keys.read().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn names(&self) -> Vec<String> {
        self.keys.read().expect("not poisoned").keys().cloned().collect()
    }

    fn replace(&self, records: impl IntoIterator<Item = KeyRecord>) {
        *self.keys.write().expect("not poisoned") = records.into_iter().map(|r| (r.name.clone(), r)).collect();
    }

    /// The record of `presented`, if it is a current key. The hash comparison takes the
    /// same time whether or not the key (or its name) is known.
    pub fn verify(&self, presented: &str) -> Option<KeyRecord> {
        let presented_hash = hash(presented);
        let keys = self.keys.read().expect("not poisoned");
        let record = claimed_name(presented).and_then(|name| keys.get(name));
        let expected = record.map_or([0u8; 32], |r| r.sha256);
        let equal: bool = presented_hash.ct_eq(&expected).into();
        record.filter(|_| equal).cloned()
    }

    /// Follows the key Secrets in `namespace` until the stream ends; `ready` is sent once
    /// the first full list is in.
    pub async fn follow(self, client: Client, namespace: String, ready: tokio::sync::oneshot::Sender<()>) {
        let api: Api<Secret> = Api::namespaced(client, &namespace);
        let config = watcher::Config::default().labels(KEY_LABEL);
        let mut stream = watcher::watcher(api, config).boxed();
        let mut ready = Some(ready);
        let mut pending: Vec<KeyRecord> = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => pending.clear(),
                Ok(watcher::Event::InitApply(s)) => pending.extend(KeyRecord::from_secret(&s)),
                Ok(watcher::Event::InitDone) => {
                    self.replace(std::mem::take(&mut pending));
                    tracing::info!(keys = self.len(), "API keys loaded");
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(watcher::Event::Apply(s)) => {
                    let name = s.metadata.labels.as_ref().and_then(|l| l.get(KEY_LABEL)).cloned();
                    let mut keys = self.keys.write().expect("not poisoned");
                    match (KeyRecord::from_secret(&s), name) {
                        (Some(r), _) => {
                            tracing::info!(key = %r.name, "API key added or changed");
                            keys.insert(r.name.clone(), r);
                        }
                        (None, Some(name)) => {
                            tracing::warn!(key = %name, "a key Secret that is not well-formed: the key is refused");
                            keys.remove(&name);
                        }
                        (None, None) => {}
                    }
                }
                Ok(watcher::Event::Delete(s)) => {
                    if let Some(name) = s.metadata.labels.as_ref().and_then(|l| l.get(KEY_LABEL)) {
                        tracing::info!(key = %name, "API key revoked");
                        self.keys.write().expect("not poisoned").remove(name);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "watching the API key Secrets (retrying)");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, key: &str) -> KeyRecord {
        KeyRecord {
            name: name.into(),
            sha256: hash(key),
            namespaces: vec!["team-a".into()],
            access: "edit".into(),
            created: String::new(),
        }
    }

    #[test]
    fn a_generated_key_names_its_key_and_carries_256_random_bits() {
        let a = generate("team-a").unwrap();
        let b = generate("team-a").unwrap();
        assert_ne!(a, b);
        assert_eq!(claimed_name(&a), Some("team-a"));
        assert_eq!(a.len(), "mo_team-a.".len() + 43);
    }

    #[test]
    fn only_the_exact_key_verifies() {
        let key = generate("team-a").unwrap();
        let store = KeyStore::new([record("team-a", &key)]);
        assert_eq!(store.verify(&key).unwrap().name, "team-a");
        assert!(store.verify(&format!("{key}x")).is_none());
        assert!(store.verify(&key.replace("team-a", "team-b")).is_none());
        assert!(store.verify("").is_none());
        assert!(store.verify("mo_team-a.").is_none());
    }

    #[test]
    fn a_record_survives_its_secret_and_the_secret_holds_no_key() {
        let key = generate("ci").unwrap();
        let r = record("ci", &key);
        let secret = r.to_secret("ops");
        assert_eq!(KeyRecord::from_secret(&secret), Some(r));
        let text = serde_json::to_string(&secret).unwrap();
        let secret_part = key.split_once('.').unwrap().1;
        assert!(!text.contains(secret_part));
    }

    #[test]
    fn key_names_are_dns_labels_that_fit_object_names() {
        assert!(check_name("team-a").is_ok());
        for bad in ["", "Team", "a_b", "-a", "a-", "a.b", &"x".repeat(41)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
