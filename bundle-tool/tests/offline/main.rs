//! bundle-tool's offline tier: bundles, catalogs, templates and credentials, with no program
//! but bundle-tool itself. `cargo test` (and `make test-unit`) runs it.

#[path = "../support/mod.rs"]
mod support;

mod catalog_render;
mod credentials;
mod dependencies;
mod generate;
mod releases;
mod semver_template;
mod side_by_side;
