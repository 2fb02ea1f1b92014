//! The bytes opm writes, reproduced: Go's `encoding/json` (compact and indented, key
//! order, number formatting, string escaping) and the YAML that `sigs.k8s.io/yaml`'s
//! `JSONToYAML` makes of it with `go.yaml.in/yaml/v2` (v2.4.3, the version opm v1.73.0
//! links): its key order, its choice of plain, single-quoted, double-quoted or literal
//! style, and its folding of long lines at 80 columns. The YAML emitter below follows
//! that library's `emitterc.go` and `resolve.go` function by function, for the subset
//! a JSON document can contain (block mappings and sequences, empty ones in flow style,
//! and scalars): it is a derived work of go-yaml's emitter (itself a port of libyaml;
//! MIT licence: Copyright (c) 2006-2010 Kirill Simonov, Copyright (c) 2011-2019 Canonical
//! Ltd). It should be rewritten from the YAML spec and observed output, as
//! `operator/src/chart/yaml.rs` was for serde_yaml; until then this notice stays with it.

use serde_json::Value;

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
        let mut out = String::new();
        write_json(self, escape_html, None, 0, &mut out);
        out
    }

    /// A `json.Encoder` with `SetIndent("", indent)` and `SetEscapeHTML(false)`, without
    /// the newline the encoder appends.
    pub fn indented(&self, indent: &str) -> String {
        let mut out = String::new();
        write_json(self, false, Some(indent), 0, &mut out);
        out
    }

    /// `yaml.JSONToYAML(json.Marshal(node))`.
    pub fn to_yaml(&self) -> String {
        let mut e = Emitter::new();
        e.node(&self.to_yaml_value(), Context::default());
        // Document end: an implicit end only breaks the last line.
        e.indent = -1;
        e.write_indent();
        e.out
    }

    /// What yaml.v2 decodes the JSON into: maps (keys re-sorted when written), scalars
    /// typed by its resolver.
    fn to_yaml_value(&self) -> Yaml {
        match self {
            Node::Null => Yaml::Null,
            Node::Bool(b) => Yaml::Bool(*b),
            Node::Number(n) => Yaml::Number(yaml_number(n)),
            Node::String(s) => Yaml::String(s.clone()),
            Node::Array(a) => Yaml::Seq(a.iter().map(Node::to_yaml_value).collect()),
            Node::Object(fields) => {
                let mut pairs: Vec<(String, Yaml)> =
                    fields.iter().map(|(k, v)| (k.clone(), v.to_yaml_value())).collect();
                // Duplicate keys cannot come out of Go's encoder; the last one would win.
                pairs.sort_by(|a, b| yaml_key_order(&a.0, &b.0));
                Yaml::Map(pairs)
            }
            Node::Raw(inner) => inner.to_yaml_value(),
        }
    }
}

/// Go's encoding/json spelling of a number decoded from JSON or YAML: integers as they
/// are, other values as float64 (`'f'` format, `'e'` below 1e-6 or from 1e21 on).
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format_float(f, 'e');
        // Go cleans up e-09 to e-9.
        let b = s.as_bytes();
        let n = b.len();
        if n >= 4 && b[n - 4] == b'e' && b[n - 3] == b'-' && b[n - 2] == b'0' {
            return format!("{}{}", &s[..n - 2], &s[n - 1..]);
        }
        s
    } else {
        format_float(f, 'f')
    }
}

