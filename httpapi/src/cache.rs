//! A short-lived read cache per key user and namespace: a list made as that user (so
//! authorized as that user, by the API server) is served, already serialised, for `ttl`
//! to that user's lists and gets. Under load this turns many reads into one request per
//! user, namespace and `ttl`; what it costs is reads up to `ttl` old — including a
//! revoked RoleBinding, which takes effect within `ttl` (a revoked key is refused at once).
//! A write through the API drops the namespace's entries, so a client reads its own writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use model_orchestra_api::ApiVersion;
use serde_json::Value;

use crate::error::ApiResult;

pub(crate) struct Snapshot {
    at: Instant,
    pub(crate) list: Bytes,
    pub(crate) items: HashMap<String, Bytes>,
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Snapshot>>>>;

pub(crate) struct ReadCache {
    ttl: Duration,
    slots: Mutex<HashMap<(String, String), Slot>>,
}

/// The object as users want it back: without the server's bookkeeping of field managers.
pub(crate) fn clean(object: DynamicObject) -> Value {
    let mut v = serde_json::to_value(object).expect("objects serialise");
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    v
}

impl ReadCache {
    pub(crate) fn new(ttl: Duration) -> ReadCache {
        ReadCache { ttl, slots: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn enabled(&self) -> bool {
        !self.ttl.is_zero()
    }

    /// The list of `namespace` as `user` sees it, at most `ttl` old; one request to the API
    /// server at a time per user and namespace (the others wait for its answer).
    pub(crate) async fn snapshot(
        &self,
        user: &str,
        client: &kube::Client,
        namespace: &str,
    ) -> ApiResult<Arc<Snapshot>> {
        let slot = self
            .slots
            .lock()
            .expect("not poisoned")
            .entry((user.to_string(), namespace.to_string()))
            .or_default()
            .clone();
        let mut guard = slot.lock().await;
        if let Some(s) = guard.as_ref().filter(|s| s.at.elapsed() < self.ttl) {
            return Ok(s.clone());
        }
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ApiVersion::STORAGE.resource());
        let at = Instant::now();
        let list = api.list(&ListParams::default()).await?;
        let mut items = HashMap::new();
        let mut values = Vec::with_capacity(list.items.len());
        for object in list.items {
            let name = object.name_any();
            let value = clean(object);
            items.insert(name, Bytes::from(serde_json::to_vec(&value).expect("serialises")));
            values.push(value);
        }
        let body = serde_json::json!({
            "apiVersion": ApiVersion::STORAGE.api_version(),
            "kind": "ModelOrchestraList",
            "resourceVersion": list.metadata.resource_version,
            "items": values,
        });
        let snapshot =
            Arc::new(Snapshot { at, list: Bytes::from(serde_json::to_vec(&body).expect("serialises")), items });
        *guard = Some(snapshot.clone());
        Ok(snapshot)
    }

    /// After a write in `namespace`: every user's next read there asks the API server.
    pub(crate) fn invalidate(&self, namespace: &str) {
        self.slots.lock().expect("not poisoned").retain(|(_, ns), _| ns != namespace);
    }

    /// Keeps only the entries of `users` (revoked keys' go).
    pub(crate) fn retain_users(&self, users: &[String]) {
        self.slots.lock().expect("not poisoned").retain(|(u, _), _| users.contains(u));
    }
}
