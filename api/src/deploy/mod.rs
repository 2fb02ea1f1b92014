//! The operator's own install manifests, generated from code so that each has one source of
//! truth: `make deploy` applies them and bundle-tool builds the CSV from them.

pub mod httpapi;
pub mod operator;
pub mod rbac;