/// Go's `strconv.FormatFloat(f, fmt, -1, 64)` for `'e'`, `'f'` and `'g'`.
pub fn format_float(f: f64, fmt: char) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    let neg = f.is_sign_negative();
    // Shortest round-trip digits and the decimal point position (value = 0.DIGITS × 10^dp).
    let (digits, dp) = if f == 0.0 {
        ("0".to_string(), 1)
    } else {
        let e = format!("{:e}", f.abs());
        let (mantissa, exp) = e.split_once('e').expect("{:e} has an exponent");
        let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
        (digits, exp.parse::<i32>().expect("exponent") + 1)
    };
    let nd = digits.len() as i32;
    let fmt_e = |digits: &str| {
        let mut s = String::new();
        s.push_str(&digits[..1]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        let exp = if f == 0.0 { 0 } else { dp - 1 };
        s.push('e');
        s.push(if exp < 0 { '-' } else { '+' });
        let a = exp.abs();
        if a < 10 {
            s.push('0');
        }
        s.push_str(&a.to_string());
        s
    };
    let fmt_f = |digits: &str| {
        let mut s = String::new();
        if dp <= 0 {
            s.push('0');
            if nd > 0 {
                s.push('.');
                s.push_str(&"0".repeat((-dp) as usize));
                s.push_str(digits);
            }
        } else if dp >= nd {
            s.push_str(digits);
            s.push_str(&"0".repeat((dp - nd) as usize));
        } else {
            s.push_str(&digits[..dp as usize]);
            s.push('.');
            s.push_str(&digits[dp as usize..]);
        }
        s
    };
    let body = match fmt {
        'e' => fmt_e(&digits),
        'f' => fmt_f(&digits),
        _ => {
            let exp = dp - 1;
            if !(-4..6).contains(&exp) {
                fmt_e(&digits)
            } else {
                fmt_f(&digits)
            }
        }
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

fn write_json(node: &Node, escape_html: bool, indent: Option<&str>, depth: usize, out: &mut String) {
    let newline = |depth: usize, out: &mut String| {
        if let Some(unit) = indent {
            out.push('\n');
            for _ in 0..depth {
                out.push_str(unit);
            }
        }
    };
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Node::Number(n) => out.push_str(n),
        Node::String(s) => write_json_string(s, escape_html, out),
        Node::Raw(inner) => write_json(inner, true, indent, depth, out),
        Node::Array(items) => {
            out.push('[');
            if !items.is_empty() {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(depth + 1, out);
                    write_json(item, escape_html, indent, depth + 1, out);
                }
                newline(depth, out);
            }
            out.push(']');
        }
        Node::Object(fields) => {
            out.push('{');
            if !fields.is_empty() {
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(depth + 1, out);
                    write_json_string(k, escape_html, out);
                    out.push(':');
                    if indent.is_some() {
                        out.push(' ');
                    }
                    write_json(v, escape_html, indent, depth + 1, out);
                }
                newline(depth, out);
            }
            out.push('}');
        }
    }
}

