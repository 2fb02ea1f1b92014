//! The YAML document yaml.v2 writes for a decoded JSON value, in block style:
//!
//! - a mapping's entries are `key: value` lines at the mapping's indentation; a nested
//!   mapping is indented two more, a nested sequence is not (`key:` then `- item`);
//! - a sequence item starts `- `, and a collection inside it starts on that line;
//! - empty collections are `{}` and `[]`;
//! - a key too long or multi-line for `key: ` is written `? key`, its value on a line
//!   starting `: `;
//! - scalars' continuation lines, folded or literal, are indented two more than the
//!   collection holding them; folding happens at the first single space once a line has
//!   passed 80 columns (counted in characters).

use super::key_order;
use super::scalar::{self, is_break, is_printable, Style};

/// Lines are folded at a space once they are longer than this.
const WIDTH: usize = 80;
/// Indentation added per level, and the indentation indicator of literal blocks.
const STEP: usize = 2;

/// A value as yaml.v2 holds it after reading the JSON: strings, other scalars already
/// spelled (`null`, `true`, numbers), sequences, and mappings with their keys in order.
pub(super) enum Yaml<'a> {
    Str(&'a str),
    Bare(String),
    Seq(Vec<Yaml<'a>>),
    Map(Vec<(&'a str, Yaml<'a>)>),
}

impl<'a> Yaml<'a> {
    /// A mapping with its entries in yaml.v2's key order; the sort is stable, so keys that
    /// order cannot rank (see [`key_order`]) keep their JSON order.
    pub fn map(mut entries: Vec<(&'a str, Yaml<'a>)>) -> Yaml<'a> {
        entries.sort_by(|a, b| key_order::compare(a.0, b.0));
        Yaml::Map(entries)
    }
}

/// yaml.v2's spelling of a JSON number: integers within int64 or uint64 as they are,
/// anything else as a float64 in Go's `'g'` form.
pub(super) fn number(json: &str) -> String {
    if let Ok(i) = json.parse::<i64>() {
        return i.to_string();
    }
    if let Ok(u) = json.parse::<u64>() {
        return u.to_string();
    }
    match json.parse::<f64>() {
        Ok(f) if f.is_infinite() => if f > 0.0 { ".inf" } else { "-.inf" }.to_string(),
        Ok(f) => super::format_float(f, 'g'),
        Err(_) => json.to_string(),
    }
}

pub(super) fn document(root: &Yaml) -> String {
    let mut w = Writer { out: String::new(), column: 0, line_start: true };
    match root {
        Yaml::Map(entries) if !entries.is_empty() => w.mapping(entries, 0),
        Yaml::Seq(items) if !items.is_empty() => w.sequence(items, 0),
        other => w.inline(other, 0),
    }
    w.end_line();
    w.out
}

struct Writer {
    out: String,
    column: usize,
    /// Nothing written since the last line break (of any kind) or the document's start.
    line_start: bool,
}

