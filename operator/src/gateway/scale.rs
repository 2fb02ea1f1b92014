//! The model gateway's writes to an application's Deployment: its `replicas`, through the
//! `scale` subresource, under the field manager `model-orchestra-gateway` (the operator
//! applies no `replicas` for an application that sleeps, so the two never fight).
//!
//! Each write is conditional ([`Conditional`]): a wake-up scales up only from zero and a
//! sleep down only from above zero, on the `resourceVersion` the decision read. So however
//! many gateway replicas hold requests for a sleeping application, one write wakes it; the
//! others' writes are refused (409), and reading again they find it waking.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use model_orchestra_api::keys::GATEWAY_FIELD_MANAGER;

type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// What a conditional scale did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scaled {
    /// This gateway's write set the replicas.
    Done,
    /// The replicas were already so (zero for a sleep, above zero for a wake-up), or another
    /// writer (another gateway) changed them first: nothing written.
    Already,
}

/// Sets a Deployment's replicas.
pub trait Scaler: Send + Sync {
    /// Sets `replicas` to `to` only from zero (`to` > 0, a wake-up) or only from above zero
    /// (`to` = 0, a sleep), as one write conditional on what was read.
    fn scale<'a>(&'a self, deployment: &'a str, to: i32) -> Answer<'a, Scaled>;
}

/// A Deployment's replicas as read, with the version they were read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub replicas: i32,
    pub version: String,
}

/// A Deployment's `scale` subresource.
pub trait ScaleSubresource: Send + Sync {
    fn read<'a>(&'a self, deployment: &'a str) -> Answer<'a, Versioned>;
    /// Writes `replicas` if the Deployment is still at `version`; `false` when it is not.
    fn write<'a>(&'a self, deployment: &'a str, replicas: i32, version: &'a str) -> Answer<'a, bool>;
}

/// Whether `to` is a change from `now` that [`Scaler::scale`] makes.
pub fn changes(now: i32, to: i32) -> bool {
    if to > 0 {
        now == 0
    } else {
        now > 0
    }
}

/// How many times a conditional scale reads again after a conflict.
const CONFLICTS: usize = 5;

/// The conditional scale over a `scale` subresource.
pub struct Conditional(pub Arc<dyn ScaleSubresource>);

impl Scaler for Conditional {
    fn scale<'a>(&'a self, deployment: &'a str, to: i32) -> Answer<'a, Scaled> {
        Box::pin(async move {
            // A conflict says only that the Deployment changed since the read (its status
            // does, often): read again and decide again, a few times.
            for _ in 0..CONFLICTS {
                let now = self.0.read(deployment).await?;
                if !changes(now.replicas, to) {
                    return Ok(Scaled::Already);
                }
                if self.0.write(deployment, to, &now.version).await? {
                    return Ok(Scaled::Done);
                }
            }
            Err(format!("the Deployment changed under each of {CONFLICTS} tries"))
        })
    }
}

/// The API server's `deployments/scale` in the gateway's namespace.
pub struct KubeScale {
    pub api: Api<Deployment>,
}

impl ScaleSubresource for KubeScale {
    fn read<'a>(&'a self, deployment: &'a str) -> Answer<'a, Versioned> {
        Box::pin(async move {
            let scale = self.api.get_scale(deployment).await.map_err(|e| e.to_string())?;
            Ok(Versioned {
                replicas: scale.spec.and_then(|s| s.replicas).unwrap_or(0),
                version: scale.metadata.resource_version.unwrap_or_default(),
            })
        })
    }

    fn write<'a>(&'a self, deployment: &'a str, replicas: i32, version: &'a str) -> Answer<'a, bool> {
        Box::pin(async move {
            // The resourceVersion in the body makes the write conditional: the API server
            // refuses it (409) if anything changed the Deployment since the read.
            let scale = Scale {
                metadata: ObjectMeta {
                    name: Some(deployment.into()),
                    resource_version: Some(version.into()),
                    ..Default::default()
                },
                spec: Some(ScaleSpec { replicas: Some(replicas) }),
                status: None,
            };
            let params = PostParams { field_manager: Some(GATEWAY_FIELD_MANAGER.into()), ..Default::default() };
            match self.api.replace_scale(deployment, &params, &scale).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}
