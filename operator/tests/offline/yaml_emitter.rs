//! The YAML stream (`to_yaml_stream`, written by `chart/yaml.rs`) is byte for byte what
//! serde_yaml 0.9 writes for each object — serde_yaml is the oracle — and reads back as the
//! same objects. The fixed cases spell out the rules the emitter implements (each is also
//! checked against serde_yaml); the property tests compare the two on generated values whose
//! strings are biased to the hard cases: 10,000 generated values each by default
//! (`PROPTEST_CASES` overrides).

use crate::common::*;
use model_orchestra::chart::{to_yaml_stream, Component, RenderedObject};
use model_orchestra_api::kinds::Kind;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn object(value: &Value) -> RenderedObject {
    RenderedObject { kind: Kind::ConfigMap, name: "x".into(), component: Component::Release, object: value.clone() }
}

/// serde_yaml's stream for `values`: each document after a `---` line.
fn oracle_stream(values: &[Value]) -> String {
    values.iter().map(|v| format!("---\n{}", serde_yaml::to_string(v).unwrap())).collect()
}

/// The emitter's document for `value` (its one-object stream without the `---` line),
/// checked against serde_yaml and read back.
fn emitted(value: &Value) -> String {
    let stream = to_yaml_stream(&[object(value)]);
    assert_eq!(stream, oracle_stream(std::slice::from_ref(value)), "differs from serde_yaml for {value}");
    let back: Value = serde_yaml::from_str(&stream[4..]).unwrap_or_else(|e| panic!("{stream:?} does not parse: {e}"));
    assert_eq!(back, *value, "{stream:?} reads back as another value");
    stream[4..].to_string()
}

/// Each value is written as the expected document.
fn check(cases: &[(Value, &str)]) {
    for (value, expected) in cases {
        assert_eq!(emitted(value), *expected, "for {value}");
    }
}

/// Each string, as a value, is written as the expected scalar.
fn check_strings(cases: &[(&str, &str)]) {
    for (s, expected) in cases {
        assert_eq!(emitted(&json!(s)), format!("{expected}\n"), "for {s:?}");
    }
}

#[test]
fn collections_are_block_style_with_sequences_in_maps_not_indented() {
    check(&[
        (json!({"a": 1, "b": {"c": 2, "d": {"e": 3}}}), "a: 1\nb:\n  c: 2\n  d:\n    e: 3\n"),
        (json!({"a": [1, 2], "b": {"c": [3]}}), "a:\n- 1\n- 2\nb:\n  c:\n  - 3\n"),
        (json!([[1, [2, 3]], {"a": {"b": 1}, "c": [4]}]), "- - 1\n  - - 2\n    - 3\n- a:\n    b: 1\n  c:\n  - 4\n"),
        (json!({"k": [{"a": 1, "b": [{"c": [[1, 2]]}]}]}), "k:\n- a: 1\n  b:\n  - c:\n    - - 1\n      - 2\n"),
        (json!({"a": [], "b": {}, "c": [[], {}]}), "a: []\nb: {}\nc:\n- []\n- {}\n"),
        (json!([]), "[]\n"),
        (json!({}), "{}\n"),
        // Keys in the map's (sorted) order.
        (json!({"b": 1, "a": 2, "B": 3}), "B: 3\na: 2\nb: 1\n"),
    ]);
}

#[test]
fn top_level_scalars_are_one_line() {
    check(&[(json!(null), "null\n"), (json!(true), "true\n"), (json!(false), "false\n"), (json!("text"), "text\n")]);
}

#[test]
fn numbers_are_written_as_serde_yaml_spells_them() {
    check(&[
        (json!(0), "0\n"),
        (json!(-1), "-1\n"),
        (json!(u64::MAX), "18446744073709551615\n"),
        (json!(i64::MIN), "-9223372036854775808\n"),
        (json!(1.0), "1.0\n"),
        (json!(-0.0), "-0.0\n"),
        (json!(0.1), "0.1\n"),
        (json!(1.5e-5), "0.000015\n"),
        (json!(9.9999e-6), "9.9999e-6\n"),
        (json!(1e15), "1000000000000000.0\n"),
        (json!(9.999999999999998e15), "9999999999999998.0\n"),
        (json!(1e16), "1e16\n"),
        (json!(-1.5e16), "-1.5e16\n"),
        (json!(1.7976931348623157e308), "1.7976931348623157e308\n"),
        (json!(5e-324), "5e-324\n"),
        // Where two 17-digit spellings read back as the same float, the closer one.
        (json!(1553427864933928.2), "1553427864933928.2\n"),
        (json!(-135073863227137.62), "-135073863227137.62\n"),
    ]);
}

