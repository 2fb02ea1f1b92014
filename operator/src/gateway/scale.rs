//! The only writes the model gateway makes: an application's Deployment `replicas`, through
//! its `scale` subresource, under the field manager `model-orchestra-gateway` (the operator
//! applies no `replicas` for an application that sleeps, so the two never fight).

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use model_orchestra_api::keys::GATEWAY_FIELD_MANAGER;

type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Reads and sets a Deployment's replicas.
pub trait Scaler: Send + Sync {
    fn replicas<'a>(&'a self, deployment: &'a str) -> Answer<'a, i32>;
    fn scale<'a>(&'a self, deployment: &'a str, replicas: i32) -> Answer<'a, ()>;
}

/// The API server's `deployments/scale` in the gateway's namespace.
pub struct KubeScaler {
    pub api: Api<Deployment>,
}

impl Scaler for KubeScaler {
    fn replicas<'a>(&'a self, deployment: &'a str) -> Answer<'a, i32> {
        Box::pin(async move {
            let scale = self.api.get_scale(deployment).await.map_err(|e| e.to_string())?;
            Ok(scale.spec.and_then(|s| s.replicas).unwrap_or(0))
        })
    }

    fn scale<'a>(&'a self, deployment: &'a str, replicas: i32) -> Answer<'a, ()> {
        Box::pin(async move {
            let patch = serde_json::json!({"spec": {"replicas": replicas}});
            let params = PatchParams { field_manager: Some(GATEWAY_FIELD_MANAGER.into()), ..Default::default() };
            self.api.patch_scale(deployment, &params, &Patch::Merge(&patch)).await.map_err(|e| e.to_string())?;
            Ok(())
        })
    }
}
