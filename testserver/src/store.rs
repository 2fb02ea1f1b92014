//! The object store: every write goes through here, under one lock, so resourceVersions
//! are a single increasing sequence and watches see every change in order.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::managed;
use crate::resources::{self, ResourceType};
use crate::selector::{FieldSelector, LabelSelector};
use crate::time;

/// How many past changes a watch can resume from; older resourceVersions get 410 Gone.
const HISTORY: usize = 200_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One committed change, as watches see it.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub kind: ChangeType,
    pub object: Value,
    /// The object before a modification (label-selector watches need both sides).
    pub old: Option<Value>,
}

/// Deletion propagation, as in `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

type TypeKey = (String, String);
type ObjKey = (String, String);

pub struct Store {
    types: Vec<ResourceType>,
    objects: BTreeMap<TypeKey, BTreeMap<ObjKey, Value>>,
    rv: u64,
    uid_seq: u64,
    uid_prefix: u32,
    history: VecDeque<Arc<Change>>,
    /// Lowest resourceVersion a watch can resume after.
    oldest_resumable: u64,
    pub changes: broadcast::Sender<Arc<Change>>,
}

/// A watch's starting point: the changes to send first, then the live feed.
pub struct WatchStart {
    pub initial: Vec<Arc<Change>>,
    pub feed: broadcast::Receiver<Arc<Change>>,
}