#[test]
fn plain_unless_an_indicator_or_a_space_would_be_misread() {
    check_strings(&[
        ("a b", "a b"),
        ("a:b", "a:b"),
        (":a", ":a"),
        ("a#b", "a#b"),
        ("-a", "-a"),
        ("?a", "?a"),
        ("--", "--"),
        ("a, b", "a, b"),
        ("a[b]{c}", "a[b]{c}"),
        ("a'b\"c", "a'b\"c"),
        ("a&*!|>%@`", "a&*!|>%@`"),
        ("é日本😀\u{a0}\u{200b}\u{10ffff}", "é日本😀\u{a0}\u{200b}\u{10ffff}"),
        ("", "''"),
        (" a", "' a'"),
        ("a ", "'a '"),
        ("a: b", "'a: b'"),
        ("a:", "'a:'"),
        (":", "':'"),
        ("a #b", "'a #b'"),
        ("#a", "'#a'"),
        ("-", "'-'"),
        ("- a", "'- a'"),
        ("? a", "'? a'"),
        ("---", "'---'"),
        ("---a", "'---a'"),
        ("...", "'...'"),
        (",a", "',a'"),
        ("[a", "'[a'"),
        ("]", "']'"),
        ("{a", "'{a'"),
        ("}", "'}'"),
        ("&a", "'&a'"),
        ("*a", "'*a'"),
        ("!a", "'!a'"),
        ("|", "'|'"),
        (">", "'>'"),
        ("'a", "'''a'"),
        ("'", "''''"),
        ("\"a", "'\"a'"),
        ("%a", "'%a'"),
        ("@a", "'@a'"),
        ("`a", "'`a'"),
    ]);
}

#[test]
fn strings_that_would_read_as_another_type_are_single_quoted() {
    check_strings(&[
        ("null", "'null'"),
        ("Null", "'Null'"),
        ("NULL", "'NULL'"),
        ("~", "'~'"),
        ("true", "'true'"),
        ("True", "'True'"),
        ("FALSE", "'FALSE'"),
        ("1", "'1'"),
        ("-1", "'-1'"),
        ("+1", "'+1'"),
        ("007", "'007'"),
        ("0x1A", "'0x1A'"),
        ("-0o17", "'-0o17'"),
        ("0b101", "'0b101'"),
        ("99999999999999999999", "'99999999999999999999'"),
        ("1.5", "'1.5'"),
        ("1.", "'1.'"),
        (".5", "'.5'"),
        ("1e3", "'1e3'"),
        ("-1E-3", "'-1E-3'"),
        ("1e-400", "'1e-400'"),
        (".inf", "'.inf'"),
        ("-.Inf", "'-.Inf'"),
        (".NaN", "'.NaN'"),
    ]);
    // serde_yaml reads these as strings, so they stay plain: YAML 1.1's booleans, other
    // spellings, infinite floats, underscores, dates and times.
    check_strings(&[
        ("yes", "yes"),
        ("No", "No"),
        ("on", "on"),
        ("OFF", "OFF"),
        ("y", "y"),
        ("n", "n"),
        ("tRue", "tRue"),
        ("nULL", "nULL"),
        ("+", "+"),
        ("inf", "inf"),
        ("nan", "nan"),
        ("+.nan", "+.nan"),
        ("1e400", "1e400"),
        ("0X1", "0X1"),
        ("0x", "0x"),
        ("0o8", "0o8"),
        ("1_000", "1_000"),
        ("1e", "1e"),
        ("2001-12-14", "2001-12-14"),
        ("12:30", "12:30"),
    ]);
    let u128_max_hex = format!("0x{}", "f".repeat(32));
    let too_big_hex = format!("0x{}", "f".repeat(33));
    assert_eq!(emitted(&json!(u128_max_hex)), format!("'{u128_max_hex}'\n"));
    assert_eq!(emitted(&json!(too_big_hex)), format!("{too_big_hex}\n"));
}

