//! The end-to-end tier: the operator, its HTTP API and its image on a real cluster
//! (`local-cluster`: etcd, kube-apiserver, the controllers, kwok's fake nodes and a real
//! node). One test binary and one shared cluster, a namespace per test; the tests that
//! need a cluster of their own (the operator deployed in its pod) start one.
//!
//! Not run by a plain `cargo test` (`test = false`): `make test-e2e` builds what it needs
//! (the Go tools, the static binaries the images are made of) and runs it.

mod http_support;
mod support;

mod basics;
mod crd_versions;
mod day_one;
mod diff;
mod gateway;
mod group;
mod http_api;
mod http_api_hostile;
mod http_api_page;
mod http_api_schemathesis;
mod in_pod;
mod model_cache;
mod ollama;
mod promotion;
mod server_validation;
mod v1alpha2;
#[path = "../shared/whole_answer.rs"]
mod whole_answer;
