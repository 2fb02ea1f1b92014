//! A YAML emitter for [`serde_json::Value`] that writes exactly the bytes serde_yaml 0.9
//! writes (`serde_yaml::to_string`), several times faster: one pass over the value straight
//! into one `String` — no event stream, no per-call setup.
//!
//! The rules were derived from the YAML 1.2 grammar and pinned down by observing
//! serde_yaml's output: `tests/offline/yaml_emitter.rs` compares the two, byte for byte, on
//! thousands of generated values and on the cases below.
//!
//! # Layout
//!
//! - Block style, two-space indentation, no `---`; the document ends with a line break.
//!   Entries come in the map's order (serde_json's map is sorted by key).
//! - Mapping entries are `key: value`. A non-empty mapping as a value starts on the next
//!   line, indented by two; a non-empty sequence as a value starts on the next line at the
//!   *same* indentation (`key:\n- item`).
//! - Sequence entries are `- item`; a non-empty collection as an item starts on the same line
//!   (`- - 1`, `- key: v`), its entries indented by two.
//! - Empty collections are `[]` and `{}`, wherever they are.
//! - A key is a simple key when it has at most 128 bytes and no line break (`\n`, `\r`,
//!   U+0085, U+2028, U+2029). Otherwise it is a complex key: `? key`, then `: value` on the
//!   next line, where a non-empty collection value starts on the `: ` line (`: - 1`,
//!   `: a: 1`) with its entries indented by two.
//!
//! # Scalars
//!
//! - `null`, `true`, `false`; integers in decimal; floats in the shortest digits that read
//!   back as the same `f64`, positional when the decimal exponent is in -5..=15 (`0.00001`,
//!   `1000000000000000.0`: always with a fraction), else in exponent form (`1e-6`, `1.5e16`).
//! - A string with a `\n` is a literal block scalar if it can be one (no character that
//!   must be escaped, no space before a line break, no trailing space), else double-quoted.
//!   The header is `|`, then the indentation indicator `2` if the text starts with a space
//!   or a line break (its indentation could not be detected otherwise), then the chomping
//!   indicator: `-` if the text does not end with a line break, `+` if it ends with two (or
//!   is one), none if it ends with exactly one. Content lines are indented two columns past
//!   the enclosing collection's entries (two at the top level); empty lines are empty.
//! - Any other string is plain if the grammar allows it and it would not read back as
//!   another type, else single-quoted if single quotes can hold it, else double-quoted.
//!   - Not plain: the empty string; a leading or trailing space; a line break; a character
//!     that must be escaped; an indicator as the first character (``#,[]{}&*!|>'"%@` ``),
//!     or `-`, `?`, `:` followed by a space or nothing; `: ` or a final `:`; ` #`; a leading
//!     `---` or `...`. (`a:b`, `a#b`, `-a`, `a, b` stay plain: no flow context here.)
//!   - Reads as another type (serde_yaml's own resolution, not YAML 1.1's): `~`, `null`,
//!     `Null`, `NULL`; `true`, `True`, `TRUE`, `false`, `False`, `FALSE` (`yes`, `no`, `on`,
//!     `off`, `y`, `n` stay plain); integers — an optional sign, then decimal digits
//!     (leading zeros too: `007`) or `0x`/`0o`/`0b` and digits of that base, whose
//!     magnitude fits in a `u128` (an `i128` if negative); floats — an optional sign and
//!     `.inf`/`.Inf`/`.INF`, an unsigned `.nan`/`.NaN`/`.NAN`, or digits with a `.` and/or
//!     an exponent (`1.`, `.5`, `1e3`) that parse to a finite `f64` (`1e400` stays plain, as
//!     do `inf`, `nan`, `1_000`, dates and times).
//!   - Not single-quoted: a character that must be escaped; a space next to a line break.
//! - Characters that must be escaped: C0 controls (tab and CR included), DEL, C1 controls
//!   (NEL included), U+FEFF, U+FFFE, U+FFFF. Double quotes write `\0 \a \b \t \n \v \f \r
//!   \e \N`, `\L` and `\P` for U+2028/U+2029, `\"`, `\\`, and `\xXX` or `\uXXXX` (upper-case
//!   hex) for the other escapes; everything else, all other non-ASCII included, as is.
//! - No line is ever folded, however long.
//! - U+2028 and U+2029 are line breaks to serde_yaml: in single-quoted and literal scalars
//!   they are written as is, and the next character starts a new line, indented like
//!   literal content (so `'a<U+2028>  b'`). A literal that ends with one is not followed by
//!   `\n`: the next line starts right after it. serde_yaml reads all of this back as the
//!   same string.