#[test]
fn characters_that_must_be_escaped_make_a_double_quoted_string() {
    check_strings(&[
        ("a\tb", r#""a\tb""#),
        ("\r", r#""\r""#),
        ("\0\u{7}\u{8}\u{b}\u{c}\u{1b}", r#""\0\a\b\v\f\e""#),
        ("\u{1}\u{1f}\u{7f}\u{80}\u{9f}", r#""\x01\x1F\x7F\x80\x9F""#),
        ("a\u{85}b", r#""a\Nb""#),
        ("\u{feff}a", r#""\uFEFFa""#),
        ("\u{fffe}\u{ffff}\u{fffd}", "\"\\uFFFE\\uFFFF\u{fffd}\""),
        // Once double-quoted, `"` and `\` are escaped too, and the rest is as is.
        ("a\"b\\c\té\u{a0}", "\"a\\\"b\\\\c\\té\u{a0}\""),
        // Spaces next to a line break cannot be single-quoted.
        (" \u{2028}", r#"" \L""#),
        ("a\u{2029} b", r#""a\P b""#),
    ]);
}

#[test]
fn multi_line_strings_are_literal_block_scalars() {
    check(&[
        (json!("a\nb"), "|-\n  a\n  b\n"),
        (json!("a\nb\n"), "|\n  a\n  b\n"),
        (json!("a\nb\n\n"), "|+\n  a\n  b\n\n"),
        (json!("\n"), "|2+\n\n"),
        (json!("\na"), "|2-\n\n  a\n"),
        (json!(" a\nb"), "|2-\n   a\n  b\n"),
        (json!("a\n b"), "|-\n  a\n   b\n"),
        (json!("a\n\n\nb"), "|-\n  a\n\n\n  b\n"),
        (json!("true\n- a\n#b\n---\n..."), "|-\n  true\n  - a\n  #b\n  ---\n  ...\n"),
        (json!({"k": "a\nb", "l": ["a\nb", ["c\nd"]]}), "k: |-\n  a\n  b\nl:\n- |-\n  a\n  b\n- - |-\n    c\n    d\n"),
        (json!([{"m": {"n": " x\n"}}]), "- m:\n    n: |2\n       x\n"),
        // Unless a space ends a line or the text, or a character must be escaped.
        (json!("a \nb"), "\"a \\nb\"\n"),
        (json!("a\nb "), "\"a\\nb \"\n"),
        (json!("a\r\nb"), "\"a\\r\\nb\"\n"),
        (json!("a\n\tb"), "\"a\\n\\tb\"\n"),
    ]);
}

#[test]
fn long_or_multi_line_keys_are_complex_keys() {
    let key_128 = "k".repeat(128);
    let key_129 = "k".repeat(129);
    let multibyte_129 = format!("{}k", "é".repeat(64));
    check(&[
        (json!({&key_128: 1}), &format!("{key_128}: 1\n")),
        (json!({&key_129: 1}), &format!("? {key_129}\n: 1\n")),
        (json!({&multibyte_129: 1}), &format!("? {multibyte_129}\n: 1\n")),
        (json!({"a\nb": {"c": [1]}}), "? |-\n  a\n  b\n: c:\n  - 1\n"),
        (json!({"a\nb": [1, [2]], "c\rd": []}), "? |-\n  a\n  b\n: - 1\n  - - 2\n? \"c\\rd\"\n: []\n"),
        (json!([{"\u{85}": {"a\u{2028}b": "c"}}]), "- ? \"\\N\"\n  : ? 'a\u{2028}      b'\n    : c\n"),
        // Quoted simple keys.
        (json!({"": 1, "true": 2, "a\tb": 3, "- a": {"b": 4}}), "'': 1\n'- a':\n  b: 4\n\"a\\tb\": 3\n'true': 2\n"),
    ]);
    // The 128 bytes are the key's own, not its quoted spelling.
    let escaped = "\u{feff}".repeat(42);
    assert!(!emitted(&json!({&escaped: 1})).starts_with('?'));
}

#[test]
fn long_lines_are_never_folded() {
    let words = "word ".repeat(1000) + "end";
    for (s, lines) in
        [(words.clone(), 1), (format!("'{words}"), 1), (format!("\t{words}"), 1), (format!("{words}\n{words}"), 3)]
    {
        let text = emitted(&json!({ "key": s }));
        assert_eq!(text.lines().count(), lines, "{text}");
    }
}

#[test]
fn line_and_paragraph_separators_break_lines_in_single_quoted_and_literal_scalars() {
    check(&[
        (json!("a\u{2028}b"), "'a\u{2028}  b'\n"),
        (json!("\u{2029}"), "'\u{2029}  '\n"),
        (json!({"k": {"l": ["a\u{2028}\u{2028}b"]}}), "k:\n  l:\n  - 'a\u{2028}\u{2028}    b'\n"),
        (json!("a\u{2028}b\n"), "|\n  a\u{2028}  b\n"),
        // A literal that ends with one has ended its last line.
        (json!({"k": "a\n\u{2028}", "z": 1}), "k: |+\n  a\n\u{2028}z: 1\n"),
        (json!(["a\n\u{2029}"]), "- |+\n  a\n\u{2029}"),
    ]);
}

#[test]
fn the_stream_of_a_real_render_is_serde_yamls() {
    for cr in [sample(), data("maximal.yaml")] {
        let objects = render(&cr);
        let values: Vec<Value> = objects.iter().map(|o| o.object.clone()).collect();
        assert_eq!(to_yaml_stream(&objects), oracle_stream(&values));
    }
}

/// Pieces of strings: indicators, spaces and line breaks, quotes, escapes, non-ASCII,
/// and words that read as other types.
const PIECES: &[&str] = &[
    "a",
    "b",
    "x",
    "0",
    "1",
    "9",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "\r",
    ":",
    ": ",
    "#",
    " #",
    "-",
    "- ",
    "?",
    "? ",
    ".",
    ",",
    "[",
    "]",
    "{",
    "}",
    "&",
    "*",
    "!",
    "|",
    ">",
    "'",
    "\"",
    "%",
    "@",
    "`",
    "~",
    "\\",
    "=",
    "<<",
    "+",
    "e",
    "_",
    "é",
    "日",
    "😀",
    "\u{10ffff}",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "\u{fffe}",
    "\u{1}",
    "\u{7f}",
    "\u{9f}",
    "---",
    "...",
    "true",
    "False",
    "NULL",
    "null",
    "~",
    "yes",
    "on",
    "y",
    ".inf",
    "-.Inf",
    ".nan",
    "0x1A",
    "0o17",
    "0b1",
    "1.5",
    "1e3",
    "007",
    "1_0",
];

/// Characters of 1 to 4 bytes, repeated up to around the 128 bytes of a simple key.
const KEY_UNITS: &[&str] = &["k", "é", "日", "😀", "\u{feff}", "'", " "];

/// Pieces of number-like strings.
const NUMERIC: &[&str] = &[
    "0", "1", "7", "9", "x", "o", "b", "e", "E", "+", "-", ".", "_", "a", "f", "F", "inf", "nan", "Inf", "NaN", "INF",
    " ",
];

fn text() -> impl Strategy<Value = String> {
    let pieces = |from: &'static [&'static str], n: std::ops::Range<usize>| {
        prop::collection::vec(prop::sample::select(from), n).prop_map(|p| p.concat())
    };
    prop_oneof![
        6 => pieces(PIECES, 0..6),
        2 => pieces(NUMERIC, 1..6),
        1 => any::<String>(),
        // Around the 128 bytes of a simple key.
        1 => (prop::sample::select(KEY_UNITS), 110..140usize).prop_map(|(p, n)| p.repeat(n / p.len())),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    let float = prop_oneof![
        prop::num::f64::POSITIVE
            | prop::num::f64::NEGATIVE
            | prop::num::f64::NORMAL
            | prop::num::f64::SUBNORMAL
            | prop::num::f64::ZERO,
        // Decimal fractions around the switch between positional and exponent form.
        (any::<i32>(), -25..25i32).prop_map(|(m, e)| f64::from(m) * 10f64.powi(e)),
    ];
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        float.prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![1 => Just(Value::Null), 1 => any::<bool>().prop_map(Value::Bool), 2 => number(), 8 => text().prop_map(Value::String)];
    scalar.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_value_is_written_as_serde_yaml_writes_it_and_reads_back(value in value()) {
        let stream = to_yaml_stream(&[object(&value)]);
        prop_assert_eq!(&stream, &oracle_stream(std::slice::from_ref(&value)));
        let back: Value = serde_yaml::from_str(&stream).map_err(|e| TestCaseError::fail(format!("{stream:?}: {e}")))?;
        prop_assert_eq!(back, value);
    }

    #[test]
    fn a_stream_is_each_object_after_a_document_marker(values in prop::collection::vec(value(), 1..4)) {
        let objects: Vec<RenderedObject> = values.iter().map(object).collect();
        let stream = to_yaml_stream(&objects);
        prop_assert_eq!(&stream, &oracle_stream(&values));
        let back: Vec<Value> = serde_yaml::Deserializer::from_str(&stream).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
        prop_assert_eq!(back, values);
    }
}
