//! Reconciliation logic that needs no API server: the apply plan and prune rule, the
//! status and its conditions, version routing and per-object backoff. The controller
//! ([`crate::controller`]) does the I/O around these.

pub(crate) mod backoff;
pub(crate) mod condition;
pub(crate) mod drift;
pub(crate) mod group;
pub(crate) mod model;
pub(crate) mod plan;
pub(crate) mod pod_health;
pub(crate) mod promotion;
pub mod routing;
pub(crate) mod status;
