//! JSON as Go's encoding/json writes it: `json.Marshal` (compact) and a `json.Encoder`
//! with `SetIndent("", unit)`; escaping as its documentation describes.

use super::Node;

/// Where a value goes: compact, or indented by `unit` per level of nesting.
pub(super) struct Json<'a> {
    pub out: String,
    pub unit: Option<&'a str>,
}

impl Json<'_> {
    pub fn value(&mut self, node: &Node, escape_html: bool, depth: usize) {
        match node {
            Node::Null => self.out.push_str("null"),
            Node::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Node::Number(n) => self.out.push_str(n),
            Node::String(s) => string(s, escape_html, &mut self.out),
            // A RawMessage is re-indented, but its escapes are those json.Marshal wrote.
            Node::Raw(inner) => self.value(inner, true, depth),
            Node::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    self.separator(i, depth + 1);
                    self.value(item, escape_html, depth + 1);
                }
                self.close(items.is_empty(), depth, ']');
            }
            Node::Object(fields) => {
                self.out.push('{');
                for (i, (key, value)) in fields.iter().enumerate() {
                    self.separator(i, depth + 1);
                    string(key, escape_html, &mut self.out);
                    self.out.push_str(if self.unit.is_some() { ": " } else { ":" });
                    self.value(value, escape_html, depth + 1);
                }
                self.close(fields.is_empty(), depth, '}');
            }
        }
    }

    /// Before the `i`th member: a comma after the first, and its own line when indenting.
    fn separator(&mut self, i: usize, depth: usize) {
        if i > 0 {
            self.out.push(',');
        }
        self.new_line(depth);
    }

    /// An empty array or object stays `[]`/`{}` on one line.
    fn close(&mut self, empty: bool, depth: usize, bracket: char) {
        if !empty {
            self.new_line(depth);
        }
        self.out.push(bracket);
    }

    fn new_line(&mut self, depth: usize) {
        if let Some(unit) = self.unit {
            self.out.push('\n');
            self.out.push_str(&unit.repeat(depth));
        }
    }
}

/// A JSON string: `"` and `\` escaped, the control characters as `\b \f \n \r \t` or
/// `\u00XX`, U+2028 and U+2029 always as `\u2028`/`\u2029`, and `<`, `>`, `&` as
/// `\u003c`, `\u003e`, `\u0026` when `escape_html` (Go's default).
pub(super) fn string(s: &str, escape_html: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        let unicode = c < ' ' || matches!(c, '\u{2028}' | '\u{2029}') || (escape_html && matches!(c, '<' | '>' | '&'));
        match short {
            Some(escape) => out.push_str(escape),
            None if unicode => out.push_str(&format!("\\u{:04x}", c as u32)),
            None => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::super::Node;
    use serde_json::json;

    fn compact(v: serde_json::Value, escape_html: bool) -> String {
        Node::from_value(&v).compact(escape_html)
    }

    #[test]
    fn quotes_backslashes_and_named_controls_get_short_escapes() {
        assert_eq!(compact(json!("\"\\\u{8}\u{c}\n\r\t"), false), r#""\"\\\b\f\n\r\t""#);
    }

    #[test]
    fn other_controls_and_line_separators_are_escaped_as_lowercase_hex() {
        assert_eq!(
            compact(json!("\u{1}\u{1f}\u{2028}\u{2029}\u{7f}é"), false),
            "\"\\u0001\\u001f\\u2028\\u2029\u{7f}é\""
        );
    }

    #[test]
    fn html_characters_are_escaped_only_when_asked() {
        assert_eq!(compact(json!("<a&b>"), true), r#""\u003ca\u0026b\u003e""#);
        assert_eq!(compact(json!("<a&b>"), false), r#""<a&b>""#);
    }

    #[test]
    fn compact_output_has_no_spaces_and_objects_keep_their_order() {
        let node =
            Node::object(vec![("b", Node::Number("1".into())), ("a", Node::Array(vec![Node::Null, Node::Bool(true)]))]);
        assert_eq!(node.compact(true), r#"{"b":1,"a":[null,true]}"#);
    }

    #[test]
    fn indented_output_puts_members_on_their_own_lines_and_keeps_empty_ones_short() {
        assert_eq!(
            Node::from_value(&json!({"a": [], "b": {}, "c": [1, {"d": "<"}]})).indented("  "),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": \"<\"\n    }\n  ]\n}"
        );
    }

    #[test]
    fn raw_messages_keep_html_escapes_inside_unescaped_output() {
        let node =
            Node::object(vec![("a", Node::String("<".into())), ("b", Node::Raw(Box::new(Node::String("<".into()))))]);
        assert_eq!(node.indented(""), "{\n\"a\": \"<\",\n\"b\": \"\\u003c\"\n}");
    }
}