impl Store {
    pub fn new() -> Self {
        let mut store = Store {
            types: resources::builtin_types(),
            objects: BTreeMap::new(),
            rv: 1,
            uid_seq: 0,
            uid_prefix: std::process::id() ^ (time::unix_nanos() as u32),
            history: VecDeque::new(),
            oldest_resumable: 1,
            changes: broadcast::channel(65_536).0,
        };
        let ns_type = store.types[0].clone();
        for ns in ["default", "kube-system", "kube-public"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}});
            store.create(&ns_type, "", body, "testserver").expect("fresh store");
        }
        store
    }

    pub fn types(&self) -> &[ResourceType] {
        &self.types
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The served type at `/api(s)/{group}/{version}/…/{plural}`.
    pub fn find_type(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    fn bucket(&self, rt: &ResourceType) -> Option<&BTreeMap<ObjKey, Value>> {
        self.objects.get(&(rt.group.clone(), rt.plural.clone()))
    }

    fn present(rt: &ResourceType, obj: &Value) -> Value {
        let mut out = obj.clone();
        out["apiVersion"] = json!(rt.api_version());
        out["kind"] = json!(rt.kind);
        out
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.bucket(rt).and_then(|b| b.get(&(ns.to_string(), name.to_string()))).map(|o| Self::present(rt, o)).ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Objects of `rt` (in `ns`, or everywhere for `None`) matching both selectors, and the
    /// resourceVersion the list is consistent with.
    pub fn list(&self, rt: &ResourceType, ns: Option<&str>, labels: &LabelSelector, fields: &FieldSelector) -> (Vec<Value>, u64) {
        let items = self
            .bucket(rt)
            .into_iter()
            .flat_map(|b| b.iter())
            .filter(|((ons, _), _)| ns.is_none_or(|n| n == ons))
            .filter(|(_, o)| labels.matches(o) && fields.matches(o))
            .map(|(_, o)| Self::present(rt, o))
            .collect();
        (items, self.rv)
    }

    /// Starts a watch: from `since` (replaying later changes), or from now with a
    /// synthetic ADDED per existing object when `since` is unset or "0".
    pub fn watch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        since: Option<u64>,
    ) -> Result<WatchStart, ApiError> {
        let feed = self.changes.subscribe();
        let initial = match since.filter(|rv| *rv != 0) {
            None => self
                .list(rt, ns, labels, fields)
                .0
                .into_iter()
                .map(|object| {
                    Arc::new(Change {
                        rv: self.rv,
                        group: rt.group.clone(),
                        plural: rt.plural.clone(),
                        namespace: object["metadata"]["namespace"].as_str().unwrap_or_default().into(),
                        kind: ChangeType::Added,
                        object,
                        old: None,
                    })
                })
                .collect(),
            Some(rv) if rv < self.oldest_resumable => return Err(ApiError::gone(rv)),
            Some(rv) => self.history.iter().filter(|c| c.rv > rv).cloned().collect(),
        };
        Ok(WatchStart { initial, feed })
    }

    fn ensure_namespace(&self, rt: &ResourceType, ns: &str) -> Result<(), ApiError> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns_type = &self.types[0];
        match self.get(ns_type, "", ns) {
            Ok(n) if n["metadata"]["deletionTimestamp"].is_string() => {
                Err(ApiError::forbidden(rt, "", &format!("unable to create new content in namespace {ns} because it is being terminated")))
            }
            Ok(_) => Ok(()),
            Err(_) => Err(ApiError::namespace_not_found(ns)),
        }
    }

    fn next_uid(&mut self) -> String {
        self.uid_seq += 1;
        format!("{:08x}-0000-4000-8000-{:012x}", self.uid_prefix, self.uid_seq)
    }

    pub fn create(&mut self, rt: &ResourceType, ns: &str, body: Value, manager: &str) -> Result<Value, ApiError> {
        let (name, mut body) = self.prepare_new(rt, ns, body)?;
        let mut entries = vec![];
        managed::record_update(&mut entries, manager, None, &rt.api_version(), &time::now(), &json!({}), &body);
        managed::write(&mut body, &entries);
        Ok(self.commit(rt, ns, &name, None, body))
    }

    /// Checks a new object and fills in the metadata the server owns.
    fn prepare_new(&mut self, rt: &ResourceType, ns: &str, mut body: Value) -> Result<(String, Value), ApiError> {
        check_body(rt, &body, ns, None)?;
        self.ensure_namespace(rt, ns)?;
        let name = match body["metadata"]["name"].as_str() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => match body["metadata"]["generateName"].as_str() {
                Some(prefix) => format!("{prefix}{:05x}", self.uid_seq + 1),
                None => return Err(ApiError::invalid(rt, "", "metadata.name: Required value: name or generateName is required")),
            },
        };
        if self.get(rt, ns, &name).is_ok() {
            return Err(ApiError::already_exists(rt, &name));
        }
        if rt.kind == "CustomResourceDefinition" {
            resources::types_from_crd(&body).map_err(|m| ApiError::invalid(rt, &name, &m))?;
        }
        let uid = self.next_uid();
        let meta = body["metadata"].as_object_mut().ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        meta.insert("name".into(), json!(name));
        if rt.namespaced {
            meta.insert("namespace".into(), json!(ns));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(time::now()));
        meta.insert("generation".into(), json!(1));
        for server_field in ["resourceVersion", "deletionTimestamp", "managedFields"] {
            meta.remove(server_field);
        }
        if rt.status && rt.kind != "Namespace" && rt.kind != "CustomResourceDefinition" {
            // Status is written through the subresource only.
            body.as_object_mut().expect("checked").remove("status");
        }
        Ok((name, body))
    }

    /// Full replacement (PUT) of the object or of its status.
    pub fn replace(&mut self, rt: &ResourceType, ns: &str, name: &str, body: Value, manager: &str, subresource: Option<&str>) -> Result<Value, ApiError> {
        check_body(rt, &body, ns, Some(name))?;
        let live = self.get(rt, ns, name)?;
        if let Some(rv) = body["metadata"]["resourceVersion"].as_str().filter(|rv| !rv.is_empty()) {
            if live["metadata"]["resourceVersion"].as_str() != Some(rv) {
                return Err(ApiError::conflict_rv(rt, name));
            }
        }
        let candidate = scoped(rt, &live, body, subresource);
        self.update(rt, ns, name, live, candidate, manager, subresource)
    }

    /// JSON merge patch (RFC 7386) of the object or its status.
    pub fn merge_patch(&mut self, rt: &ResourceType, ns: &str, name: &str, patch: &Value, manager: &str, subresource: Option<&str>) -> Result<Value, ApiError> {
        let live = self.get(rt, ns, name)?;
        if let Some(rv) = patch["metadata"]["resourceVersion"].as_str() {
            if live["metadata"]["resourceVersion"].as_str() != Some(rv) {
                return Err(ApiError::conflict_rv(rt, name));
            }
        }
        let mut patched = live.clone();
        merge_patch(&mut patched, patch);
        let candidate = scoped(rt, &live, patched, subresource);
        self.update(rt, ns, name, live, candidate, manager, subresource)
    }

    /// Server-side apply; creates the object when it does not exist.
    #[allow(clippy::too_many_arguments)]
    pub fn apply(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        body: Value,
        manager: &str,
        force: bool,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        check_body(rt, &body, ns, Some(name))?;
        let live = match self.get(rt, ns, name) {
            Ok(live) => live,
            Err(_) if subresource.is_some() => return Err(ApiError::not_found(rt, name)),
            Err(_) => {
                let applied = applied_scope(rt, &body, None);
                let mut entries = vec![];
                let skeleton = json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": {"name": name}});
                let merged = managed::apply(&mut entries, &skeleton, &applied, manager, None, &rt.api_version(), &time::now(), force)
                    .expect("nothing owns fields of a new object");
                let (_, mut obj) = self.prepare_new(rt, ns, merged)?;
                managed::write(&mut obj, &entries);
                return Ok(self.commit(rt, ns, name, None, obj));
            }
        };
        if let Some(rv) = body["metadata"]["resourceVersion"].as_str() {
            if live["metadata"]["resourceVersion"].as_str() != Some(rv) {
                return Err(ApiError::conflict_rv(rt, name));
            }
        }
        let mut entries = managed::read(&live);
        let applied = applied_scope(rt, &body, subresource);
        let merged = managed::apply(&mut entries, &live, &applied, manager, subresource, &rt.api_version(), &time::now(), force)
            .map_err(|c| ApiError::apply_conflict(rt, name, &c))?;
        let mut candidate = merged;
        managed::write(&mut candidate, &entries);
        self.finish_update(rt, ns, name, live, candidate)
    }

    #[allow(clippy::too_many_arguments)]
    fn update(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        live: Value,
        mut candidate: Value,
        manager: &str,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        let mut entries = managed::read(&live);
        managed::record_update(&mut entries, manager, subresource, &rt.api_version(), &time::now(), &live, &candidate);
        managed::write(&mut candidate, &entries);
        self.finish_update(rt, ns, name, live, candidate)
    }

    /// Restores server-owned metadata, bumps generation on spec changes, and commits unless
    /// nothing changed (a no-op write keeps its resourceVersion, as on a real server).
    fn finish_update(&mut self, rt: &ResourceType, ns: &str, name: &str, live: Value, mut candidate: Value) -> Result<Value, ApiError> {
        for k in ["name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation", "resourceVersion"] {
            match live["metadata"].get(k) {
                Some(v) => candidate["metadata"][k] = v.clone(),
                None => {
                    if let Some(m) = candidate["metadata"].as_object_mut() {
                        m.remove(k);
                    }
                }
            }
        }
        if live["metadata"]["deletionTimestamp"].is_string() {
            let had = live["metadata"]["finalizers"].as_array().map(Vec::len).unwrap_or(0);
            let has = candidate["metadata"]["finalizers"].as_array().map(Vec::len).unwrap_or(0);
            if has > had {
                return Err(ApiError::forbidden(rt, name, "no new finalizers can be added if the object is being deleted"));
            }
        }
        if rt.kind == "CustomResourceDefinition" {
            resources::types_from_crd(&candidate).map_err(|m| ApiError::invalid(rt, name, &m))?;
        }
        if without_times(&candidate) == without_times(&live) {
            return Ok(live);
        }
        if spec_part(&candidate) != spec_part(&live) {
            let generation = live["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            candidate["metadata"]["generation"] = json!(generation);
        }
        let finalized = candidate["metadata"]["deletionTimestamp"].is_string() && candidate["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty);
        let out = self.commit(rt, ns, name, Some(live), candidate);
        if finalized {
            self.remove(rt, ns, name, Propagation::Background);
        }
        Ok(out)
    }

    /// DELETE: marks the object for deletion while finalizers remain, removes it otherwise,
    /// then collects its dependents as the garbage collector would.
    pub fn delete(&mut self, rt: &ResourceType, ns: &str, name: &str, propagation: Propagation) -> Result<Value, ApiError> {
        let live = self.get(rt, ns, name)?;
        let has_finalizers = live["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if live["metadata"]["deletionTimestamp"].is_string() {
                return Ok(live);
            }
            let mut marked = live.clone();
            marked["metadata"]["deletionTimestamp"] = json!(time::now());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            return Ok(self.commit(rt, ns, name, Some(live), marked));
        }
        Ok(self.remove(rt, ns, name, propagation).unwrap_or(live))
    }

    fn remove(&mut self, rt: &ResourceType, ns: &str, name: &str, propagation: Propagation) -> Option<Value> {
        let key = (rt.group.clone(), rt.plural.clone());
        let mut obj = self.objects.get_mut(&key)?.remove(&(ns.to_string(), name.to_string()))?;
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.record(rt, ns, ChangeType::Deleted, obj.clone(), None);
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        match rt.kind.as_str() {
            "CustomResourceDefinition" => self.drop_crd_types(name),
            "Namespace" => self.empty_namespace(name),
            _ => {}
        }
        self.collect_dependents(&uid, propagation);
        Some(obj)
    }

    /// The garbage collector: dependents lose the owner reference; one left with no owner
    /// that still exists is deleted (orphaning keeps them all).
    fn collect_dependents(&mut self, owner_uid: &str, propagation: Propagation) {
        let mut dependents = vec![];
        for (tk, bucket) in &self.objects {
            for (ok, obj) in bucket {
                if obj["metadata"]["ownerReferences"].as_array().is_some_and(|refs| refs.iter().any(|r| r["uid"] == owner_uid)) {
                    dependents.push((tk.clone(), ok.clone()));
                }
            }
        }
        for ((group, plural), (ns, name)) in dependents {
            let Some(rt) = self.types.iter().find(|t| t.group == group && t.plural == plural).cloned() else { continue };
            let Ok(live) = self.get(&rt, &ns, &name) else { continue };
            let mut updated = live.clone();
            let refs = updated["metadata"]["ownerReferences"].as_array_mut().expect("matched above");
            refs.retain(|r| r["uid"] != owner_uid);
            let remaining: Vec<String> = refs.iter().filter_map(|r| r["uid"].as_str().map(String::from)).collect();
            let orphaned = remaining.iter().all(|uid| !self.uid_exists(uid));
            if propagation == Propagation::Orphan || !orphaned {
                if remaining.is_empty() {
                    updated["metadata"].as_object_mut().expect("metadata").remove("ownerReferences");
                }
                self.commit(&rt, &ns, &name, Some(live), updated);
            } else {
                let _ = self.delete(&rt, &ns, &name, Propagation::Background);
            }
        }
    }

    fn uid_exists(&self, uid: &str) -> bool {
        self.objects.values().flat_map(|b| b.values()).any(|o| o["metadata"]["uid"] == uid)
    }

    fn drop_crd_types(&mut self, crd_name: &str) {
        let gone: Vec<ResourceType> = self.types.iter().filter(|t| t.crd.as_deref() == Some(crd_name)).cloned().collect();
        self.types.retain(|t| t.crd.as_deref() != Some(crd_name));
        for rt in gone {
            let keys: Vec<ObjKey> = self.bucket(&rt).map(|b| b.keys().cloned().collect()).unwrap_or_default();
            for (ns, name) in keys {
                self.remove(&rt, &ns, &name, Propagation::Background);
            }
        }
    }

    fn empty_namespace(&mut self, ns: &str) {
        let mut inside = vec![];
        for rt in self.types.iter().filter(|t| t.namespaced) {
            if let Some(b) = self.bucket(rt) {
                inside.extend(b.keys().filter(|(n, _)| n == ns).map(|(_, name)| (rt.clone(), name.clone())));
            }
        }
        for (rt, name) in inside {
            self.remove(&rt, ns, &name, Propagation::Background);
        }
    }

    /// Stores `obj` with a new resourceVersion and tells the watches.
    fn commit(&mut self, rt: &ResourceType, ns: &str, name: &str, old: Option<Value>, mut obj: Value) -> Value {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let obj = Self::present(rt, &obj);
        self.objects.entry((rt.group.clone(), rt.plural.clone())).or_default().insert((ns.to_string(), name.to_string()), obj.clone());
        if rt.kind == "CustomResourceDefinition" {
            if let Ok(new_types) = resources::types_from_crd(&obj) {
                self.types.retain(|t| t.crd.as_deref() != Some(name));
                self.types.extend(new_types);
            }
        }
        let kind = if old.is_some() { ChangeType::Modified } else { ChangeType::Added };
        self.record(rt, ns, kind, obj.clone(), old);
        obj
    }

    fn record(&mut self, rt: &ResourceType, ns: &str, kind: ChangeType, object: Value, old: Option<Value>) {
        let change = Arc::new(Change { rv: self.rv, group: rt.group.clone(), plural: rt.plural.clone(), namespace: ns.into(), kind, object, old });
        if self.history.len() == HISTORY {
            if let Some(dropped) = self.history.pop_front() {
                self.oldest_resumable = dropped.rv;
            }
        }
        self.history.push_back(change.clone());
        let _ = self.changes.send(change);
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

/// Body checks every write shares: apiVersion/kind match the endpoint, names agree.
fn check_body(rt: &ResourceType, body: &Value, ns: &str, name: Option<&str>) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
    }
    for (field, want) in [("apiVersion", rt.api_version()), ("kind", rt.kind.clone())] {
        match body[field].as_str() {
            Some(v) if v == want => {}
            Some(v) => return Err(ApiError::bad_request(&format!("{field} {v:?} does not match the endpoint ({want})"))),
            None => return Err(ApiError::bad_request(&format!("{field} must be set"))),
        }
    }
    if let (Some(want), Some(got)) = (name, body["metadata"]["name"].as_str()) {
        if want != got {
            return Err(ApiError::bad_request(&format!("the name of the object ({got}) does not match the name on the URL ({want})")));
        }
    }
    if let Some(got) = body["metadata"]["namespace"].as_str() {
        if rt.namespaced && !got.is_empty() && got != ns {
            return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
        }
    }
    Ok(())
}

