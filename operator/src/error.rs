//! Errors of the rendering pipeline. Input errors name the field (a dotted path into the
//! CR) and say what is wrong; chart errors name the chart file.

/// Something is wrong with the ModelOrchestra the user wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InputError {
    /// Dotted path, e.g. `spec.applications.hello-world.readerConfig.device`.
    pub field: String,
    pub message: String,
}

impl InputError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        InputError { field: field.into(), message: message.into() }
    }

    /// Puts `prefix` in front of the field path (`spec` + `gateway` → `spec.gateway`).
    pub fn prefixed(mut self, prefix: &str) -> Self {
        self.field = if self.field.is_empty() { prefix.to_string() } else { format!("{prefix}.{}", self.field) };
        self
    }
}

/// Why a render failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The CR is invalid; nothing may be applied or pruned. (Not a `source`: the message
    /// carries it, and error chains would print it twice.)
    #[error("invalid ModelOrchestra: {0}")]
    Input(InputError),
    /// The chart itself is broken (bad template, bad values.yaml, an object invalid for its
    /// kind). Only a chart developer can fix these.
    #[error("chart {file}: {message}")]
    Chart { file: String, message: String },
}

impl From<InputError> for RenderError {
    fn from(e: InputError) -> Self {
        RenderError::Input(e)
    }
}

impl RenderError {
    pub(crate) fn chart(file: impl Into<String>, message: impl std::fmt::Display) -> Self {
        RenderError::Chart { file: file.into(), message: message.to_string() }
    }
}
