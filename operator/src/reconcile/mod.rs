//! Reconciliation: turning rendered objects into server-side applies and prunes.
//! Only the pure planning layer exists so far (see the operator issue for the controller).

pub mod plan;
