//! The bytes opm writes: Go's `encoding/json` (compact for blobs, indented for `-o json`)
//! and, for `-o yaml`, the YAML that `sigs.k8s.io/yaml` makes of that JSON with
//! `go.yaml.in/yaml/v2` v2.4.3 (opm v1.73.0): keys in that library's order, each string in
//! the plainest YAML style that reads back as the same string, long lines folded at 80
//! columns. Written from the YAML 1.1 and 1.2 specifications, Go's documented formatting
//! and opm's observed output; tests/oracles/opm_writer.rs, opm_render_template.rs and
//! opm_render_bundle.rs compare it with opm itself, byte for byte.

mod json;
mod key_order;
mod number;
mod resolve;
mod scalar;
mod yaml;

pub use number::{format_float, go_number};

use serde_json::Value;
use yaml::Yaml;

/// A JSON value as Go writes it: objects keep their field order (struct order, or
/// sorted keys for maps), numbers keep Go's spelling.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    /// The number as Go's encoding/json spells it.
    Number(String),
    String(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
    /// A `json.RawMessage` that Go copied from `json.Marshal` output: its strings keep
    /// the HTML escaping (`\u003c`) even where the surrounding writer does not escape.
    Raw(Box<Node>),
}

impl Node {
    /// A decoded JSON value (Go map: keys sorted bytewise; numbers as Go re-encodes a
    /// float64 or int64).
    pub fn from_value(value: &Value) -> Node {
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(go_number(n)),
            Value::String(s) => Node::String(s.clone()),
            Value::Array(a) => Node::Array(a.iter().map(Node::from_value).collect()),
            // serde_json's map is sorted by key (bytewise), as Go sorts map keys.
            Value::Object(m) => Node::Object(m.iter().map(|(k, v)| (k.clone(), Node::from_value(v))).collect()),
        }
    }

    pub fn object(fields: Vec<(&str, Node)>) -> Node {
        Node::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// Go's `json.Marshal` (compact); `escape_html` as `SetEscapeHTML`.
    pub fn compact(&self, escape_html: bool) -> String {
        let mut json = json::Json { out: String::new(), unit: None };
        json.value(self, escape_html, 0);
        json.out
    }

    /// A `json.Encoder` with `SetIndent("", indent)` and `SetEscapeHTML(false)`, without
    /// the newline the encoder appends.
    pub fn indented(&self, indent: &str) -> String {
        let mut json = json::Json { out: String::new(), unit: Some(indent) };
        json.value(self, false, 0);
        json.out
    }

    /// `yaml.JSONToYAML(json.Marshal(node))`.
    pub fn to_yaml(&self) -> String {
        yaml::document(&self.as_yaml())
    }

    /// What yaml.v2 reads the JSON as: strings, typed scalars, sequences, and mappings
    /// (whose keys it writes in its own order).
    fn as_yaml(&self) -> Yaml<'_> {
        match self {
            Node::Null => Yaml::Bare("null".into()),
            Node::Bool(b) => Yaml::Bare(b.to_string()),
            Node::Number(n) => Yaml::Bare(yaml::number(n)),
            Node::String(s) => Yaml::Str(s),
            Node::Array(items) => Yaml::Seq(items.iter().map(Node::as_yaml).collect()),
            // Go's encoder never writes a key twice, so there is no duplicate to resolve.
            Node::Object(fields) => Yaml::map(fields.iter().map(|(k, v)| (k.as_str(), v.as_yaml())).collect()),
            Node::Raw(inner) => inner.as_yaml(),
        }
    }
}

