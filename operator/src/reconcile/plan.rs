//! The apply plan: rendered objects made ready for server-side apply, and the rule that
//! decides what may be pruned. Pure functions, so the whole decision is testable without an
//! API server.
//!
//! Every applied object gets an ownerReference with `controller: true` to its CR (so the
//! garbage collector removes children when the CR goes) and two identity labels. Pruning
//! deletes only objects that carry **both** our identity labels **and** a controller
//! ownerReference to this CR's UID, and that this render no longer produced.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::chart::{Component, RenderedObject};
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::KIND;

/// The chart sets `MANAGED_BY_LABEL: MANAGED_BY` on every object; pruning requires it.
pub(crate) use crate::chart::{MANAGED_BY, MANAGED_BY_LABEL};
/// Label naming the ModelOrchestra an object belongs to.
pub(crate) use model_orchestra_api::keys::OWNER_NAME_LABEL;
/// The field manager of every apply.
pub(crate) const FIELD_MANAGER: &str = "model-orchestra-operator";

/// The CR an apply plan belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    /// `models.titanml.co/<version>`: the version the reconciling line serves.
    pub api_version: String,
    pub name: String,
    pub uid: String,
}

/// The objects to apply, in apply order, and a hash of all of them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApplyPlan {
    pub objects: Vec<PlannedObject>,
    /// SHA-256 over the canonical JSON of every object: equal hashes mean nothing to apply.
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedObject {
    pub kind: Kind,
    pub name: String,
    pub component: Component,
    /// The full apply body (apiVersion, kind, metadata with labels and ownerReference).
    pub body: Value,
    /// SHA-256 of the body: the same digest as at the last apply means the same object.
    pub digest: String,
}

impl ApplyPlan {
    /// The (kind, name) pairs this plan keeps; everything else of ours may be pruned.
    pub(crate) fn keeps(&self) -> BTreeSet<(Kind, String)> {
        self.objects.iter().map(|o| (o.kind, o.name.clone())).collect()
    }
}

/// Turns rendered objects into apply bodies owned by `owner`.
pub(crate) fn plan(owner: &Owner, rendered: Vec<RenderedObject>) -> ApplyPlan {
    let owner_ref = json!({
        "apiVersion": owner.api_version,
        "kind": KIND,
        "name": owner.name,
        "uid": owner.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    });
    let mut hasher = Sha256::new();
    let objects = rendered
        .into_iter()
        .map(|r| {
            let mut body = r.object;
            let meta = body["metadata"].as_object_mut().expect("rendered objects have metadata");
            meta.insert("ownerReferences".into(), json!([owner_ref]));
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            labels[OWNER_NAME_LABEL] = json!(owner.name);
            let bytes = serde_json::to_vec(&body).expect("JSON serialises");
            hasher.update(&bytes);
            hasher.update(b"\n");
            let digest = hex(&Sha256::digest(&bytes));
            PlannedObject { kind: r.kind, name: r.name, component: r.component, body, digest }
        })
        .collect();
    let hash = hex(&hasher.finalize());
    ApplyPlan { objects, hash }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The facts about an existing object that pruning looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Existing {
    pub kind: Kind,
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    /// UIDs of ownerReferences that have `controller: true`.
    pub controller_uids: Vec<String>,
}

impl Existing {
    /// The facts of an object of `kind` with this metadata.
    pub(crate) fn of(kind: Kind, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Existing {
        Existing {
            kind,
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            controller_uids: controller_uids(meta),
        }
    }
}

/// The UIDs of an object's controller ownerReferences.
pub(crate) fn controller_uids(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Vec<String> {
    meta.owner_references.iter().flatten().filter(|r| r.controller == Some(true)).map(|r| r.uid.clone()).collect()
}

/// Existing objects to delete: ours (identity labels and controller ownerReference to this
/// CR), of a kind the chart renders, and not in the plan. Anything else is never touched.
pub(crate) fn prune<'a>(owner: &Owner, plan: &ApplyPlan, existing: &'a [Existing]) -> Vec<&'a Existing> {
    let keep = plan.keeps();
    existing
        .iter()
        .filter(|e| e.labels.get(OWNER_NAME_LABEL) == Some(&owner.name))
        .filter(|e| e.labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY))
        .filter(|e| e.controller_uids.contains(&owner.uid))
        .filter(|e| !keep.contains(&(e.kind, e.name.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn owner() -> Owner {
        Owner { api_version: "models.titanml.co/v1alpha1".into(), name: "demo".into(), uid: "uid-1".into() }
    }

    fn rendered(kind: Kind, name: &str) -> RenderedObject {
        RenderedObject {
            kind,
            name: name.into(),
            component: Component::Release,
            object: json!({"apiVersion": kind.api_version(), "kind": kind.kind(), "metadata": {"name": name, "labels": {}}}),
        }
    }

    fn existing(kind: Kind, name: &str, owner_label: Option<&str>, uid: Option<&str>) -> Existing {
        let mut labels = BTreeMap::from([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())]);
        if let Some(o) = owner_label {
            labels.insert(OWNER_NAME_LABEL.into(), o.into());
        }
        Existing { kind, name: name.into(), labels, controller_uids: uid.into_iter().map(String::from).collect() }
    }

    #[test]
    fn every_planned_object_is_owned_by_the_cr_as_controller_and_labelled() {
        let p = plan(&owner(), vec![rendered(Kind::ConfigMap, "a")]);
        let meta = &p.objects[0].body["metadata"];
        assert_eq!(meta["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(meta["ownerReferences"][0]["controller"], true);
        assert_eq!(meta["ownerReferences"][0]["kind"], "ModelOrchestra");
        assert_eq!(meta["labels"][OWNER_NAME_LABEL], "demo");
    }

    #[test]
    fn the_hash_changes_with_any_object_and_only_then() {
        let a = plan(&owner(), vec![rendered(Kind::ConfigMap, "a")]);
        let same = plan(&owner(), vec![rendered(Kind::ConfigMap, "a")]);
        let other = plan(&owner(), vec![rendered(Kind::ConfigMap, "b")]);
        assert_eq!(a.hash, same.hash);
        assert_ne!(a.hash, other.hash);
    }

    #[test]
    fn prune_deletes_only_our_objects_that_are_no_longer_rendered() {
        let p = plan(&owner(), vec![rendered(Kind::ConfigMap, "kept")]);
        let objects = [
            existing(Kind::ConfigMap, "kept", Some("demo"), Some("uid-1")),
            existing(Kind::ConfigMap, "gone", Some("demo"), Some("uid-1")),
            existing(Kind::ConfigMap, "no-label", None, Some("uid-1")),
            existing(Kind::ConfigMap, "other-cr", Some("other"), Some("uid-2")),
            existing(Kind::ConfigMap, "label-but-not-owned", Some("demo"), None),
            existing(Kind::ConfigMap, "owned-by-older-cr-with-same-name", Some("demo"), Some("uid-0")),
        ];
        let pruned: Vec<&str> = prune(&owner(), &p, &objects).iter().map(|e| e.name.as_str()).collect();
        assert_eq!(pruned, ["gone"]);
    }

    #[test]
    fn prune_never_touches_objects_managed_by_someone_else() {
        let p = plan(&owner(), vec![]);
        let mut foreign = existing(Kind::Service, "s", Some("demo"), Some("uid-1"));
        foreign.labels.insert(MANAGED_BY_LABEL.into(), "Helm".into());
        assert!(prune(&owner(), &p, &[foreign]).is_empty());
    }
}
