//! A ModelOrchestra as the controller caches and reconciles it: its metadata, and its spec
//! and status kept as the JSON text they arrived as. The spec stays untyped until a
//! reconcile parses it (an invalid spec is reported, it does not stall the watch), but as
//! text: a `serde_json::Value` spends a B-tree node of some 600 bytes on every small object,
//! so a CR with four applications and their status took 17 KiB of the operator's memory as
//! a `DynamicObject`, and a few as text.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

/// One cached ModelOrchestra.
#[derive(Clone, Debug)]
pub(crate) struct CachedCr {
    pub metadata: ObjectMeta,
    /// The spec as JSON text (`null` when it has none).
    spec: Box<str>,
    /// The status as JSON text, when it has one.
    status: Option<Box<str>>,
}

impl CachedCr {
    /// The status as JSON (`null` when it has none).
    pub(crate) fn status_json(&self) -> Value {
        self.status.as_deref().and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null)
    }

    /// The status read as `T` (a part of it, or all of it); `None` when it has none or it
    /// does not read as `T`.
    pub(crate) fn status<T: DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(self.status.as_deref()?).ok()
    }

    /// The whole object as JSON, as the API server served it at `resource`'s version (the
    /// input of strict parsing).
    pub(crate) fn to_json(&self, resource: &ApiResource) -> Value {
        let spec: Value = serde_json::from_str(&self.spec).unwrap_or(Value::Null);
        let mut object = json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": self.metadata,
            "spec": spec,
        });
        if self.status.is_some() {
            object["status"] = self.status_json();
        }
        object
    }
}

impl<'de> Deserialize<'de> for CachedCr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Served {
            #[serde(default)]
            metadata: ObjectMeta,
            #[serde(default)]
            spec: Value,
            #[serde(default)]
            status: Option<Value>,
        }
        let Served { metadata, spec, status } = Served::deserialize(deserializer)?;
        Ok(CachedCr {
            metadata,
            spec: spec.to_string().into_boxed_str(),
            status: status.map(|s| s.to_string().into_boxed_str()),
        })
    }
}

/// Its kind is known at run time: the version CRs are read at.
impl kube::Resource for CachedCr {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(resource: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&resource.kind)
    }
    fn group(resource: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&resource.group)
    }
    fn version(resource: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&resource.version)
    }
    fn api_version(resource: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&resource.api_version)
    }
    fn plural(resource: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&resource.plural)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Value {
        json!({
            "apiVersion": "models.titanml.co/v1alpha2",
            "kind": "ModelOrchestra",
            "metadata": {"name": "chat", "namespace": "ns", "generation": 2},
            "spec": {"applications": {"chat": {"replicaCount": 1}}},
            "status": {"observedGeneration": 2, "servedAs": "v1alpha2"}
        })
    }

    #[test]
    fn a_cached_cr_reads_back_as_the_object_it_was_served_as() {
        let cr: CachedCr = serde_json::from_value(served()).unwrap();
        let resource = model_orchestra_api::ApiVersion::STORAGE.resource();
        assert_eq!(cr.to_json(&resource), served());
    }

    #[test]
    fn a_cached_crs_status_reads_as_any_part_of_it() {
        let cr: CachedCr = serde_json::from_value(served()).unwrap();
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Seen {
            served_as: String,
        }
        assert_eq!(cr.status::<Seen>().map(|s| s.served_as).as_deref(), Some("v1alpha2"));
        assert_eq!(cr.status_json()["observedGeneration"], 2);
    }

    #[test]
    fn a_cr_without_status_has_none() {
        let mut object = served();
        object.as_object_mut().unwrap().remove("status");
        let cr: CachedCr = serde_json::from_value(object.clone()).unwrap();
        assert_eq!(cr.status_json(), Value::Null);
        assert_eq!(cr.to_json(&model_orchestra_api::ApiVersion::STORAGE.resource()), object);
    }
}
