//! Leader election on a `coordination.k8s.io/v1` Lease, one per routing value, so two
//! instances of the same operator version never both write. Optimistic concurrency on the
//! Lease's resourceVersion decides races; a holder that stops renewing loses the Lease
//! after `leaseDurationSeconds`; a holder that stops releases it, and a standby, which
//! watches the Lease between attempts, takes it at once.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};

/// The annotation on a Lease naming the API version its line serves, so an instance started
/// for another version under the same routing value is refused rather than left waiting.
pub use model_orchestra_api::keys::SERVES_ANNOTATION;

pub struct LeaseLock {
    api: Api<Lease>,
    pub name: String,
    pub identity: String,
    pub duration: Duration,
    /// The API version this instance's line serves.
    pub serves: String,
}

/// One attempt at the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This instance holds it.
    Holding,
    /// Another instance of the same line holds it; this one stands by.
    Standby { holder: String, resource_version: Option<String> },
}

/// Why this instance can never lead.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("the Lease {lease} is held by {holder}, which serves {serves}, but this instance serves {ours}: one line serves one version; give this instance another routing value (--routing)")]
    OtherVersion { lease: String, holder: String, serves: String, ours: String },
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// Whether a lease held by someone else has expired at `now`.
pub fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let duration = SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(15).into());
    renewed.0.checked_add(duration).map_or(true, |until| until < now)
}

impl LeaseLock {
    pub fn new(
        client: Client,
        namespace: &str,
        name: String,
        identity: String,
        duration: Duration,
        serves: String,
    ) -> Self {
        LeaseLock { api: Api::namespaced(client, namespace), name, identity, duration, serves }
    }

    fn annotations(&self) -> Option<std::collections::BTreeMap<String, String>> {
        Some([(SERVES_ANNOTATION.to_string(), self.serves.clone())].into())
    }

    /// One attempt: creates, renews or takes over the Lease. Refused when a live holder
    /// serves another API version.
    pub async fn try_acquire_or_renew(&self) -> Result<Attempt, LeaseError> {
        let now = Timestamp::now();
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    annotations: self.annotations(),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(self.duration.as_secs() as i32),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Holding),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Ok(Attempt::Standby { holder: String::new(), resource_version: None })
                }
                Err(e) => Err(e.into()),
            };
        };
        let theirs = lease.metadata.annotations.as_ref().and_then(|a| a.get(SERVES_ANNOTATION)).cloned();
        let resource_version = lease.metadata.resource_version.clone();
        lease.metadata.annotations.get_or_insert_with(Default::default).extend(self.annotations().unwrap_or_default());
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder != self.identity {
            if !holder.is_empty() && !expired(spec, now) {
                // Leases of lines from before 0.2 carry no annotation: nothing to compare.
                if let Some(serves) = theirs.filter(|v| *v != self.serves) {
                    let ours = self.serves.clone();
                    return Err(LeaseError::OtherVersion { lease: self.name.clone(), holder, serves, ours });
                }
                return Ok(Attempt::Standby { holder, resource_version });
            }
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(self.duration.as_secs() as i32);
        // The resourceVersion in `lease` makes this a compare-and-swap.
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Holding),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Standby { holder, resource_version: None }),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the Lease up (on shutdown) so a standby takes over without waiting it out.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        if let Err(e) = self.api.replace(&self.name, &PostParams::default(), &lease).await {
            tracing::warn!(error = %e, lease = %self.name, "cannot release the lease");
        }
    }

    /// Waits until this instance holds the Lease; says once who holds it meanwhile. Fails
    /// when the holder serves another API version (this instance could only wait forever).
    pub async fn acquire(&self, retry: Duration) -> Result<(), LeaseError> {
        let mut said = None;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Holding) => return Ok(()),
                Ok(Attempt::Standby { holder, resource_version }) => {
                    if said.as_ref() != Some(&holder) {
                        tracing::info!(lease = %self.name, %holder, "another instance of this line leads; standing by");
                        said = Some(holder);
                    }
                    self.wait_for_change(resource_version.as_deref(), retry).await;
                    continue;
                }
                Err(e @ LeaseError::OtherVersion { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "leader election failed; retrying")
                }
            }
            tokio::time::sleep(retry).await;
        }
    }

    /// Up to `retry`, or until the Lease changes after `resource_version` (its holder
    /// released or renewed it): a released Lease is taken at once, not at the next retry.
    /// Without a version, or when the watch cannot be made, it waits `retry`.
    async fn wait_for_change(&self, resource_version: Option<&str>, retry: Duration) {
        let started = tokio::time::Instant::now();
        if let Some(version) = resource_version {
            let params = WatchParams::default()
                .fields(&format!("metadata.name={}", self.name))
                .timeout(retry.as_secs().max(1) as u32);
            if let Ok(stream) = self.api.watch(&params, version).await {
                let mut stream = stream.boxed();
                let changed = tokio::time::timeout(retry, stream.next()).await;
                if let Ok(Some(Ok(WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)))) = changed {
                    return;
                }
            }
        }
        tokio::time::sleep(retry.saturating_sub(started.elapsed())).await;
    }

    /// Renews every `renew` until a renewal fails for longer than the lease lasts; then
    /// returns (leadership is lost and the caller must stop writing).
    pub async fn hold(&self, renew: Duration) {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(renew).await;
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Holding) => last_renewed = tokio::time::Instant::now(),
                Ok(Attempt::Standby { .. }) | Err(LeaseError::OtherVersion { .. }) => return,
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "cannot renew the lease");
                    if last_renewed.elapsed() >= self.duration {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(renewed_at: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some("a".into()),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed_at).unwrap())),
            lease_duration_seconds: Some(duration),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_expires_its_duration_after_the_last_renewal() {
        assert!(!expired(&spec(100, 15), Timestamp::from_second(114).unwrap()));
        assert!(expired(&spec(100, 15), Timestamp::from_second(116).unwrap()));
    }

    #[test]
    fn a_lease_never_renewed_is_free() {
        assert!(expired(&LeaseSpec::default(), Timestamp::from_second(0).unwrap()));
    }
}
