//! The OLM drills: the two operator lines installed side by side by a real OLM — v1
//! (catalogd and operator-controller v1.2.0, built from `tools/olm`, `v1.rs`) and v0
//! (operator-lifecycle-manager v0.38.0, built from `tools/olm-v0`, `v0.rs`) — from the
//! released catalog in the cluster's loopback registry, on the real control plane
//! (local-cluster), as a maintainer and a cluster admin live it. Each line runs as the pod
//! OLM's Deployment creates, on the cluster's real node, from the image its CSV names (the
//! released `ghcr.io/…` images are pulled from the cluster's registry, which mirrors ghcr.io
//! and quay.io as an air-gapped cluster's would). The book's "The OLM drills" page
//! (docs/src/olm/drill.md) is these tests.
//!
//! One test per OLM, in steps: each step needs what the ones before made (one cluster, one
//! OLM, one catalog that grows), so they cannot run apart; the two tests run at once, each
//! on a cluster of its own. Each step is a function named after what it checks; a drill
//! prints a line per step and fails naming the step's check.
//!
//! Not run by a plain `cargo test` (`test = false`): it needs the static operator (`make
//! static`), each release's operator rebuilt static from its release commit
//! (`scripts/released-operator.sh VERSION`) and both OLMs (`scripts/build-go-tools.sh`),
//! which `make olm-drill` builds before running them.

mod crs;
mod drill;
mod olm_v0;
mod olm_v1;
#[path = "../support/mod.rs"]
mod support;
mod v0;
mod v1;
