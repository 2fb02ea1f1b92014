//! What a plain (unquoted) scalar means to yaml.v2, which reads YAML 1.1's types
//! (yaml.org/type): a string written plain must not read back as null, a bool, a number,
//! or a timestamp, so such strings are quoted. Where yaml.v2 reads these
//! types differently from the spec (Go's integer and time syntax, no merge key when
//! writing), the rules follow what it was seen to do.

/// Whether `s`, written plain, reads back as the string `s`.
pub(super) fn plain_reads_as_string(s: &str) -> bool {
    if is_null(s) || is_bool(s) || is_float_word(s) {
        return false;
    }
    // Only a scalar that starts like a number can be one (or a timestamp).
    match s.as_bytes().first() {
        Some(b'0'..=b'9') => !(is_timestamp(s) || is_number(s)),
        Some(b'+' | b'-') => !is_number(s),
        Some(b'.') => !is_fraction(s),
        _ => true,
    }
}

/// YAML 1.1's base-60 numbers (`1:20`, `-190:20:30.15`): yaml.v2 reads them as strings but
/// quotes them, since a YAML 1.1 reader would see a number.
pub(super) fn is_sexagesimal(s: &str) -> bool {
    let mut c = Cursor::new(s);
    c.sign();
    if !c.digit() {
        return false;
    }
    c.many(|b| b.is_ascii_digit() || b == b'_');
    let mut groups = 0;
    while c.eat(b':') {
        // One or two digits, the first of two at most 5.
        match (c.peek(0), c.peek(1)) {
            (Some(b'0'..=b'5'), Some(b'0'..=b'9')) => c.skip(2),
            (Some(b'0'..=b'9'), _) => c.skip(1),
            _ => return false,
        }
        groups += 1;
    }
    if c.eat(b'.') {
        c.many(|b| b.is_ascii_digit() || b == b'_');
    }
    groups > 0 && c.done()
}

fn is_null(s: &str) -> bool {
    matches!(s, "" | "~" | "null" | "Null" | "NULL")
}

fn is_bool(s: &str) -> bool {
    let words = ["y", "yes", "n", "no", "true", "false", "on", "off"];
    words.iter().any(|w| {
        s == *w || s == w.to_uppercase() || {
            let mut title = w.to_string();
            title[..1].make_ascii_uppercase();
            s == title
        }
    })
}

fn is_float_word(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    matches!(body, ".inf" | ".Inf" | ".INF") || matches!(s, ".nan" | ".NaN" | ".NAN")
}

/// Numbers as yaml.v2 reads them, underscores ignored: Go's integer syntax (`0x1F`,
/// `0o17`, `0b101`, a leading zero for octal) in the range of int64 or uint64, or a
/// decimal float that is finite.
fn is_number(s: &str) -> bool {
    let plain: String = s.chars().filter(|&c| c != '_').collect();
    is_go_integer(&plain) || is_decimal_float(&plain) || is_binary_after_prefix(&plain)
}

/// A scalar starting with a point is a number when it is a fraction in Go's syntax, where
/// an underscore may stand between two digits: `.5`, `.5e3`, `.4_8`.
fn is_fraction(s: &str) -> bool {
    let mut c = Cursor::new(s);
    let mantissa = c.eat(b'.') && c.go_digits();
    let exponent = !(c.eat(b'e') || c.eat(b'E')) || {
        c.sign();
        c.go_digits()
    };
    mantissa && exponent && c.done() && finite(&s.replace('_', ""))
}