/// What an endpoint may change: the main resource everything but status (for types with
/// a status subresource), the status subresource only status.
fn scoped(rt: &ResourceType, live: &Value, mut candidate: Value, subresource: Option<&str>) -> Value {
    if !rt.status || rt.kind == "Namespace" {
        return candidate;
    }
    match subresource {
        Some(_) => {
            let mut out = live.clone();
            match candidate.get("status") {
                Some(s) => out["status"] = s.clone(),
                None => {
                    out.as_object_mut().expect("object").remove("status");
                }
            }
            out
        }
        None => {
            match live.get("status") {
                Some(s) => candidate["status"] = s.clone(),
                None => {
                    candidate.as_object_mut().expect("object").remove("status");
                }
            }
            candidate
        }
    }
}

/// The part of an applied configuration the endpoint accepts.
fn applied_scope(rt: &ResourceType, body: &Value, subresource: Option<&str>) -> Value {
    let mut out = body.clone();
    if rt.status && rt.kind != "Namespace" {
        let m = out.as_object_mut().expect("checked");
        match subresource {
            Some(_) => {
                m.retain(|k, _| k == "status" || k == "apiVersion" || k == "kind");
            }
            None => {
                m.remove("status");
            }
        }
    }
    out
}

/// The object without timestamps in managedFields (they change on every write).
fn without_times(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(entries) = o["metadata"]["managedFields"].as_array_mut() {
        for e in entries {
            e.as_object_mut().map(|m| m.remove("time"));
        }
    }
    o
}

/// Everything but metadata and status: a change here bumps `metadata.generation`.
fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    o
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("made an object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}
