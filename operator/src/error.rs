//! Why a render failed: the CR's mistakes (each naming its field), or a broken chart
//! (naming the chart file).

pub use model_orchestra_api::{InputError, InputErrors};

/// Why a render failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The CR is invalid; nothing may be applied or pruned. (Not a `source`: the message
    /// carries it, and error chains would print it twice.)
    #[error("invalid ModelOrchestra: {0}")]
    Input(InputErrors),
    /// The chart itself is broken (bad template, bad values.yaml, an object invalid for its
    /// kind). Only a chart developer can fix these.
    #[error("chart {file}: {message}")]
    Chart { file: String, message: String },
}

impl From<InputError> for RenderError {
    fn from(e: InputError) -> Self {
        RenderError::Input(e.into())
    }
}

impl From<InputErrors> for RenderError {
    fn from(e: InputErrors) -> Self {
        RenderError::Input(e)
    }
}

impl RenderError {
    pub(crate) fn chart(file: impl Into<String>, message: impl std::fmt::Display) -> Self {
        RenderError::Chart { file: file.into(), message: message.to_string() }
    }
}
