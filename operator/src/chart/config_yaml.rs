//! A small block-style YAML emitter for the readers' `config.yaml`.
//!
//! serde_yaml's emitter costs tens of microseconds of setup per document, which dominated
//! rendering a CR with many applications. This one writes a JSON value as block YAML with
//! every string double-quoted and escaped, so no value can change the document's structure
//! (the hostile-values property test parses its output back with a real YAML parser).

use std::fmt::Write;

use serde_json::Value;

/// The value as a YAML document (a trailing newline, like serde_yaml).
pub(super) fn to_yaml(value: &Value) -> String {
    let mut out = String::with_capacity(256);
    match value {
        Value::Object(m) if !m.is_empty() => write_map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        scalar => {
            write_scalar(&mut out, scalar);
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, level: usize) {
    for (k, v) in map {
        indent(out, level);
        write_key(out, k);
        out.push(':');
        write_child(out, v, level);
    }
}

fn write_seq(out: &mut String, items: &[Value], level: usize) {
    for v in items {
        indent(out, level);
        out.push('-');
        write_child(out, v, level);
    }
}

/// After `key:` or `-`: a nested block on the next lines, or ` scalar` on this one.
fn write_child(out: &mut String, v: &Value, level: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_map(out, m, level + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_seq(out, a, level + 2);
        }
        scalar => {
            out.push(' ');
            write_scalar(out, scalar);
            out.push('\n');
        }
    }
}

/// Keys made only of `[A-Za-z0-9_-]` (not starting with `-`) are written plain; any other
/// key is quoted like a string value.
fn write_key(out: &mut String, key: &str) {
    let plain = !key.is_empty()
        && !key.starts_with('-')
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !matches!(key, "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n")
        && key.parse::<f64>().is_err();
    if plain {
        out.push_str(key);
    } else {
        write_quoted(out, key);
    }
}

fn write_scalar(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_quoted(out, s),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
    }
}

/// Whether YAML lets `c` appear unescaped inside a double-quoted scalar without any parser
/// (YAML 1.1 or 1.2) reading it as a line break or rejecting it as non-printable.
fn is_safe_printable(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '"' | '\\')
}

fn write_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if is_safe_printable(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: Value) {
        let text = to_yaml(&v);
        let back: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, v, "{text}");
    }

    #[test]
    fn nested_maps_and_lists_round_trip() {
        round_trip(json!({"a": {"b": [1, "two", {"c": null}], "d": {}, "e": []}, "f": true, "g": 1.5}));
    }

    #[test]
    fn hostile_strings_and_keys_round_trip() {
        round_trip(json!({
            "k: v\n- x": "line\nbreak: {{x}} # not a comment",
            "true": "\u{85}\u{2028}\u{2029}\u{feff}\u{7f}\u{0}\"'\\",
            "123": "--- &a !!str *a",
            "null": "",
        }));
    }

    #[test]
    fn output_is_readable_block_yaml() {
        let text = to_yaml(
            &json!({"model-orchestra": {"readers_config": {"chat": {"model_name": "m", "max_batch_size": 8}}}}),
        );
        assert_eq!(
            text,
            "model-orchestra:\n  readers_config:\n    chat:\n      max_batch_size: 8\n      model_name: \"m\"\n"
        );
    }
}
