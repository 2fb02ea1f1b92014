//! What `bundle validate` finds: an error or a warning, naming the file and the field.

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub file: String,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = if self.severity == Severity::Error { "error" } else { "warning" };
        if self.field.is_empty() {
            write!(f, "{level}: {}: {}", self.file, self.message)
        } else {
            write!(f, "{level}: {}: {}: {}", self.file, self.field, self.message)
        }
    }
}

pub(super) struct Report(pub(super) Vec<Finding>);

impl Report {
    pub(super) fn error(&mut self, file: &str, field: &str, message: impl Into<String>) {
        self.0.push(Finding {
            severity: Severity::Error,
            file: file.into(),
            field: field.into(),
            message: message.into(),
        });
    }
    pub(super) fn warning(&mut self, file: &str, field: &str, message: impl Into<String>) {
        self.0.push(Finding {
            severity: Severity::Warning,
            file: file.into(),
            field: field.into(),
            message: message.into(),
        });
    }
}