use serde_json::{Map, Number, Value};

/// The YAML document for `value`, as `serde_yaml::to_string` writes it.
#[cfg_attr(
    not(test),
    allow(dead_code, reason = "to_yaml_stream appends with write_yaml; this is the single-document form")
)]
pub(crate) fn to_yaml(value: &Value) -> String {
    let mut out = String::with_capacity(1024);
    write_yaml(&mut out, value);
    out
}

/// Appends the YAML document for `value` to `out`, which is empty or ends with a line break.
pub(crate) fn write_yaml(out: &mut String, value: &Value) {
    debug_assert!(at_line_start(out));
    match value {
        Value::Array(items) if !items.is_empty() => sequence(out, items, 0, false),
        Value::Object(map) if !map.is_empty() => mapping(out, map, 0, false),
        scalar => write_scalar(out, scalar, 2),
    }
    if !at_line_start(out) {
        out.push('\n');
    }
}

/// Whether the output ends with a line break: after a node's text it does not, unless a
/// literal or quoted scalar ended with a raw U+2028/U+2029.
fn at_line_start(out: &str) -> bool {
    match out.as_bytes().last() {
        None | Some(b'\n') => true,
        Some(0xA8 | 0xA9) => out.ends_with(['\u{2028}', '\u{2029}']),
        Some(_) => false,
    }
}

/// Starts a line at column `indent`.
fn new_line(out: &mut String, indent: usize) {
    if !at_line_start(out) {
        out.push('\n');
    }
    push_spaces(out, indent);
}

fn push_spaces(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > SPACES.len() {
        out.push_str(SPACES);
        n -= SPACES.len();
    }
    out.push_str(&SPACES[..n]);
}

/// A non-empty block sequence whose entries start at column `indent`; `inline`: the first
/// entry continues the current line (after `- ` or `: `).
fn sequence(out: &mut String, items: &[Value], indent: usize, inline: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !inline {
            new_line(out, indent);
        }
        out.push_str("- ");
        match item {
            Value::Array(inner) if !inner.is_empty() => sequence(out, inner, indent + 2, true),
            Value::Object(map) if !map.is_empty() => mapping(out, map, indent + 2, true),
            scalar => write_scalar(out, scalar, indent + 2),
        }
    }
}

/// A non-empty block mapping whose keys start at column `indent`; `inline` as for
/// [`sequence`].
fn mapping(out: &mut String, map: &Map<String, Value>, indent: usize, inline: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline {
            new_line(out, indent);
        }
        let analysis = Analysis::of(key);
        if key.len() <= 128 && !analysis.multiline {
            write_string(out, key, &analysis, indent + 2);
            out.push(':');
            match value {
                Value::Array(items) if !items.is_empty() => sequence(out, items, indent, false),
                Value::Object(inner) if !inner.is_empty() => mapping(out, inner, indent + 2, false),
                scalar => {
                    out.push(' ');
                    write_scalar(out, scalar, indent + 2);
                }
            }
        } else {
            out.push_str("? ");
            write_string(out, key, &analysis, indent + 2);
            new_line(out, indent);
            out.push_str(": ");
            match value {
                Value::Array(items) if !items.is_empty() => sequence(out, items, indent + 2, true),
                Value::Object(inner) if !inner.is_empty() => mapping(out, inner, indent + 2, true),
                scalar => write_scalar(out, scalar, indent + 2),
            }
        }
    }
}

/// A scalar or an empty collection; `indent`: the column of its continuation lines.
fn write_scalar(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s, &Analysis::of(s), indent),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn write_number(out: &mut String, n: &Number) {
    if let Some(u) = n.as_u64() {
        write_u64(out, u);
    } else if let Some(i) = n.as_i64() {
        out.push('-');
        write_u64(out, i.unsigned_abs());
    } else {
        write_float(out, n);
    }
}

