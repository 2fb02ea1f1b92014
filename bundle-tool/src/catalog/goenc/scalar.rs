//! The style a string is written in. YAML has four that matter here (spec 1.2 §7.3, §8.1):
//! plain, single-quoted, double-quoted and literal block. A string asks for one — plain,
//! or double-quoted when a plain scalar would read back as something else, or literal
//! when it holds line feeds — and falls back to a style able to carry its characters:
//! plain to single-quoted, either of them or literal to double-quoted, which carries
//! anything through escapes.

use super::resolve::{is_sexagesimal, plain_reads_as_string};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
}

/// Keys longer than this many bytes are written after `? ` rather than before `: `.
pub(super) const SIMPLE_KEY_LIMIT: usize = 128;

/// Whether `key` can be written in front of `: ` (an implicit key, spec §6.5 of 1.1): on
/// one line and not too long.
pub(super) fn is_simple_key(key: &str) -> bool {
    key.len() <= SIMPLE_KEY_LIMIT && !key.chars().any(is_break)
}

/// The style of `s` as a value or as a key after `? `; `simple_key` for a key before
/// `: `, which must stay on its line.
pub(super) fn style(s: &str, simple_key: bool) -> Style {
    let can = Abilities::of(s);
    if s.contains('\n') {
        return if can.literal && !simple_key { Style::Literal } else { Style::DoubleQuoted };
    }
    if !plain_reads_as_string(s) || is_sexagesimal(s) {
        return Style::DoubleQuoted;
    }
    if can.plain {
        Style::Plain
    } else if can.single_quoted {
        Style::SingleQuoted
    } else {
        Style::DoubleQuoted
    }
}

/// Line breaks (YAML 1.1 b-char, less NEL, which is escaped).
pub(super) fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// Characters written as they are outside double quotes: the printable ones of the
/// Basic Multilingual Plane, less tab and the byte order mark (others are escaped). yaml.v2
/// would also write U+0085 (NEL) as it is, which YAML 1.1 readers take for a line break;
/// opm never gets to (it reads its own JSON as YAML first, where a raw NEL turns into a
/// space), so here it is escaped.
pub(super) fn is_printable(c: char) -> bool {
    matches!(c, '\n' | ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}') && c != '\u{feff}'
}

/// Which styles can carry a string's characters.
struct Abilities {
    plain: bool,
    single_quoted: bool,
    literal: bool,
}

impl Abilities {
    fn of(s: &str) -> Abilities {
        let chars: Vec<char> = s.chars().collect();
        let (Some(&first), Some(&last)) = (chars.first(), chars.last()) else {
            // The empty string reads back as null when plain; it is double-quoted anyway.
            return Abilities { plain: false, single_quoted: false, literal: false };
        };
        let escapes_needed = !chars.iter().all(|&c| is_printable(c));
        // A space next to a line break would be lost to line folding in the quoted and
        // block styles: before a break in all of them, after one in single quotes.
        let pairs = || chars.windows(2).map(|w| (w[0], w[1]));
        let space_then_break = pairs().any(|(a, b)| a == ' ' && is_break(b));
        let break_then_space = pairs().any(|(a, b)| is_break(a) && b == ' ');
        let plain = !escapes_needed
            && !chars.iter().any(|&c| is_break(c))
            && first != ' '
            && last != ' '
            && !starts_with_indicator(&chars)
            && !has_inner_indicator(&chars);
        Abilities {
            plain,
            single_quoted: !escapes_needed && !space_then_break && !break_then_space,
            literal: !escapes_needed && !space_then_break && last != ' ',
        }
    }
}

/// A first character that would start something other than a plain scalar (spec §5.3 c-indicator),
/// or a document marker.
fn starts_with_indicator(chars: &[char]) -> bool {
    let followed_by_space = chars.get(1).is_none_or(|&c| c == ' ' || is_break(c));
    match chars[0] {
        '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%' | '@' | '`' => true,
        '-' | '?' | ':' => followed_by_space || chars.starts_with(&['-', '-', '-']),
        '.' => chars.starts_with(&['.', '.', '.']),
        _ => false,
    }
}

