//! Running the operator in production: metrics, health endpoints, leader election.

pub mod http;
pub mod leader;
pub mod metrics;
