//! Reconciliation logic that needs no API server: the apply plan and prune rule, the
//! status and its conditions, version routing and per-object backoff. The controller
//! ([`crate::controller`]) does the I/O around these.

pub mod backoff;
pub mod condition;
pub mod plan;
pub mod routing;
pub mod status;