/// `: ` or a final `:` (a mapping key's end), or ` #` (a comment), after the first character.
fn has_inner_indicator(chars: &[char]) -> bool {
    (1..chars.len()).any(|i| match chars[i] {
        ':' => chars.get(i + 1).is_none_or(|&c| c == ' ' || is_break(c)),
        '#' => chars[i - 1] == ' ',
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinary_string_is_plain() {
        assert_eq!(style("quay.io/acme/bundle:v1.0.0", false), Style::Plain);
    }

    #[test]
    fn a_string_read_back_as_another_type_is_double_quoted() {
        assert_eq!(style("yes", false), Style::DoubleQuoted);
        assert_eq!(style("1.0", false), Style::DoubleQuoted);
    }

    #[test]
    fn the_empty_string_is_double_quoted() {
        assert_eq!(style("", false), Style::DoubleQuoted);
    }

    #[test]
    fn a_base_60_number_is_double_quoted() {
        assert_eq!(style("1:20", false), Style::DoubleQuoted);
    }

    #[test]
    fn a_leading_indicator_makes_a_string_single_quoted() {
        for s in
            ["*alias", "&anchor", "!tag", "|pipe", ">gt", "%pct", "@a", "`a`", "'q'", "\"q\"", "#a", "[a]", "{a}", ",a"]
        {
            assert_eq!(style(s, false), Style::SingleQuoted, "{s}");
        }
    }

    #[test]
    fn dash_question_mark_and_colon_lead_only_when_a_space_follows() {
        for s in ["- item", "? x", ": x", "-"] {
            assert_eq!(style(s, false), Style::SingleQuoted, "{s}");
        }
        for s in ["-item", "?x", ":x"] {
            assert_eq!(style(s, false), Style::Plain, "{s}");
        }
    }

    #[test]
    fn a_document_marker_at_the_start_is_single_quoted() {
        assert_eq!(style("---x", false), Style::SingleQuoted);
        assert_eq!(style("...x", false), Style::SingleQuoted);
        assert_eq!(style("..x", false), Style::Plain);
    }

    #[test]
    fn colon_space_and_space_hash_inside_are_single_quoted() {
        assert_eq!(style("a: b", false), Style::SingleQuoted);
        assert_eq!(style("a:", false), Style::SingleQuoted);
        assert_eq!(style("a #b", false), Style::SingleQuoted);
        assert_eq!(style("a:b", false), Style::Plain);
        assert_eq!(style("a#b", false), Style::Plain);
    }

    #[test]
    fn flow_indicators_inside_stay_plain() {
        assert_eq!(style("a, [b] {c}", false), Style::Plain);
    }

    #[test]
    fn leading_or_trailing_spaces_are_single_quoted() {
        assert_eq!(style(" leading", false), Style::SingleQuoted);
        assert_eq!(style("trailing ", false), Style::SingleQuoted);
    }

    #[test]
    fn tabs_controls_byte_order_marks_and_astral_characters_are_double_quoted() {
        for s in ["tab\there", "bell\u{7}", "bom\u{feff}", "emoji 😀", "cr\rx", "nel\u{85}"] {
            assert_eq!(style(s, false), Style::DoubleQuoted, "{s:?}");
        }
    }

    #[test]
    fn other_non_ascii_text_stays_plain() {
        assert_eq!(style("unicode é ü 漢字 nbsp\u{a0}x", false), Style::Plain);
    }

    #[test]
    fn a_line_feed_asks_for_a_literal_block() {
        assert_eq!(style("a\nb", false), Style::Literal);
        assert_eq!(style("break\n space", false), Style::Literal);
    }

    #[test]
    fn a_line_feed_after_a_space_or_a_final_space_falls_back_to_double_quotes() {
        assert_eq!(style("space \nbreak", false), Style::DoubleQuoted);
        assert_eq!(style("a\nb ", false), Style::DoubleQuoted);
    }

    #[test]
    fn a_line_separator_is_single_quoted_unless_a_space_touches_it() {
        assert_eq!(style("ls\u{2028}ps", false), Style::SingleQuoted);
        assert_eq!(style("a \u{2028}b", false), Style::DoubleQuoted);
        assert_eq!(style("a\u{2028} b", false), Style::DoubleQuoted);
    }

    #[test]
    fn a_simple_key_is_never_a_block() {
        assert_eq!(style("a\nb", true), Style::DoubleQuoted);
    }

    #[test]
    fn keys_over_128_bytes_or_with_line_breaks_are_not_simple() {
        assert!(is_simple_key(&"é".repeat(64)));
        assert!(!is_simple_key(&"é".repeat(65)));
        assert!(!is_simple_key("a\nb"));
    }
}
