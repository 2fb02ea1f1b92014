//! bundle-tool held to the real tools: opm and operator-sdk as oracles (built from the pinned
//! modules under tools/), a real `docker-registry`, `skopeo` as an independent client and
//! `kubernetes-validate`. Not run by a plain `cargo test` (`test = false`): `make test-e2e`
//! installs the tools and runs it.

#[path = "../support/mod.rs"]
mod support;

mod catalog_registry;
mod catalog_validate;
mod images;
mod opm_render_bundle;
mod opm_render_template;
mod opm_validate;
mod opm_writer;
mod subscriptions;
mod validate;
