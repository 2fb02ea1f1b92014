//! The catalog image: the FBC tree under `/configs` and the label OLM reads
//! (olm.md §5). FROM scratch it serves OLM v1's ClusterCatalog (catalogd only unpacks the
//! labelled directory) and OLM v0 CatalogSources with `grpcPodConfig.extractContent`. On
//! an opm base it runs `opm serve /configs` itself — without `--cache-dir`, because a
//! cache that opm did not pre-build fails its integrity check at startup (trap 9).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::ToolError;
use crate::image::registry::PulledImage;
use crate::image::{build_on, File, Image, ImageConfig};

pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
pub const CONFIGS_DIR: &str = "/configs";

pub fn catalog_image(dir: &Path, base: Option<&PulledImage>) -> Result<Image, ToolError> {
    let tree = crate::bundle::generate::read_tree(dir)?;
    if tree.is_empty() {
        return Err(ToolError::Invalid(format!(
            "{}: the catalog directory is empty (fix: run `bundle-tool catalog render … -o {}/<package>/catalog.yaml`)",
            dir.display(),
            dir.display()
        )));
    }
    let files: Vec<File> = tree
        .into_iter()
        .map(|(path, text)| File { path: format!("configs/{path}"), mode: 0o644, data: text.into_bytes() })
        .collect();
    let mut config = ImageConfig {
        labels: BTreeMap::from([(CONFIGS_LABEL.to_string(), CONFIGS_DIR.to_string())]),
        ..Default::default()
    };
    if base.is_some() {
        config.entrypoint = Some(vec!["/bin/opm".into()]);
        config.cmd = Some(vec!["serve".into(), CONFIGS_DIR.into()]);
    }
    Ok(build_on(base, &config, &[files]))
}