/// Whole documents; the expected YAML is what the Go library printed for the same JSON
/// (the full comparison with opm runs in tests/oracles/opm_writer.rs).
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(v: Value) -> String {
        Node::from_value(&v).to_yaml()
    }

    #[test]
    fn mappings_nest_by_two_spaces_and_sequences_in_them_are_not_indented() {
        assert_eq!(yaml(json!({"a": {"b": 1, "c": [true, null]}})), "a:\n  b: 1\n  c:\n  - true\n  - null\n");
    }

    #[test]
    fn a_collection_in_a_sequence_starts_on_the_item_line() {
        assert_eq!(yaml(json!({"l": [{"a": 1, "b": 2}, [1, [2]]]})), "l:\n- a: 1\n  b: 2\n- - 1\n  - - 2\n");
    }

    #[test]
    fn empty_collections_are_written_in_flow_style() {
        assert_eq!(yaml(json!({"a": [], "b": {}, "c": [[], {}]})), "a: []\nb: {}\nc:\n- []\n- {}\n");
        assert_eq!(yaml(json!({})), "{}\n");
    }

    #[test]
    fn keys_are_written_in_yaml_v2_order_not_json_order() {
        assert_eq!(yaml(json!({"a10": 1, "a9": 2, "a_b": 3, "aB": 4})), "a_b: 3\na9: 2\na10: 1\naB: 4\n");
    }

    #[test]
    fn keys_are_quoted_like_values() {
        assert_eq!(yaml(json!({"n": 1, "a: b": 2})), "'a: b': 2\n\"n\": 1\n");
    }

    #[test]
    fn a_long_key_is_written_after_a_question_mark() {
        let key = "k".repeat(129);
        assert_eq!(yaml(json!({ key.clone(): {"a": 1, "b": [2]} })), format!("? {key}\n: a: 1\n  b:\n  - 2\n"));
    }

    #[test]
    fn a_multi_line_key_is_a_literal_block_after_a_question_mark() {
        assert_eq!(yaml(json!({"a\nb": [1, 2]})), "? |-\n  a\n  b\n: - 1\n  - 2\n");
    }

    #[test]
    fn numbers_are_written_as_go_formats_an_int_or_a_float64() {
        assert_eq!(
            yaml(json!([0, -0.0, 1.5, 1e20, 1e21, 0.00001, 123456.5, 1234567.5])),
            "- 0\n- 0\n- 1.5\n- 1e+20\n- 1e+21\n- 1e-05\n- 123456.5\n- 1.2345675e+06\n"
        );
    }

    #[test]
    fn a_float_read_from_json_text_is_written_back_with_the_same_digits() {
        // serde_json's default parser reads these one unit in the last place off.
        let v: Value = serde_json::from_str("[1.6022e-21, -4e-25, 7.543018363566422e+127]").unwrap();
        assert_eq!(Node::from_value(&v).compact(false), "[1.6022e-21,-4e-25,7.543018363566422e+127]");
    }

    #[test]
    fn a_plain_string_folds_at_the_first_single_space_past_80_columns() {
        // The double space at column 79 is no place to fold; the line ends at column 85.
        let value = format!("{}  {}", "x".repeat(76), "word ".repeat(20).trim_end());
        let out = yaml(json!({ "k": value }));
        assert_eq!(
            out,
            format!("k: {}  word\n  {}\n  word word word\n", "x".repeat(76), "word ".repeat(16).trim_end())
        );
    }

    #[test]
    fn a_double_quoted_string_escapes_a_space_that_starts_a_continuation_line() {
        let out = yaml(json!({ "k": format!("{}  y\t", "x".repeat(78)) }));
        assert_eq!(out, format!("k: \"{}\n  \\ y\\t\"\n", "x".repeat(78)));
    }

    #[test]
    fn a_single_quoted_string_doubles_its_quotes_and_folds_like_plain() {
        let value = format!("'{}", "ab ".repeat(30).trim_end());
        let out = yaml(json!({ "k": value }));
        assert!(out.starts_with("k: '''ab ab"), "{out}");
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(out.lines().nth(1).unwrap().starts_with("  ab"), "{out}");
    }

    #[test]
    fn a_literal_block_keeps_or_strips_the_final_line_breaks() {
        assert_eq!(
            yaml(json!({"a": "x\ny", "b": "x\n", "c": "x\n\n", "d": "\n"})),
            "a: |-\n  x\n  y\nb: |\n  x\nc: |+\n  x\n\nd: |2+\n\n"
        );
    }

    #[test]
    fn a_literal_block_starting_with_a_space_or_break_gives_its_indentation() {
        assert_eq!(yaml(json!({"a": " x\ny", "b": "\nx"})), "a: |2-\n   x\n  y\nb: |2-\n\n  x\n");
    }

    #[test]
    fn a_literal_in_a_sequence_is_indented_past_the_dash() {
        assert_eq!(yaml(json!({"l": ["a\nb"]})), "l:\n- |-\n  a\n  b\n");
    }
}
