//! Errors that name the file, the field and the fix.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{}: {source}", file.display())]
    Io { file: PathBuf, source: std::io::Error },
    #[error("{}: {field}: {message} (fix: {fix})", file.display())]
    Field { file: PathBuf, field: String, message: String, fix: String },
    #[error("{}: the bundle is released and would change: {}; a released version never changes — bump --version (or delete the directory if it was never published)", dir.display(), files.join(", "))]
    WouldChange { dir: PathBuf, files: Vec<String> },
    #[error("{0}")]
    Invalid(String),
}

impl From<mo_images::layout::LayoutError> for ToolError {
    fn from(e: mo_images::layout::LayoutError) -> Self {
        ToolError::Io { file: e.path, source: e.source }
    }
}

impl ToolError {
    pub fn io(file: &Path, source: std::io::Error) -> Self {
        ToolError::Io { file: file.to_path_buf(), source }
    }
}
