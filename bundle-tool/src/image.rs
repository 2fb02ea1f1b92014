//! Images: the project's image code ([`mo_images`]: layers, configs, manifests, push,
//! pull), and the bundle image, which is OLM's.

pub use mo_images::*;

/// The bundle image: FROM scratch, one layer with `/manifests` and `/metadata`, the
/// annotations as labels.
pub fn bundle_image(bundle_dir: &std::path::Path) -> Result<Image, crate::error::ToolError> {
    let tree = crate::bundle::generate::read_tree(bundle_dir)?;
    let files: Vec<File> = tree
        .iter()
        .filter(|(p, _)| p.starts_with("manifests/") || p.starts_with("metadata/"))
        .map(|(p, content)| File { path: p.clone(), mode: 0o644, data: content.as_bytes().to_vec() })
        .collect();
    let labels = crate::bundle::annotations::parse(
        tree.get("metadata/annotations.yaml").map(String::as_str).unwrap_or_default(),
    )
    .map_err(|e| crate::error::ToolError::Field {
        file: bundle_dir.join("metadata/annotations.yaml"),
        field: "annotations".into(),
        message: e.to_string(),
        fix: "run `bundle-tool bundle validate`".into(),
    })?;
    Ok(build(&ImageConfig { labels, ..Default::default() }, &[files]))
}