fn write_u64(out: &mut String, mut u: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// A float as serde_yaml spells it (Ryū's shortest, closest digits and layout). serde_json
/// displays a float the same way except for an `e+` before a positive exponent. A JSON
/// number is finite, so serde_yaml's `.inf`, `-.inf` and `.nan` cannot occur.
fn write_float(out: &mut String, n: &Number) {
    use std::fmt::Write as _;
    let start = out.len();
    let _ = write!(out, "{n}");
    if let Some(at) = out[start..].find("e+") {
        out.remove(start + at + 1);
    }
}

/// What a string contains, for choosing its style: one pass over its bytes.
struct Analysis {
    /// A character that must be escaped, which only double quotes can hold.
    special: bool,
    /// A `\n`: serde_yaml asks for a literal block scalar.
    newline: bool,
    /// A line break: `\n`, U+2028 or U+2029 (`\r` and U+0085 are escaped instead).
    line_break: bool,
    /// A line break, `\r` or U+0085: not a simple key.
    multiline: bool,
    /// A space followed by a line break, or the other way round.
    space_break: bool,
    break_space: bool,
    leading_space: bool,
    leading_break: bool,
    trailing_space: bool,
    trailing_break: bool,
    /// Ends with two line breaks, or is one.
    trailing_breaks: bool,
    /// An indicator that a plain scalar cannot have where it has it.
    indicator: bool,
}

/// Bytes that are a whole character of no interest beyond being one: printable ASCII
/// other than space, `:` and `#`.
const ORDINARY: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0x21;
    while b <= 0x7E {
        table[b] = b != b':' as usize && b != b'#' as usize;
        b += 1;
    }
    table
};

#[derive(Clone, Copy, PartialEq)]
enum CharKind {
    Start,
    Space,
    Break,
    Other,
}

impl Analysis {
    fn of(s: &str) -> Analysis {
        let bytes = s.as_bytes();
        let mut a = Analysis {
            special: false,
            newline: false,
            line_break: false,
            multiline: false,
            space_break: false,
            break_space: false,
            leading_space: false,
            leading_break: false,
            trailing_space: false,
            trailing_break: false,
            trailing_breaks: false,
            indicator: false,
        };
        let Some(&first) = bytes.first() else {
            return a;
        };
        a.indicator = match first {
            b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>' | b'\'' | b'"' | b'%' | b'@'
            | b'`' => true,
            b'-' | b'?' | b':' => matches!(bytes.get(1), None | Some(b' ')),
            _ => false,
        } || bytes.starts_with(b"---")
            || bytes.starts_with(b"...");
        let (mut prev, mut before_prev) = (CharKind::Start, CharKind::Start);
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if ORDINARY[usize::from(b)] {
                // The common case, in a tight loop: a run of characters that change nothing
                // but the previous character's kind.
                i += 1;
                while i < bytes.len() && ORDINARY[usize::from(bytes[i])] {
                    i += 1;
                }
                (before_prev, prev) = (prev, CharKind::Other);
                continue;
            }
            // Valid UTF-8: a lead byte is followed by its continuation bytes, so the indexing
            // below stays in bounds.
            let kind = match b {
                b' ' => CharKind::Space,
                b'\n' => {
                    a.newline = true;
                    CharKind::Break
                }
                b':' => {
                    a.indicator |= matches!(bytes.get(i + 1), None | Some(b' '));
                    CharKind::Other
                }
                b'#' => {
                    a.indicator |= prev == CharKind::Space;
                    CharKind::Other
                }
                0x00..=0x09 | 0x0B..=0x1F | 0x7F => {
                    a.special = true;
                    a.multiline |= b == b'\r';
                    CharKind::Other
                }
                // U+0080..=U+009F.
                0xC2 if bytes[i + 1] <= 0x9F => {
                    a.special = true;
                    a.multiline |= bytes[i + 1] == 0x85;
                    CharKind::Other
                }
                // U+2028, U+2029.
                0xE2 if bytes[i + 1] == 0x80 && matches!(bytes[i + 2], 0xA8 | 0xA9) => CharKind::Break,
                // U+FEFF, U+FFFE, U+FFFF.
                0xEF if matches!((bytes[i + 1], bytes[i + 2]), (0xBB, 0xBF) | (0xBF, 0xBE | 0xBF)) => {
                    a.special = true;
                    CharKind::Other
                }
                // A continuation byte: part of the character already classified.
                0x80..=0xBF => {
                    i += 1;
                    continue;
                }
                _ => CharKind::Other,
            };
            match (prev, kind) {
                (CharKind::Start, CharKind::Space) => a.leading_space = true,
                (CharKind::Start, CharKind::Break) => a.leading_break = true,
                (CharKind::Space, CharKind::Break) => a.space_break = true,
                (CharKind::Break, CharKind::Space) => a.break_space = true,
                _ => {}
            }
            if kind == CharKind::Break {
                a.line_break = true;
                a.multiline = true;
            }
            (before_prev, prev) = (prev, kind);
            i += 1;
        }
        a.trailing_space = prev == CharKind::Space;
        a.trailing_break = prev == CharKind::Break;
        a.trailing_breaks = a.trailing_break && matches!(before_prev, CharKind::Start | CharKind::Break);
        a
    }

    fn plain_allowed(&self) -> bool {
        !(self.special || self.line_break || self.leading_space || self.trailing_space || self.indicator)
    }

    fn single_quoted_allowed(&self) -> bool {
        !(self.special || self.space_break || self.break_space)
    }

    fn literal_allowed(&self) -> bool {
        !(self.special || self.space_break || self.trailing_space)
    }
}