impl Writer {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
        self.line_start = false;
    }

    fn text(&mut self, s: &str) {
        s.chars().for_each(|c| self.put(c));
    }

    fn pad_to(&mut self, indent: usize) {
        while self.column < indent {
            self.put(' ');
        }
    }

    fn break_line(&mut self, indent: usize) {
        self.raw_break('\n');
        self.pad_to(indent);
    }

    fn end_line(&mut self) {
        if !self.line_start {
            self.raw_break('\n');
        }
    }

    /// Starts the next entry of a collection at `indent` on a line of its own, unless it is
    /// the first and this line holds only what introduces the collection (`- `, `: `). A
    /// line that holds nothing yet (the document's start, or after a literal block's last
    /// line break) is used as it is.
    fn entry(&mut self, indent: usize, first_on_line: bool) {
        if !first_on_line {
            self.end_line();
        }
        self.pad_to(indent);
    }

    /// Entries at `indent`, the first where the writer stands.
    fn mapping(&mut self, entries: &[(&str, Yaml)], indent: usize) {
        for (i, (key, value)) in entries.iter().enumerate() {
            self.entry(indent, i == 0);
            if scalar::is_simple_key(key) {
                self.string(key, indent, true);
                self.put(':');
            } else {
                self.text("? ");
                self.string(key, indent, false);
                self.entry(indent, false);
                self.put(':');
                self.inline(value, indent);
                continue;
            }
            match value {
                Yaml::Map(inner) if !inner.is_empty() => {
                    self.end_line();
                    self.mapping(inner, indent + STEP);
                }
                Yaml::Seq(items) if !items.is_empty() => {
                    self.end_line();
                    self.sequence(items, indent);
                }
                other => self.inline(other, indent),
            }
        }
    }

    /// Items at `indent`, the first where the writer stands.
    fn sequence(&mut self, items: &[Yaml], indent: usize) {
        for (i, item) in items.iter().enumerate() {
            self.entry(indent, i == 0);
            self.put('-');
            self.inline(item, indent);
        }
    }

    /// A value after an indicator (`-`, `:`) of a collection at `indent`, on the same line.
    fn inline(&mut self, value: &Yaml, indent: usize) {
        if !self.line_start {
            self.put(' ');
        }
        match value {
            Yaml::Map(entries) if !entries.is_empty() => self.mapping(entries, indent + STEP),
            Yaml::Seq(items) if !items.is_empty() => self.sequence(items, indent + STEP),
            Yaml::Map(_) => self.text("{}"),
            Yaml::Seq(_) => self.text("[]"),
            Yaml::Bare(s) => self.text(s),
            Yaml::Str(s) => self.string(s, indent, false),
        }
    }

    /// A string in its style; continuation lines at `indent` + 2. A simple key is not folded.
    fn string(&mut self, s: &str, indent: usize, simple_key: bool) {
        let fold = (!simple_key).then_some(indent + STEP);
        match scalar::style(s, simple_key) {
            Style::Plain => self.plain(s, fold),
            Style::SingleQuoted => self.single_quoted(s, fold),
            Style::DoubleQuoted => self.double_quoted(s, fold),
            Style::Literal => self.literal(s, indent + STEP),
        }
    }

    /// The indentation to continue at when `chars[i]` is a space to fold at: the line is
    /// past the width, and the space is neither the first nor the last character nor next
    /// to another space (folding would shorten a run of spaces) — except that in double
    /// quotes a space may follow, as it can be escaped.
    fn fold_point(&self, chars: &[char], i: usize, fold: Option<usize>, space_may_follow: bool) -> Option<usize> {
        let inner = i > 0 && i + 1 < chars.len();
        let alone = inner && chars[i - 1] != ' ' && (space_may_follow || chars[i + 1] != ' ');
        fold.filter(|_| chars[i] == ' ' && self.column > WIDTH && alone)
    }

    fn plain(&mut self, s: &str, fold: Option<usize>) {
        let chars: Vec<char> = s.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            match self.fold_point(&chars, i, fold, false) {
                Some(indent) => self.break_line(indent),
                None => self.put(c),
            }
        }
    }

    /// `'…'` with `'` doubled. A line or paragraph separator is copied and the text after
    /// it indented, as on a new line.
    fn single_quoted(&mut self, s: &str, fold: Option<usize>) {
        let chars: Vec<char> = s.chars().collect();
        self.put('\'');
        for (i, &c) in chars.iter().enumerate() {
            if let Some(indent) = self.fold_point(&chars, i, fold, false) {
                self.break_line(indent);
            } else if is_break(c) {
                self.raw_break(c);
            } else {
                if self.line_start {
                    self.pad_to(fold.unwrap_or(0));
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
            }
        }
        self.put('\'');
    }

    /// `"…"` with escapes for what is not printable, line breaks, `"` and `\`. A space that
    /// begins a continuation line is escaped, since folding would drop it. yaml.v2 escapes
    /// every character of a string that starts with a byte order mark, spaces too, so such
    /// a string is not folded.
    fn double_quoted(&mut self, s: &str, fold: Option<usize>) {
        let chars: Vec<char> = s.chars().collect();
        let escape_all = s.starts_with('\u{feff}');
        let fold = fold.filter(|_| !escape_all);
        self.put('"');
        for (i, &c) in chars.iter().enumerate() {
            if let Some(indent) = self.fold_point(&chars, i, fold, true) {
                self.break_line(indent);
                if chars[i + 1] == ' ' {
                    self.put('\\');
                }
            } else {
                match escape(c, escape_all) {
                    Some(e) => self.text(&e),
                    None => self.put(c),
                }
            }
        }
        self.put('"');
    }

    /// `|` with an indentation indicator when the text starts with a space or a break,
    /// and `-` (no final line break) or `+` (more than one, or only one) for chomping.
    fn literal(&mut self, s: &str, indent: usize) {
        let chars: Vec<char> = s.chars().collect();
        self.put('|');
        if chars.first().is_some_and(|&c| c == ' ' || is_break(c)) {
            self.text(&STEP.to_string());
        }
        let trailing = chars.iter().rev().take_while(|&&c| is_break(c)).count();
        match trailing {
            0 => self.put('-'),
            1 if chars.len() > 1 => {}
            _ => self.put('+'),
        }
        self.raw_break('\n');
        for &c in &chars {
            if is_break(c) {
                self.raw_break(c);
            } else {
                if self.line_start {
                    self.pad_to(indent);
                }
                self.put(c);
            }
        }
    }

    /// A line break copied into the output: a line feed, or a line or paragraph separator,
    /// which the writer then treats as the end of a line too (not adding a line feed).
    fn raw_break(&mut self, c: char) {
        self.out.push(c);
        self.column = 0;
        self.line_start = true;
    }
}

/// The escape for `c` inside double quotes, if it needs one: YAML's short escapes where
/// there is one, else `\x`, `\u` or `\U` with upper-case hex digits.
fn escape(c: char, always: bool) -> Option<String> {
    if !always && is_printable(c) && !is_break(c) && c != '"' && c != '\\' {
        return None;
    }
    let short = match c {
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
        '\u{a0}' => "\\_",
        '\u{2028}' => "\\L",
        '\u{2029}' => "\\P",
        c => {
            return Some(match c as u32 {
                n @ 0..=0xff => format!("\\x{n:02X}"),
                n @ 0x100..=0xffff => format!("\\u{n:04X}"),
                n => format!("\\U{n:08X}"),
            })
        }
    };
    Some(short.to_string())
}
