//! The path of a field of the ModelOrchestra, as an error names it:
//! `spec.gateway.ports[0].name`.

use std::fmt;

/// A field's path, built one step at a time. Users read these in errors and tests assert
/// them, so each step writes what the API server's messages do: `.name` for a field, `[i]`
/// for a list item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FieldPath(String);

impl FieldPath {
    /// The path as written, e.g. an `Origin`'s `spec.applications.chat.env`.
    pub(super) fn new(path: impl Into<String>) -> Self {
        FieldPath(path.into())
    }

    /// A field of this one: `a.name`.
    pub(super) fn field(&self, name: &str) -> Self {
        FieldPath(format!("{}.{name}", self.0))
    }

    /// An item of this list: `a[i]`.
    pub(super) fn index(&self, i: usize) -> Self {
        FieldPath(format!("{}[{i}]", self.0))
    }

    /// A key of this map: `a.key`, written as a field is even when the key has dots or a
    /// `/` (`resources.limits.nvidia.com/gpu`), as the errors always have.
    pub(super) fn key(&self, key: &str) -> Self {
        self.field(key)
    }

    pub(super) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an `InputError` takes as its field.
impl From<FieldPath> for String {
    fn from(path: FieldPath) -> Self {
        path.0
    }
}

impl From<&FieldPath> for String {
    fn from(path: &FieldPath) -> Self {
        path.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_path_is_the_string_it_was_given() {
        assert_eq!(FieldPath::new("spec.gateway").as_str(), "spec.gateway");
    }

    #[test]
    fn a_field_follows_its_parent_after_a_dot() {
        assert_eq!(FieldPath::new("spec.gateway").field("env").as_str(), "spec.gateway.env");
    }

    #[test]
    fn an_index_follows_its_field_without_a_dot() {
        assert_eq!(FieldPath::new("spec.gateway.env").index(3).as_str(), "spec.gateway.env[3]");
    }

    #[test]
    fn a_field_of_an_item_follows_its_index_after_a_dot() {
        assert_eq!(FieldPath::new("a.ports").index(0).field("name").as_str(), "a.ports[0].name");
    }

    #[test]
    fn a_key_is_written_as_a_field_even_with_dots_and_slashes() {
        let limits = FieldPath::new("a.resources").field("limits");
        assert_eq!(limits.key("nvidia.com/gpu").as_str(), "a.resources.limits.nvidia.com/gpu");
    }

    #[test]
    fn a_step_leaves_the_path_it_started_from_unchanged() {
        let env = FieldPath::new("a.env");
        let _ = env.index(1);
        assert_eq!(env.as_str(), "a.env");
    }

    #[test]
    fn display_writes_the_path() {
        assert_eq!(FieldPath::new("a").field("b").index(2).to_string(), "a.b[2]");
    }

    #[test]
    fn a_path_converts_into_the_string_an_input_error_takes() {
        let path = FieldPath::new("a").field("b");
        assert_eq!(String::from(&path), "a.b");
        assert_eq!(String::from(path), "a.b");
    }
}