fn finite(s: &str) -> bool {
    s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, and not too large for a float64.
fn is_decimal_float(s: &str) -> bool {
    let mut c = Cursor::new(s);
    c.sign();
    let whole = c.many(|b| b.is_ascii_digit());
    let fraction = if c.eat(b'.') { Some(c.many(|b| b.is_ascii_digit())) } else { None };
    let mantissa = match fraction {
        None => whole > 0,
        Some(digits) => whole > 0 || digits > 0,
    };
    mantissa && c.exponent() && c.done() && finite(s)
}

/// Go's integer literal with an optional sign, within int64 (signed) or uint64.
fn is_go_integer(s: &str) -> bool {
    let (negative, signed, body) = match s.as_bytes().first() {
        Some(b'-') => (true, true, &s[1..]),
        Some(b'+') => (false, true, &s[1..]),
        _ => (false, false, s),
    };
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
    let Some(magnitude) = magnitude(digits, radix) else {
        return false;
    };
    let limit = match (signed, negative) {
        (true, true) => 1u128 << 63,
        (true, false) => (1u128 << 63) - 1,
        (false, _) => u64::MAX as u128,
    };
    magnitude <= limit
}

/// `0b` or `-0b` followed by a base-2 number, which may have its own sign: yaml.v2 reads
/// `0b-1` as -1.
fn is_binary_after_prefix(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("0b").or_else(|| s.strip_prefix("-0b")) else {
        return false;
    };
    let (negative, digits) = match rest.as_bytes().first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    magnitude(digits, 2).is_some_and(|m| m <= if negative { 1u128 << 63 } else { (1u128 << 63) - 1 })
}

/// The value of non-empty `digits` in `radix`, if every one is a digit of it; saturated far
/// above any 64-bit range.
fn magnitude(digits: &str, radix: u32) -> Option<u128> {
    if digits.is_empty() {
        return None;
    }
    digits.chars().try_fold(0u128, |acc, c| {
        c.to_digit(radix).map(|d| acc.saturating_mul(radix as u128).saturating_add(d as u128))
    })
}

/// A timestamp as yaml.v2 reads one with Go's time layouts: `YYYY-M-D`, or that followed by
/// `T`, `t` or spaces and `h:m:s`, an optional fraction (after `.` or `,`), and after `T`
/// or `t` a zone (`Z` or `±hh:mm`), which spaces forbid. One or two digits for every field
/// but the year, and only real dates and times.
fn is_timestamp(s: &str) -> bool {
    let mut c = Cursor::new(s);
    let Some(year) = c.number(4, 4) else { return false };
    let (true, Some(month), true, Some(day)) = (c.eat(b'-'), c.number(1, 2), c.eat(b'-'), c.number(1, 2)) else {
        return false;
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return false;
    }
    if c.done() {
        return true;
    }
    let zoned = match c.next() {
        Some(b'T' | b't') => true,
        Some(b' ') => {
            c.many(|b| b == b' ');
            false
        }
        _ => return false,
    };
    let (Some(hour), true, Some(minute), true, Some(second)) =
        (c.number(1, 2), c.eat(b':'), c.number(1, 2), c.eat(b':'), c.number(1, 2))
    else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 59 {
        return false;
    }
    if matches!(c.peek(0), Some(b'.' | b',')) && c.peek(1).is_some_and(|b| b.is_ascii_digit()) {
        c.skip(1);
        c.many(|b| b.is_ascii_digit());
    }
    if !zoned {
        return c.done();
    }
    if c.eat(b'Z') {
        return c.done();
    }
    let offset = (c.next(), c.number(2, 2), c.eat(b':'), c.number(2, 2));
    matches!(offset, (Some(b'+' | b'-'), Some(h), true, Some(m)) if h <= 24 && m <= 60) && c.done()
}

fn days_in_month(year: u32, month: u32) -> u32 {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A position in a scalar's bytes, for the small grammars above.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Cursor<'a> {
        Cursor { bytes: s.as_bytes(), at: 0 }
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.at + ahead).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek(0);
        self.skip(1);
        b
    }

    fn skip(&mut self, n: usize) {
        self.at = (self.at + n).min(self.bytes.len());
    }

    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn eat(&mut self, b: u8) -> bool {
        let ate = self.peek(0) == Some(b);
        if ate {
            self.at += 1;
        }
        ate
    }

    fn sign(&mut self) {
        let _ = self.eat(b'+') || self.eat(b'-');
    }

    /// Go's decimal digits: at least one, an underscore allowed between two.
    fn go_digits(&mut self) -> bool {
        if !self.digit() {
            return false;
        }
        loop {
            if self.digit() {
                continue;
            }
            if self.peek(0) == Some(b'_') && self.peek(1).is_some_and(|b| b.is_ascii_digit()) {
                self.skip(1);
                continue;
            }
            return true;
        }
    }

    fn digit(&mut self) -> bool {
        let is = self.peek(0).is_some_and(|b| b.is_ascii_digit());
        if is {
            self.at += 1;
        }
        is
    }

    /// Skips the bytes matching `class`; how many.
    fn many(&mut self, class: impl Fn(u8) -> bool) -> usize {
        let start = self.at;
        while self.peek(0).is_some_and(&class) {
            self.at += 1;
        }
        self.at - start
    }

    /// An optional `[eE][-+]?[0-9]+`; false when it is started but incomplete.
    fn exponent(&mut self) -> bool {
        if !(self.eat(b'e') || self.eat(b'E')) {
            return true;
        }
        self.sign();
        self.many(|b| b.is_ascii_digit()) > 0
    }

    /// `min` to `max` decimal digits and their value.
    fn number(&mut self, min: usize, max: usize) -> Option<u32> {
        let start = self.at;
        while self.at - start < max && self.digit() {}
        let digits = &self.bytes[start..self.at];
        (digits.len() >= min).then(|| digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_1_1_null_and_bool_words_are_not_strings() {
        for s in ["", "~", "null", "NULL", "y", "Y", "yes", "No", "TRUE", "on", "Off"] {
            assert!(!plain_reads_as_string(s), "{s}");
        }
        for s in ["nULL", "yES", "oN", "tRUE", "nil", "none"] {
            assert!(plain_reads_as_string(s), "{s}");
        }
    }

    #[test]
    fn integers_in_go_syntax_are_not_strings_underscores_ignored() {
        for s in ["0", "-1", "+1", "017", "0o17", "0x1F", "0b101", "1_000", "18446744073709551615"] {
            assert!(!plain_reads_as_string(s), "{s}");
        }
    }

    #[test]
    fn integers_beyond_64_bits_and_malformed_ones_are_strings() {
        for s in ["0x1FFFFFFFFFFFFFFFF", "0x", "0xG", "1a"] {
            assert!(plain_reads_as_string(s), "{s}");
        }
    }

    #[test]
    fn decimal_floats_are_not_strings_unless_they_overflow() {
        for s in ["1.0", "1.", ".5", "+.5", "1e3", "-1.5E-3", ".5e3", ".4_8e1_0", "1._5", ".inf", "-.Inf", ".NaN"] {
            assert!(!plain_reads_as_string(s), "{s}");
        }
        for s in ["1e400", "1.0.0", "1e", ".", "inf", "NaN", "._5", ".5_", ".4__8"] {
            assert!(plain_reads_as_string(s), "{s}");
        }
    }

    #[test]
    fn real_dates_and_times_are_timestamps() {
        for s in [
            "2024-01-02",
            "2024-1-2",
            "2024-02-29",
            "2024-01-02T10:20:30Z",
            "2024-01-02 1:2:3.5",
            "2024-01-02   1:2:3",
            "2024-01-02t10:20:30,5+01:00",
        ] {
            assert!(!plain_reads_as_string(s), "{s}");
        }
    }

    #[test]
    fn impossible_dates_and_zones_after_a_space_are_strings() {
        for s in [
            "2023-02-29",
            "2024-13-02",
            "2024-01-02T10:20:30",
            "2024-01-02 10:20:30Z",
            "24-01-02",
            "2024-01-02T25:00:00Z",
        ] {
            assert!(plain_reads_as_string(s), "{s}");
        }
    }

    #[test]
    fn the_merge_key_is_written_as_a_string() {
        assert!(plain_reads_as_string("<<"));
    }

    #[test]
    fn base_60_numbers_are_recognised_for_quoting() {
        for s in ["1:20", "-1:2:3", "190:20:30.15", "1_0:59."] {
            assert!(is_sexagesimal(s), "{s}");
        }
        for s in ["1:60", "1:", ":1", "a:1", "1:2:3:", "1.5:2"] {
            assert!(!is_sexagesimal(s), "{s}");
        }
    }
}
