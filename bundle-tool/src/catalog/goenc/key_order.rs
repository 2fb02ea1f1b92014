//! The order yaml.v2 writes a map's keys in, as seen in its output: character by character
//! until two differ; there a letter sorts after anything else, two letters by code point,
//! and otherwise the runs of digits starting there compare as numbers, so `a9` < `a10`
//! and `a_b` < `a9` < `aB`.
//!
//! The order is not total for keys whose digit runs are followed by letters (`a1a` < `a9` <
//! `a10` < `a1a`); yaml.v2 then writes them in an order that depends on how Go's map
//! handed them over, so no writer can match it. Letters are Rust's alphabetic characters
//! and digits ASCII ones, which can differ from Go's Unicode tables outside ASCII.

use std::cmp::Ordering;

pub(super) fn compare(a: &str, b: &str) -> Ordering {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let Some(at) = a.iter().zip(&b).position(|(x, y)| x != y) else {
        return a.len().cmp(&b.len());
    };
    let (x, y) = (a[at], b[at]);
    match (x.is_alphabetic(), y.is_alphabetic()) {
        (true, true) => return x.cmp(&y),
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        (false, false) => {}
    }
    let (x_run, y_run) = (digit_run(&a[at..]), digit_run(&b[at..]));
    // Inside a number whose shared leading digits are not all zeros, the longer remainder
    // is the larger number; otherwise leading zeros do not count, and the shorter run of
    // equal value sorts first.
    let inside_number = a[..at].iter().rev().take_while(|c| c.is_ascii_digit()).any(|&c| c != '0');
    let by_number = if inside_number {
        x_run.len().cmp(&y_run.len()).then_with(|| x_run.cmp(y_run))
    } else {
        value_order(x_run, y_run).then_with(|| x_run.len().cmp(&y_run.len()))
    };
    by_number.then_with(|| x.cmp(&y))
}

/// The ASCII digits at the start of `chars`.
fn digit_run(chars: &[char]) -> &[char] {
    let end = chars.iter().position(|c| !c.is_ascii_digit()).unwrap_or(chars.len());
    &chars[..end]
}

/// Digit runs by numeric value (an empty run is zero).
fn value_order(x: &[char], y: &[char]) -> Ordering {
    let significant = |run: &[char]| -> Vec<char> { run.iter().copied().skip_while(|&c| c == '0').collect() };
    let (x, y) = (significant(x), significant(y));
    x.len().cmp(&y.len()).then_with(|| x.cmp(&y))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(keys: &[&str]) -> Vec<String> {
        let mut keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        keys.sort_by(|a, b| compare(a, b));
        keys
    }

    #[test]
    fn letters_sort_by_code_point() {
        assert_eq!(sorted(&["b", "a", "B", "é"]), ["B", "a", "b", "é"]);
    }

    #[test]
    fn a_non_letter_sorts_before_a_letter() {
        assert_eq!(sorted(&["aB", "a_b", "a.b", "a-b"]), ["a-b", "a.b", "a_b", "aB"]);
    }

    #[test]
    fn digit_runs_compare_as_numbers() {
        assert_eq!(sorted(&["a10", "a9", "a100", "a0"]), ["a0", "a9", "a10", "a100"]);
    }

    #[test]
    fn a_difference_inside_a_number_compares_the_whole_numbers() {
        assert_eq!(sorted(&["a100", "a12"]), ["a12", "a100"]);
    }

    #[test]
    fn leading_zeros_do_not_count_but_break_ties_by_length() {
        assert_eq!(sorted(&["a01", "a1", "a002"]), ["a1", "a01", "a002"]);
    }

    #[test]
    fn a_prefix_sorts_first() {
        assert_eq!(sorted(&["ab", "a"]), ["a", "ab"]);
    }
}
