//! The checked-in facts about the operator that only the catalog needs (display name,
//! description, maintainers, icon…): `config/manifests/metadata.yaml`.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use crate::error::ToolError;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorMetadata {
    pub package_name: String,
    pub display_name: String,
    pub description: String,
    #[serde(default)]
    pub keywords: Vec<String>,
    #[serde(default)]
    pub categories: Option<String>,
    #[serde(default)]
    pub maturity: Option<String>,
    pub min_kube_version: Option<String>,
    pub provider: Link,
    #[serde(default)]
    pub maintainers: Vec<Maintainer>,
    #[serde(default)]
    pub links: Vec<Link>,
    /// An SVG or PNG file, relative to the metadata file.
    pub icon: Option<PathBuf>,
    /// Filled in by [`load`]: the icon as (base64, media type).
    #[serde(skip)]
    pub icon_data: Option<(String, String)>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    pub name: String,
    pub url: String,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Maintainer {
    pub name: String,
    pub email: String,
}

pub fn load(path: &Path) -> Result<OperatorMetadata, ToolError> {
    let text = std::fs::read_to_string(path).map_err(|e| ToolError::io(path, e))?;
    let de = serde_yaml::Deserializer::from_str(&text);
    let mut meta: OperatorMetadata = serde_path_to_error::deserialize(de).map_err(|e| ToolError::Field {
        file: path.to_path_buf(),
        field: e.path().to_string(),
        message: e.inner().to_string(),
        fix: "see config/manifests/metadata.yaml in the repository for the expected shape".into(),
    })?;
    if let Some(icon) = &meta.icon {
        let file = path.parent().unwrap_or(Path::new(".")).join(icon);
        let bytes = std::fs::read(&file).map_err(|e| ToolError::io(&file, e))?;
        let media = match file.extension().and_then(|e| e.to_str()) {
            Some("svg") => "image/svg+xml",
            Some("png") => "image/png",
            _ => {
                return Err(ToolError::Field {
                    file: path.to_path_buf(),
                    field: "icon".into(),
                    message: format!("{} is neither .svg nor .png", file.display()),
                    fix: "point icon at an SVG or PNG file".into(),
                })
            }
        };
        meta.icon_data = Some((base64::engine::general_purpose::STANDARD.encode(bytes), media.into()));
    }
    Ok(meta)
}