/// `s` in the style its analysis `a` calls for; `indent`: the column of continuation lines.
fn write_string(out: &mut String, s: &str, a: &Analysis, indent: usize) {
    if a.newline {
        if a.literal_allowed() {
            write_literal(out, s, a, indent);
        } else {
            write_double_quoted(out, s);
        }
    } else if !s.is_empty() && a.plain_allowed() && !reads_as_non_string(s) {
        out.push_str(s);
    } else if a.single_quoted_allowed() {
        write_single_quoted(out, s, indent);
    } else {
        write_double_quoted(out, s);
    }
}

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\u{2028}' | '\u{2029}')
}

/// `'…'` with `'` doubled. The only line breaks it can hold are U+2028/U+2029 (a `\n`
/// makes a literal or double-quoted scalar); after them the next line is indented.
fn write_single_quoted(out: &mut String, s: &str, indent: usize) {
    out.push('\'');
    let mut after_break = false;
    for c in s.chars() {
        if is_break(c) {
            out.push(c);
            after_break = true;
            continue;
        }
        if after_break {
            push_spaces(out, indent);
            after_break = false;
        }
        if c == '\'' {
            out.push_str("''");
        } else {
            out.push(c);
        }
    }
    if after_break {
        push_spaces(out, indent);
    }
    out.push('\'');
}

fn write_literal(out: &mut String, s: &str, a: &Analysis, indent: usize) {
    out.push('|');
    if a.leading_space || a.leading_break {
        out.push('2');
    }
    if !a.trailing_break {
        out.push('-');
    } else if a.trailing_breaks {
        out.push('+');
    }
    out.push('\n');
    for line in s.split_inclusive(is_break) {
        let text = line.strip_suffix(is_break).unwrap_or(line);
        if !text.is_empty() {
            push_spaces(out, indent);
        }
        out.push_str(line);
    }
}

