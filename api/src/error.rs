//! What is wrong with a ModelOrchestra a user wrote: each error names the field (a dotted
//! path into the CR) and says what is wrong, and how to fix it where that is not obvious.

use std::fmt;

/// One mistake in a ModelOrchestra.
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

/// Every mistake found in a ModelOrchestra, in the order they were found (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputErrors(Vec<InputError>);

impl InputErrors {
    /// `Err` with every error, or `Ok` when there is none.
    pub fn check(errors: Vec<InputError>) -> Result<(), InputErrors> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(InputErrors(errors))
        }
    }

    pub fn errors(&self) -> &[InputError] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<InputError> {
        self.0
    }

    /// The errors with `prefix` in front of each field path.
    pub fn prefixed(self, prefix: &str) -> InputErrors {
        InputErrors(self.0.into_iter().map(|e| e.prefixed(prefix)).collect())
    }
}

impl From<InputError> for InputErrors {
    fn from(e: InputError) -> Self {
        InputErrors(vec![e])
    }
}

/// One error as itself; several numbered, one per line, so each can be read and fixed.
impl fmt::Display for InputErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} errors:", many.len())?;
                for (i, e) in many.iter().enumerate() {
                    write!(f, "\n  {}. {e}", i + 1)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for InputErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_error_reads_as_itself_and_several_are_numbered_one_per_line() {
        let one = InputErrors::from(InputError::new("spec.a", "bad"));
        assert_eq!(one.to_string(), "spec.a: bad");
        let two = InputErrors::check(vec![InputError::new("spec.a", "bad"), InputError::new("spec.b", "worse")]);
        assert_eq!(two.unwrap_err().to_string(), "2 errors:\n  1. spec.a: bad\n  2. spec.b: worse");
    }

    #[test]
    fn no_error_is_ok() {
        assert_eq!(InputErrors::check(vec![]), Ok(()));
    }
}