/// Go's encodeState.string: `\b \f \n \r \t`, other controls as `\u00xx`, U+2028 and
/// U+2029 always escaped, `< > &` escaped when `escape_html`.
fn write_json_string(s: &str, escape_html: bool, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' if escape_html => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------------------------------
// YAML, as go.yaml.in/yaml/v2 v2.4.3 marshals what it decoded from JSON.

#[derive(Debug, Clone)]
enum Yaml {
    Null,
    Bool(bool),
    /// Already in yaml.v2's spelling (int, uint or float formatted).
    Number(String),
    String(String),
    Seq(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

/// A JSON number as yaml.v2 resolves and re-writes it: int64, uint64, else float64 in
/// `'g'` format.
fn yaml_number(json: &str) -> String {
    if let Ok(i) = json.parse::<i64>() {
        return i.to_string();
    }
    if let Ok(u) = json.parse::<u64>() {
        return u.to_string();
    }
    match json.parse::<f64>() {
        Ok(f) if f.is_infinite() => json.to_string(),
        Ok(f) => format_float(f, 'g'),
        Err(_) => json.to_string(),
    }
}

/// yaml.v2's `keyList.Less` for string keys: non-letters before letters, runs of digits
/// compared as numbers, otherwise by code point.
fn yaml_key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let is_letter = |c: char| c.is_alphabetic();
    let is_digit = |c: char| c.is_ascii_digit() || (!c.is_ascii() && c.is_numeric());
    let digit = |c: char| (c as i64) - ('0' as i64);
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let less = |ar: &[char], br: &[char]| -> bool {
        let mut i = 0;
        while i < ar.len() && i < br.len() {
            if ar[i] == br[i] {
                i += 1;
                continue;
            }
            let al = is_letter(ar[i]);
            let bl = is_letter(br[i]);
            if al && bl {
                return ar[i] < br[i];
            }
            if al || bl {
                return bl;
            }
            let (mut an, mut bn) = (0i64, 0i64);
            if ar[i] == '0' || br[i] == '0' {
                let mut j = i as isize - 1;
                while j >= 0 && is_digit(ar[j as usize]) {
                    if ar[j as usize] != '0' {
                        an = 1;
                        bn = 1;
                        break;
                    }
                    j -= 1;
                }
            }
            let mut ai = i;
            while ai < ar.len() && is_digit(ar[ai]) {
                an = an.wrapping_mul(10).wrapping_add(digit(ar[ai]));
                ai += 1;
            }
            let mut bi = i;
            while bi < br.len() && is_digit(br[bi]) {
                bn = bn.wrapping_mul(10).wrapping_add(digit(br[bi]));
                bi += 1;
            }
            if an != bn {
                return an < bn;
            }
            if ai != bi {
                return ai < bi;
            }
            return ar[i] < br[i];
        }
        ar.len() < br.len()
    };
    if less(&ar, &br) {
        Ordering::Less
    } else if less(&br, &ar) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
}

#[derive(Debug, Clone, Copy, Default)]
struct Context {
    mapping: bool,
    simple_key: bool,
}

/// What `yaml_emitter_analyze_scalar` finds.
#[derive(Debug, Clone, Copy)]
struct Analysis {
    multiline: bool,
    flow_plain_allowed: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

const BEST_INDENT: i32 = 2;
const BEST_WIDTH: usize = 80;

fn width(b: u8) -> usize {
    if b & 0x80 == 0x00 {
        1
    } else if b & 0xE0 == 0xC0 {
        2
    } else if b & 0xF0 == 0xE0 {
        3
    } else if b & 0xF8 == 0xF0 {
        4
    } else {
        0
    }
}

fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

fn is_printable(b: &[u8], i: usize) -> bool {
    let c = at(b, i);
    c == 0x0A
        || (0x20..=0x7E).contains(&c)
        || (c == 0xC2 && at(b, i + 1) >= 0xA0)
        || (c > 0xC2 && c < 0xED)
        || (c == 0xED && at(b, i + 1) < 0xA0)
        || c == 0xEE
        || (c == 0xEF
            && !(at(b, i + 1) == 0xBB && at(b, i + 2) == 0xBF)
            && !(at(b, i + 1) == 0xBF && (at(b, i + 2) == 0xBE || at(b, i + 2) == 0xBF)))
}

fn is_space(b: &[u8], i: usize) -> bool {
    at(b, i) == b' '
}

fn is_blank(b: &[u8], i: usize) -> bool {
    matches!(at(b, i), b' ' | b'\t')
}

fn is_break(b: &[u8], i: usize) -> bool {
    let c = at(b, i);
    c == b'\r'
        || c == b'\n'
        || (c == 0xC2 && at(b, i + 1) == 0x85)
        || (c == 0xE2 && at(b, i + 1) == 0x80 && (at(b, i + 2) == 0xA8 || at(b, i + 2) == 0xA9))
}

fn is_blankz(b: &[u8], i: usize) -> bool {
    is_blank(b, i) || is_break(b, i) || at(b, i) == 0
}

fn is_bom(b: &[u8]) -> bool {
    b.len() >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF
}

fn analyze(value: &[u8]) -> Analysis {
    if value.is_empty() {
        return Analysis {
            multiline: false,
            flow_plain_allowed: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let (mut block_indicators, mut flow_indicators, mut line_breaks, mut special_characters) =
        (false, false, false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) = (false, false, false, false);
    let (mut break_space, mut space_break, mut previous_space, mut previous_break) = (false, false, false, false);
    if value.len() >= 3 && (value.starts_with(b"---") || value.starts_with(b"...")) {
        block_indicators = true;
        flow_indicators = true;
    }
    let mut preceded_by_whitespace = true;
    let mut i = 0;
    while i < value.len() {
        let w = width(value[i]).max(1);
        let followed_by_whitespace = i + w >= value.len() || is_blank(value, i + w);
        if i == 0 {
            match value[i] {
                b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>' | b'\'' | b'"' | b'%'
                | b'@' | b'`' => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                b'?' | b':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                b'-' if followed_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        } else {
            match value[i] {
                b',' | b'?' | b'[' | b']' | b'{' | b'}' => flow_indicators = true,
                b':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                b'#' if preceded_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        }
        // The emitter is set to unicode, so only unprintable characters are special.
        if !is_printable(value, i) {
            special_characters = true;
        }
        if is_space(value, i) {
            if i == 0 {
                leading_space = true;
            }
            if i + w == value.len() {
                trailing_space = true;
            }
            if previous_break {
                break_space = true;
            }
            previous_space = true;
            previous_break = false;
        } else if is_break(value, i) {
            line_breaks = true;
            if i == 0 {
                leading_break = true;
            }
            if i + w == value.len() {
                trailing_break = true;
            }
            if previous_space {
                space_break = true;
            }
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blankz(value, i);
        i += w;
    }
    let mut a = Analysis {
        multiline: line_breaks,
        flow_plain_allowed: true,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.flow_plain_allowed = false;
        a.block_plain_allowed = false;
    }
    if trailing_space {
        a.block_allowed = false;
    }
    if break_space {
        a.flow_plain_allowed = false;
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
    }
    if space_break || special_characters {
        a.flow_plain_allowed = false;
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
        a.block_allowed = false;
    }
    if line_breaks {
        a.flow_plain_allowed = false;
        a.block_plain_allowed = false;
    }
    if flow_indicators {
        a.flow_plain_allowed = false;
    }
    if block_indicators {
        a.block_plain_allowed = false;
    }
    a
}

struct Emitter {
    out: String,
    column: usize,
    indent: i32,
    indents: Vec<i32>,
    whitespace: bool,
    indention: bool,
    flow_level: usize,
}

impl Emitter {
    fn new() -> Emitter {
        Emitter {
            out: String::new(),
            column: 0,
            indent: -1,
            indents: Vec::new(),
            whitespace: true,
            indention: true,
            flow_level: 0,
        }
    }

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// Copies the character at `*i` and advances past it.
    fn write(&mut self, value: &[u8], i: &mut usize) {
        let w = width(value[*i]).max(1);
        self.out.push_str(std::str::from_utf8(&value[*i..*i + w]).expect("UTF-8"));
        self.column += 1;
        *i += w;
    }

    fn write_break(&mut self, value: &[u8], i: &mut usize) {
        if value[*i] == b'\n' {
            self.put_break();
            *i += 1;
        } else {
            self.write(value, i);
            self.column = 0;
        }
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(&mut self, indicator: &str, need_whitespace: bool, is_whitespace: bool, is_indention: bool) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        for c in indicator.chars() {
            self.put(c);
        }
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().expect("balanced indents");
    }

    fn node(&mut self, node: &Yaml, ctx: Context) {
        match node {
            Yaml::Null => self.scalar("null", Style::Plain, ctx),
            Yaml::Bool(b) => self.scalar(if *b { "true" } else { "false" }, Style::Plain, ctx),
            Yaml::Number(n) => self.scalar(n, Style::Plain, ctx),
            Yaml::String(s) => {
                let style = if s.contains('\n') {
                    Style::Literal
                } else if resolves_to_string(s) && !is_base60_float(s) {
                    Style::Plain
                } else {
                    Style::DoubleQuoted
                };
                self.scalar(s, style, ctx);
            }
            Yaml::Seq(items) if items.is_empty() || self.flow_level > 0 => {
                self.write_indicator("[", true, true, false);
                self.increase_indent(true, false);
                self.flow_level += 1;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.write_indicator(",", false, false, false);
                    }
                    if self.column > BEST_WIDTH {
                        self.write_indent();
                    }
                    self.node(item, Context::default());
                }
                self.flow_level -= 1;
                self.pop_indent();
                self.write_indicator("]", false, false, false);
            }
            Yaml::Seq(items) => {
                let indentless = ctx.mapping && !self.indention;
                self.increase_indent(false, indentless);
                for item in items {
                    self.write_indent();
                    self.write_indicator("-", true, false, true);
                    self.node(item, Context::default());
                }
                self.pop_indent();
            }
            Yaml::Map(pairs) if pairs.is_empty() || self.flow_level > 0 => {
                self.write_indicator("{", true, true, false);
                self.increase_indent(true, false);
                self.flow_level += 1;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        self.write_indicator(",", false, false, false);
                    }
                    if self.column > BEST_WIDTH {
                        self.write_indent();
                    }
                    if simple_key(k) {
                        self.node(&Yaml::String(k.clone()), Context { mapping: true, simple_key: true });
                        self.write_indicator(":", false, false, false);
                    } else {
                        self.write_indicator("?", true, false, false);
                        self.node(&Yaml::String(k.clone()), Context { mapping: true, ..Default::default() });
                        if self.column > BEST_WIDTH {
                            self.write_indent();
                        }
                        self.write_indicator(":", true, false, false);
                    }
                    self.node(v, Context { mapping: true, ..Default::default() });
                }
                self.flow_level -= 1;
                self.pop_indent();
                self.write_indicator("}", false, false, false);
            }
            Yaml::Map(pairs) => {
                self.increase_indent(false, false);
                for (k, v) in pairs {
                    self.write_indent();
                    if simple_key(k) {
                        self.node(&Yaml::String(k.clone()), Context { mapping: true, simple_key: true });
                        self.write_indicator(":", false, false, false);
                    } else {
                        self.write_indicator("?", true, false, true);
                        self.node(&Yaml::String(k.clone()), Context { mapping: true, ..Default::default() });
                        self.write_indent();
                        self.write_indicator(":", true, false, true);
                    }
                    self.node(v, Context { mapping: true, ..Default::default() });
                }
                self.pop_indent();
            }
        }
    }

    fn scalar(&mut self, value: &str, requested: Style, ctx: Context) {
        let bytes = value.as_bytes();
        let a = analyze(bytes);
        let mut style = requested;
        if ctx.simple_key && a.multiline {
            style = Style::DoubleQuoted;
        }
        if style == Style::Plain {
            if (self.flow_level > 0 && !a.flow_plain_allowed) || (self.flow_level == 0 && !a.block_plain_allowed) {
                style = Style::SingleQuoted;
            }
            if bytes.is_empty() && (self.flow_level > 0 || ctx.simple_key) {
                style = Style::SingleQuoted;
            }
        }
        if style == Style::SingleQuoted && !a.single_quoted_allowed {
            style = Style::DoubleQuoted;
        }
        if style == Style::Literal && (!a.block_allowed || self.flow_level > 0 || ctx.simple_key) {
            style = Style::DoubleQuoted;
        }
        self.increase_indent(true, false);
        let allow_breaks = !ctx.simple_key;
        match style {
            Style::Plain => self.plain(bytes, allow_breaks),
            Style::SingleQuoted => self.single_quoted(bytes, allow_breaks),
            Style::DoubleQuoted => self.double_quoted(bytes, allow_breaks),
            Style::Literal => self.literal(bytes),
        }
        self.pop_indent();
    }

    fn plain(&mut self, value: &[u8], allow_breaks: bool) {
        if !self.whitespace {
            self.put(' ');
        }
        let (mut spaces, mut breaks) = (false, false);
        let mut i = 0;
        while i < value.len() {
            if is_space(value, i) {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && !is_space(value, i + 1) {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn single_quoted(&mut self, value: &[u8], allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let (mut spaces, mut breaks) = (false, false);
        let mut i = 0;
        while i < value.len() {
            if is_space(value, i) {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i < value.len() - 1
                    && !is_space(value, i + 1)
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if value[i] == b'\'' {
                    self.put('\'');
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn double_quoted(&mut self, value: &[u8], allow_breaks: bool) {
        let mut spaces = false;
        self.write_indicator("\"", true, false, false);
        let mut i = 0;
        while i < value.len() {
            if !is_printable(value, i) || is_bom(value) || is_break(value, i) || value[i] == b'"' || value[i] == b'\\' {
                let w = width(value[i]).max(1);
                let c = std::str::from_utf8(&value[i..i + w]).ok().and_then(|s| s.chars().next()).unwrap_or('\u{FFFD}')
                    as u32;
                i += w;
                self.put('\\');
                match c {
                    0x00 => self.put('0'),
                    0x07 => self.put('a'),
                    0x08 => self.put('b'),
                    0x09 => self.put('t'),
                    0x0A => self.put('n'),
                    0x0B => self.put('v'),
                    0x0C => self.put('f'),
                    0x0D => self.put('r'),
                    0x1B => self.put('e'),
                    0x22 => self.put('"'),
                    0x5C => self.put('\\'),
                    0x85 => self.put('N'),
                    0xA0 => self.put('_'),
                    0x2028 => self.put('L'),
                    0x2029 => self.put('P'),
                    _ => {
                        let (letter, digits) = if c <= 0xFF {
                            ('x', 2)
                        } else if c <= 0xFFFF {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(letter);
                        for k in (0..digits).rev() {
                            let d = (c >> (k * 4)) & 0xF;
                            self.put(char::from_digit(d, 16).expect("hex digit").to_ascii_uppercase());
                        }
                    }
                }
                spaces = false;
            } else if is_space(value, i) {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && i > 0 && i < value.len() - 1 {
                    self.write_indent();
                    if is_space(value, i + 1) {
                        self.put('\\');
                    }
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else {
                self.write(value, &mut i);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn block_scalar_hints(&mut self, value: &[u8]) {
        if is_space(value, 0) || is_break(value, 0) {
            self.write_indicator(&BEST_INDENT.to_string(), false, false, false);
        }
        let chomp = if value.is_empty() {
            Some('-')
        } else {
            let mut i = value.len() - 1;
            while value[i] & 0xC0 == 0x80 {
                i -= 1;
            }
            if !is_break(value, i) {
                Some('-')
            } else if i == 0 {
                Some('+')
            } else {
                i -= 1;
                while value[i] & 0xC0 == 0x80 {
                    i -= 1;
                }
                is_break(value, i).then_some('+')
            }
        };
        if let Some(c) = chomp {
            self.write_indicator(&c.to_string(), false, false, false);
        }
    }

    fn literal(&mut self, value: &[u8]) {
        self.write_indicator("|", true, false, false);
        self.block_scalar_hints(value);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        let mut i = 0;
        while i < value.len() {
            if is_break(value, i) {
                self.write_break(value, &mut i);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.write(value, &mut i);
                self.indention = false;
                breaks = false;
            }
        }
    }
}

/// `yaml_emitter_check_simple_key` for a string key.
fn simple_key(key: &str) -> bool {
    !analyze(key.as_bytes()).multiline && key.len() <= 128
}

/// yaml.v2's `resolve("", s)` yields `!!str`: the plain scalar would read back as this
/// string, not as a bool, null, number or timestamp.
pub fn resolves_to_string(s: &str) -> bool {
    const NOT_STRINGS: [&str; 39] = [
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no", "No", "NO", "false",
        "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null", "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf",
        ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
    ];
    // (The resolver also maps "<<" to a merge key, but only looks strings up when their
    // first character hints at a non-string, and '<' does not: "<<" stays a string.)
    if NOT_STRINGS.contains(&s) {
        return false;
    }
    let Some(&first) = s.as_bytes().first() else { return false };
    match first {
        b'.' => !go_parse_float(s),
        b'+' | b'-' | b'0'..=b'9' => {
            if parse_timestamp(s) {
                return false;
            }
            let plain: String = s.chars().filter(|c| *c != '_').collect();
            if go_parse_int(&plain, true) || go_parse_int(&plain, false) {
                return false;
            }
            if yaml_style_float(&plain) && go_parse_float(&plain) {
                return false;
            }
            if let Some(rest) = plain.strip_prefix("0b") {
                if !rest.is_empty() && rest.bytes().all(|b| b == b'0' || b == b'1') && (rest.len() <= 64) {
                    return false;
                }
            } else if let Some(rest) = plain.strip_prefix("-0b") {
                if !rest.is_empty() && rest.bytes().all(|b| b == b'0' || b == b'1') && rest.len() <= 64 {
                    return false;
                }
            }
            true
        }
        _ => true,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` (signed) or `ParseUint(s, 0, 64)` succeeds.
fn go_parse_int(s: &str, signed: bool) -> bool {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'+') if signed => (false, &s[1..]),
        Some(b'-') if signed => (true, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return false;
    }
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() {
        return false;
    }
    match u64::from_str_radix(digits, radix) {
        Ok(v) if signed => {
            if neg {
                v <= 1u64 << 63
            } else {
                v < 1u64 << 63
            }
        }
        Ok(_) => true,
        Err(_) => false,
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(at(b, 0), b'+' | b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if at(b, i) == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if at(b, i) == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(at(b, i), b'e' | b'E') {
        i += 1;
        if matches!(at(b, i), b'+' | b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat(s, 64)` succeeds (decimal syntax, inf/nan words, hex
/// floats; out of range is an error).
fn go_parse_float(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        return true;
    }
    if let Some(hex) = lower.strip_prefix("0x") {
        // Mantissa hex digits with an optional point, a mandatory p exponent.
        let Some((mantissa, exp)) = hex.split_once('p') else { return false };
        let mantissa = mantissa.replace('_', "");
        let ok_mantissa = !mantissa.is_empty()
            && mantissa != "."
            && mantissa.matches('.').count() <= 1
            && mantissa.chars().all(|c| c == '.' || c.is_ascii_hexdigit());
        let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        return ok_mantissa && !exp.is_empty() && exp.bytes().all(|c| c.is_ascii_digit());
    }
    if !yaml_style_float(body) || body.starts_with(['+', '-']) {
        return false;
    }
    body.parse::<f64>().is_ok_and(f64::is_finite)
}

/// yaml.v2's `parseTimestamp`: `YYYY-M-D`, optionally `[Tt ]h:m:s[.frac]` with a `Z` or
/// `±hh:mm` zone after `T`/`t` (none after a space), as Go's time.Parse reads them.
fn parse_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let mut i = 5;
    // 1 or 2 digits, as Go's getnum(value, false).
    let num = |i: &mut usize| -> Option<u32> {
        if !at(b, *i).is_ascii_digit() {
            return None;
        }
        let mut n = (b[*i] - b'0') as u32;
        *i += 1;
        if at(b, *i).is_ascii_digit() {
            n = n * 10 + (b[*i] - b'0') as u32;
            *i += 1;
        }
        Some(n)
    };
    let year: u32 = s[..4].parse().unwrap_or(0);
    let Some(month) = num(&mut i) else { return false };
    if !(1..=12).contains(&month) || at(b, i) != b'-' {
        return false;
    }
    i += 1;
    let Some(day) = num(&mut i) else { return false };
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day < 1 || day > days {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let separator = b[i];
    if !matches!(separator, b'T' | b't' | b' ') {
        return false;
    }
    i += 1;
    let Some(hour) = num(&mut i) else { return false };
    if hour >= 24 || at(b, i) != b':' {
        return false;
    }
    i += 1;
    let Some(minute) = num(&mut i) else { return false };
    if minute >= 60 || at(b, i) != b':' {
        return false;
    }
    i += 1;
    let Some(second) = num(&mut i) else { return false };
    if second >= 60 {
        return false;
    }
    if at(b, i) == b'.' && at(b, i + 1).is_ascii_digit() {
        i += 1;
        while at(b, i).is_ascii_digit() {
            i += 1;
        }
    }
    if separator == b' ' {
        return i == b.len();
    }
    match at(b, i) {
        b'Z' => i + 1 == b.len(),
        b'+' | b'-' => {
            let z = &b[i + 1..];
            z.len() == 5
                && z[0].is_ascii_digit()
                && z[1].is_ascii_digit()
                && z[2] == b':'
                && z[3].is_ascii_digit()
                && z[4].is_ascii_digit()
        }
        _ => false,
    }
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`, checked only when `s` starts
/// with a sign or digit and contains a colon.
fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !(matches!(b[0], b'+' | b'-') || b[0].is_ascii_digit()) || !s.contains(':') {
        return false;
    }
    let mut i = usize::from(matches!(b[0], b'+' | b'-'));
    if !at(b, i).is_ascii_digit() {
        return false;
    }
    i += 1;
    while at(b, i).is_ascii_digit() || at(b, i) == b'_' {
        i += 1;
    }
    let mut groups = 0;
    while at(b, i) == b':' {
        i += 1;
        // [0-5]?[0-9]
        if at(b, i).is_ascii_digit() && at(b, i + 1).is_ascii_digit() && at(b, i) <= b'5' {
            i += 2;
        } else if at(b, i).is_ascii_digit() {
            i += 1;
        } else {
            return false;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if at(b, i) == b'.' {
        i += 1;
        while at(b, i).is_ascii_digit() || at(b, i) == b'_' {
            i += 1;
        }
    }
    i == b.len()
}

/// The expected YAML below is what opm v1.73.0 printed for the same values (`opm render
/// DIR -o yaml` of a catalog holding them); the full comparison runs against opm itself in
/// tests/opm_writer.rs.
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(v: Value) -> String {
        Node::from_value(&v).to_yaml()
    }

    #[test]
    fn numbers_are_spelled_as_go_encodes_a_float64() {
        assert_eq!(go_number(&serde_json::Number::from_f64(0.0).unwrap()), "0");
        assert_eq!(go_number(&serde_json::Number::from_f64(1.5).unwrap()), "1.5");
        assert_eq!(go_number(&serde_json::Number::from_f64(1e21).unwrap()), "1e+21");
        assert_eq!(go_number(&serde_json::Number::from_f64(1.5e-7).unwrap()), "1.5e-7");
        assert_eq!(go_number(&serde_json::Number::from_f64(1e20).unwrap()), "100000000000000000000");
        assert_eq!(format_float(1234567.5, 'g'), "1.2345675e+06");
        assert_eq!(format_float(0.0001, 'g'), "0.0001");
        assert_eq!(format_float(0.00001, 'g'), "1e-05");
    }

    #[test]
    fn json_escapes_like_encoding_json() {
        let n = Node::from_value(&json!({"b": "<a&b>\u{2028}\t\u{1}", "a": 1}));
        assert_eq!(n.compact(true), r#"{"a":1,"b":"\u003ca\u0026b\u003e\u2028\t\u0001"}"#);
        assert_eq!(n.compact(false), r#"{"a":1,"b":"<a&b>\u2028\t\u0001"}"#);
        assert_eq!(
            Node::from_value(&json!({"a": [], "b": {}, "c": [1]})).indented("  "),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1\n  ]\n}"
        );
    }

    #[test]
    fn yaml_keys_sort_with_digits_as_numbers_and_non_letters_first() {
        assert_eq!(yaml(json!({"a10": 1, "a9": 2, "a_b": 3, "aB": 4})), "a_b: 3\na9: 2\na10: 1\naB: 4\n");
    }

    #[test]
    fn yaml_quotes_what_would_read_back_as_another_type() {
        assert_eq!(
            yaml(json!({"a": "", "b": "true", "c": "yes", "d": "1.0", "e": "1.0.0", "f": "2024-01-02", "g": "1:20", "h": "0x1F", "i": "1_000"})),
            "a: \"\"\nb: \"true\"\nc: \"yes\"\nd: \"1.0\"\ne: 1.0.0\nf: \"2024-01-02\"\ng: \"1:20\"\nh: \"0x1F\"\ni: \"1_000\"\n"
        );
    }

    #[test]
    fn yaml_folds_long_quoted_and_plain_strings_at_eighty_columns() {
        let long = "word ".repeat(30).trim_end().to_string();
        let out = yaml(json!({ "k": long }));
        assert!(out.lines().all(|l| l.len() <= 86), "{out}");
        assert_eq!(out.replace("\n  ", " "), format!("k: {long}\n"));
        let quoted = format!("a: {long}");
        let out = yaml(json!({ "k": quoted }));
        assert!(out.starts_with("k: 'a: word") && out.contains("\n  word"), "{out}");
    }

    #[test]
    fn yaml_writes_multi_line_strings_as_literal_blocks_and_sequences_unindented() {
        assert_eq!(
            yaml(json!({"d": "a\nb\n", "e": "x\n\n", "l": [{"n": 1, "m": []}]})),
            "d: |\n  a\n  b\ne: |+\n  x\n\nl:\n- m: []\n  \"n\": 1\n"
        );
    }
}