fn write_double_quoted(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    out.push('"');
    let mut start = 0;
    for (at, c) in s.char_indices() {
        let escape = match c {
            '\0' => "\\0",
            '\u{7}' => "\\a",
            '\u{8}' => "\\b",
            '\t' => "\\t",
            '\n' => "\\n",
            '\u{b}' => "\\v",
            '\u{c}' => "\\f",
            '\r' => "\\r",
            '\u{1b}' => "\\e",
            '"' => "\\\"",
            '\\' => "\\\\",
            '\u{85}' => "\\N",
            '\u{2028}' => "\\L",
            '\u{2029}' => "\\P",
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}' => "",
            _ => continue,
        };
        out.push_str(&s[start..at]);
        start = at + c.len_utf8();
        if escape.is_empty() {
            let code = u32::from(c);
            let _ = if code <= 0xFF { write!(out, "\\x{code:02X}") } else { write!(out, "\\u{code:04X}") };
        } else {
            out.push_str(escape);
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Whether serde_yaml would read `s`, written plain, as a null (the empty string too), a
/// boolean, an integer or a float — so it quotes it.
fn reads_as_non_string(s: &str) -> bool {
    match s.as_bytes().first() {
        None => return true,
        Some(b'~' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'.' | b'+' | b'-' | b'0'..=b'9') => {}
        Some(_) => return false,
    }
    if matches!(
        s,
        "~" | "null"
            | "Null"
            | "NULL"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | ".nan"
            | ".NaN"
            | ".NAN"
    ) {
        return true;
    }
    let (negative, unsigned) = match s.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        all => (false, all),
    };
    let integer = |digits: &[u8], radix: u32| {
        parse_u128(digits, radix).is_some_and(|m| !negative || m <= i128::MIN.unsigned_abs())
    };
    match unsigned {
        b".inf" | b".Inf" | b".INF" => true,
        [b'0', b'x', digits @ ..] => integer(digits, 16),
        [b'0', b'o', digits @ ..] => integer(digits, 8),
        [b'0', b'b', digits @ ..] => integer(digits, 2),
        _ => integer(unsigned, 10) || (is_decimal_float(unsigned) && s.parse::<f64>().is_ok_and(f64::is_finite)),
    }
}

/// The value of `digits` (at least one, all of `radix`), if it fits in a `u128`.
fn parse_u128(digits: &[u8], radix: u32) -> Option<u128> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u128, |acc, &d| {
        acc.checked_mul(u128::from(radix))?.checked_add(u128::from(char::from(d).to_digit(radix)?))
    })
}

/// `digits [. [digits]] [(e|E) [+|-] digits]` or `. digits [exponent]`: an unsigned decimal
/// float as Rust's `f64` parser reads one (its `inf` and `nan` words excluded).
fn is_decimal_float(b: &[u8]) -> bool {
    let digits = |from: usize| b.get(from..).map_or(0, |rest| rest.iter().take_while(|d| d.is_ascii_digit()).count());
    let int_digits = digits(0);
    let mut i = int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        frac_digits = digits(i + 1);
        i += 1 + frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = digits(i);
        if exp_digits == 0 {
            return false;
        }
        i += exp_digits;
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_are_quoted_while_they_fit_128_bits() {
        let u128_max = format!("0x{}", "f".repeat(32));
        assert!(reads_as_non_string(&u128_max));
        assert!(!reads_as_non_string(&format!("0x{}", "f".repeat(33))));
        assert!(reads_as_non_string(&format!("-0x8{}", "0".repeat(31))), "i128::MIN");
        assert!(!reads_as_non_string(&format!("-0x8{}1", "0".repeat(30))), "below i128::MIN");
        assert!(reads_as_non_string(&format!("0b{}", "1".repeat(128))));
        assert!(!reads_as_non_string(&format!("0b{}", "1".repeat(129))));
        // Decimal digits past 128 bits are still a float, until the float is infinite.
        assert!(reads_as_non_string(&"9".repeat(308)));
        assert!(!reads_as_non_string(&"9".repeat(309)));
        assert!(reads_as_non_string(&format!("{}1", "0".repeat(400))), "leading zeros");
    }

    #[test]
    fn floats_are_quoted_when_finite_and_in_rusts_syntax() {
        for quoted in ["1.", ".5", "-.5", "+1e3", "1E-3", "1.e5", "1e-400", ".inf", "-.Inf", "+.INF", ".NaN"] {
            assert!(reads_as_non_string(quoted), "{quoted}");
        }
        for plain in [
            "1e400", ".", "e1", ".e1", "1e", "1e+", "1_000.5", "inf", "nan", "infinity", "+.nan", ".iNf", "1.5.",
            "0x1.8p1", "0X1F",
        ] {
            assert!(!reads_as_non_string(plain), "{plain}");
        }
    }

    #[test]
    fn a_document_ends_with_the_line_break_of_its_last_line() {
        assert_eq!(to_yaml(&json!("a")), "a\n");
        assert_eq!(to_yaml(&json!({"a": "x\n"})), "a: |\n  x\n");
        // A literal ending in U+2028 already ended the line, so nothing follows it.
        assert_eq!(to_yaml(&json!(["a\n\u{2028}", 1])), "- |+\n  a\n\u{2028}- 1\n");
        assert_eq!(to_yaml(&json!(["a\n\u{2028}"])), "- |+\n  a\n\u{2028}");
    }
}
