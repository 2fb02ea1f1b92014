//! Catalogs: the semver template rendered to a File-Based Catalog as opm does
//! ([`template`], [`semver`], [`bundle`], [`source`]), validated like `opm validate`
//! ([`validate`]), and built into a catalog image ([`image`]).

pub mod bundle;
pub mod csvmeta;
pub mod fbc;
pub mod goenc;
pub mod image;
pub mod semver;
pub mod side_by_side;
pub mod source;
pub mod template;
pub mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use fbc::{Catalog, Origin, Package, PACKAGE};

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Template(#[from] crate::error::ToolError),
    #[error("{}: {error}", file.display())]
    Source { error: source::SourceError, file: std::path::PathBuf },
    #[error("{}: {error}", file.display())]
    Bundle { error: bundle::BundleError, file: std::path::PathBuf },
    #[error("{}: render: {error}", file.display())]
    Semver { error: semver::SemverError, file: std::path::PathBuf },
}

/// How each image was obtained, for the progress report.
pub type Provenance = Vec<(String, source::Origin)>;

/// The encodings opm writes a catalog in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Yaml,
    Json,
}

/// What `catalog render` reports after rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderSummary {
    pub bundles: usize,
    pub channels: usize,
    pub default_channel: String,
    /// Bundles read from bundle directories, from the digest cache, and pulled.
    pub local: usize,
    pub cached: usize,
    pub pulled: usize,
}

impl RenderSummary {
    pub fn of(catalog: &Catalog, provenance: &Provenance) -> Self {
        let count = |f: fn(&source::Origin) -> bool| provenance.iter().filter(|(_, o)| f(o)).count();
        RenderSummary {
            bundles: catalog.bundles.len(),
            channels: catalog.channels.len(),
            default_channel: catalog.packages.first().map(|(p, _)| p.default_channel.clone()).unwrap_or_default(),
            local: count(|o| matches!(o, source::Origin::Directory(_))),
            cached: count(|o| matches!(o, source::Origin::Registry { cached: true, .. })),
            pulled: count(|o| matches!(o, source::Origin::Registry { cached: false, .. })),
        }
    }
}

impl std::fmt::Display for RenderSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rendered {} bundle(s) into {} channel(s) ({} from bundle directories, {} from the cache, {} pulled); default channel {}",
            self.bundles, self.channels, self.local, self.cached, self.pulled, self.default_channel
        )
    }
}

/// The catalog in `format`, as opm writes it.
pub fn encode(catalog: &Catalog, format: Format) -> String {
    match format {
        Format::Yaml => catalog.to_yaml(),
        Format::Json => catalog.to_json(),
    }
}

/// Writes `text` to `path` (creating its directory), or to standard output when `None`.
pub fn write_output(path: Option<&Path>, text: &str) -> Result<(), crate::error::ToolError> {
    let Some(path) = path else {
        print!("{text}");
        return Ok(());
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| crate::error::ToolError::io(parent, e))?;
    }
    std::fs::write(path, text).map_err(|e| crate::error::ToolError::io(path, e))
}

/// Renders the semver template at `file` (text `text`) with bundle content from `sources`.
pub async fn render(
    text: &str,
    file: &Path,
    sources: &source::Sources,
    objects: bundle::Objects,
) -> Result<(Catalog, Provenance), RenderError> {
    let template = template::parse(text, file)?;
    let images = template.images();
    let contents =
        sources.load_all(&images).await.map_err(|error| RenderError::Source { error, file: file.to_path_buf() })?;
    let mut rendered = BTreeMap::new();
    let mut provenance = Vec::new();
    for (image, (content, origin)) in images.iter().zip(contents) {
        let r = bundle::render(&content, image, objects)
            .map_err(|error| RenderError::Bundle { error, file: file.to_path_buf() })?;
        rendered.insert(image.clone(), r);
        provenance.push((image.clone(), origin));
    }
    let facts = rendered.iter().map(|(i, r)| (i.clone(), r.facts.clone())).collect();
    let graph =
        semver::generate(&template, &facts).map_err(|error| RenderError::Semver { error, file: file.to_path_buf() })?;

    // Description and icon come from the CSV of the default channel's head.
    let head = graph
        .channels
        .iter()
        .find(|c| c.name == graph.default_channel)
        .and_then(|c| c.entries.last())
        .map(|e| e.name.clone());
    let head = head.and_then(|name| rendered.values().find(|r| r.bundle.name == name));
    let origin = Origin { file: file.to_path_buf(), document: 1 };
    let package = Package {
        schema: PACKAGE.into(),
        name: graph.package.clone(),
        default_channel: graph.default_channel.clone(),
        icon: head.and_then(|h| h.icon.clone()),
        description: head.map(|h| h.description.clone()).unwrap_or_default(),
    };
    let mut catalog = Catalog { packages: vec![(package, origin.clone())], ..Default::default() };
    catalog.channels = graph.channels.into_iter().map(|c| (c, origin.clone())).collect();
    // One olm.bundle per distinct image, as opm renders each image once.
    catalog.bundles = rendered.into_values().map(|r| (r.bundle, origin.clone())).collect();
    Ok((catalog, provenance))
}
