//! The facts about a CR a reconcile starts from, and the key everything kept per CR is
//! kept under.

use kube::ResourceExt;
use model_orchestra_api::v1alpha2::ModelOrchestraStatus;

use super::cached_cr::CachedCr;
use crate::reconcile::model;
use crate::reconcile::plan::Owner;
use crate::reconcile::promotion;

/// `namespace/name` of a CR: the key of everything kept per CR.
pub(super) fn key(obj: &CachedCr) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The facts about the CR a reconcile starts from.
pub(super) struct Cr<'a> {
    pub(super) obj: &'a CachedCr,
    pub(super) key: String,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) uid: String,
    pub(super) generation: Option<i64>,
    pub(super) previous: ModelOrchestraStatus,
    /// `models.titanml.co/refresh`.
    pub(super) refresh_annotation: Option<String>,
    /// `models.titanml.co/retry-promotion`.
    pub(super) retry_annotation: Option<String>,
}

impl<'a> Cr<'a> {
    pub(super) fn fetch(obj: &'a CachedCr) -> Self {
        Cr {
            obj,
            key: key(obj),
            namespace: obj.namespace().unwrap_or_else(|| "default".into()),
            name: obj.name_any(),
            uid: obj.uid().unwrap_or_default(),
            generation: obj.metadata.generation,
            previous: obj.status().unwrap_or_default(),
            refresh_annotation: obj.annotations().get(model::REFRESH_ANNOTATION).cloned(),
            retry_annotation: obj.annotations().get(promotion::RETRY_ANNOTATION).cloned(),
        }
    }

    pub(super) fn owner(&self, api_version: String) -> Owner {
        Owner { api_version, name: self.name.clone(), uid: self.uid.clone() }
    }
}
