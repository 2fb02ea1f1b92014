//! The operator's own image in the cluster's registry: `make static`'s binary, as
//! `bundle-tool image build` makes the image. The operator in its pod and the model gateways
//! run it.

use std::path::PathBuf;

use crate::{tools, Cluster, Error};

impl Cluster {
    /// Pushes the operator's image as `<registry>/model-orchestra-operator:<tag>` (replacing
    /// a tag pushed before); returns that reference.
    pub async fn push_operator_image(&self, tag: &str) -> Result<String, Error> {
        let failed = |message: String| Error::Start {
            component: "the operator image".into(),
            message,
            log: PathBuf::new(),
            tail: String::new(),
        };
        let registry = self.registry.as_deref().ok_or_else(|| failed("the cluster has no real node".into()))?;
        let binary = tools::static_program("model-orchestra-operator")?;
        let binary = std::fs::read(&binary).map_err(|e| Error::io(&binary, e))?;
        let image = mo_images::operator_image(&binary, None, None);
        let reference = format!("{registry}/model-orchestra-operator:{tag}");
        let options = mo_images::push::PushOptions {
            access: mo_images::registry::Access { insecure: true, ..Default::default() },
            force: true,
            quiet: true,
        };
        mo_images::push::push(&image, &reference, &options).await.map_err(|e| failed(format!("{reference}: {e}")))?;
        Ok(reference)
    }
}
