//! The stack's last request per application, shared by every replica of the model gateway,
//! so that an application sleeps after `idleSeconds` without a request at *any* gateway.
//!
//! The record is a `coordination.k8s.io/v1` Lease per sleeping application
//! (`<deployment>-activity`, owned by the application's Deployment, so it goes with it):
//! `spec.renewTime` is the last request a gateway published, `spec.holderIdentity` the
//! gateway pod that published it. A Lease because it is the API's object for "a time some
//! process last saw something" (kube-scheduler and the node heartbeats use it so) and no
//! controller of ours watches it: writing it reconciles nothing. Not an annotation on the
//! Deployment: the operator watches its Deployments, and every write would reconcile the CR.
//!
//! Its cost in API requests (see [`publish_every`]): while an application has traffic at a
//! gateway, one read and one merge patch per `idleSeconds / 10` (between 1 s and 30 s) from
//! that gateway (the patch conditional on the read, and none when another gateway published
//! a later request: the record only moves forward); while it is idle at a gateway, one
//! read per idle period once that gateway's own idle time is up.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, Patch, PatchParams, PostParams};
use model_orchestra_api::keys::GATEWAY_FIELD_MANAGER;

use crate::chart::model_gateway::activity_lease as lease_name;
use serde_json::json;

type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Where the gateways publish and read the last request of each application.
pub trait Activity: Send + Sync {
    /// The last request any gateway published for the application of `deployment`.
    fn last<'a>(&'a self, deployment: &'a str) -> Answer<'a, Option<SystemTime>>;
    /// Publishes a request at `at` for the application of `deployment`, unless a later one
    /// is published already.
    fn publish<'a>(&'a self, deployment: &'a str, at: SystemTime) -> Answer<'a, ()>;
}

/// How often a gateway with traffic for an application publishes it: often enough that the
/// record lags the stack's true last request by at most this and one idle check (a tenth
/// of `idleSeconds`, between 1 s and 30 s). An application sleeps once the record is that
/// much older than `idleSeconds`: never early, at most that late.
pub fn publish_every(idle_seconds: i32) -> Duration {
    Duration::from_secs((idle_seconds.max(0) as u64 / 10).clamp(1, 30))
}

/// The API server's Leases in the gateway's namespace.
pub struct LeaseActivity {
    pub leases: Api<Lease>,
    pub deployments: Api<Deployment>,
    /// This gateway's pod.
    pub identity: String,
}

impl Activity for LeaseActivity {
    fn last<'a>(&'a self, deployment: &'a str) -> Answer<'a, Option<SystemTime>> {
        Box::pin(async move {
            let lease = self.leases.get_opt(&lease_name(deployment)).await.map_err(|e| e.to_string())?;
            Ok(lease.and_then(|l| l.spec?.renew_time).map(|t| SystemTime::from(t.0)))
        })
    }

    fn publish<'a>(&'a self, deployment: &'a str, at: SystemTime) -> Answer<'a, ()> {
        Box::pin(async move {
            let name = lease_name(deployment);
            let renew = MicroTime(k8s_openapi::jiff::Timestamp::try_from(at).map_err(|e| e.to_string())?);
            let spec = json!({"holderIdentity": self.identity, "renewTime": renew});
            let patch = PatchParams { field_manager: Some(GATEWAY_FIELD_MANAGER.into()), ..Default::default() };
            // Only ever forward: a later request another gateway published is kept. The
            // write is conditional on the version read, so two gateways cannot interleave.
            for _ in 0..CONFLICTS {
                let Some(lease) = self.leases.get_opt(&name).await.map_err(|e| e.to_string())? else {
                    match self.create(deployment, &name, &spec).await? {
                        true => return Ok(()),
                        false => continue,
                    }
                };
                let published = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map(|t| SystemTime::from(t.0));
                if published.is_some_and(|p| p >= at) {
                    return Ok(());
                }
                let body = json!({"metadata": {"resourceVersion": lease.metadata.resource_version}, "spec": spec});
                match self.leases.patch(&name, &patch, &Patch::Merge(body)).await {
                    Ok(_) => return Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 409 => continue,
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(format!("the Lease {name} changed under each of {CONFLICTS} tries"))
        })
    }
}

/// How many times a publication reads again after a conflict.
const CONFLICTS: usize = 3;

impl LeaseActivity {
    /// The first publication since the application was created: its Lease, owned by its
    /// Deployment (the scale subresource carries the Deployment's UID). `false` when another
    /// gateway created it meanwhile.
    async fn create(&self, deployment: &str, name: &str, spec: &serde_json::Value) -> Result<bool, String> {
        let scale = self.deployments.get_scale(deployment).await.map_err(|e| e.to_string())?;
        let uid = scale.metadata.uid.ok_or("the Deployment's scale has no UID")?;
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment, "uid": uid}]},
            "spec": spec,
        }))
        .map_err(|e| e.to_string())?;
        let params = PostParams { field_manager: Some(GATEWAY_FIELD_MANAGER.into()), ..Default::default() };
        match self.leases.create(&params, &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_publishes_a_tenth_of_the_idle_time_between_one_and_thirty_seconds() {
        assert_eq!(publish_every(5), Duration::from_secs(1));
        assert_eq!(publish_every(120), Duration::from_secs(12));
        assert_eq!(publish_every(3600), Duration::from_secs(30));
    }
}
