//! Numbers as Go spells a float64. The digits are the shortest that read back as the same
//! value (what Go's `strconv.FormatFloat` gives for precision -1, and what Rust's `{:e}`
//! gives); only where they are placed differs between Go's formats.

/// A finite, non-negative value as its shortest digits and the power of ten of the first
/// digit: 1234.5 is `12345` and 3 (1.2345 × 10³).
struct Digits {
    digits: String,
    exponent: i32,
}

impl Digits {
    fn of(f: f64) -> Digits {
        if f == 0.0 {
            return Digits { digits: "0".into(), exponent: 0 };
        }
        // `{:e}` prints as few digits as read back as `f` (`1e0`, `1.5e-7`), but when two
        // such spellings exist it need not pick the nearer one, as Go does: the value
        // correctly rounded to that many digits is the nearer one, if it reads back.
        let shortest = Digits::parse(&format!("{:e}", f.abs()));
        let rounded = format!("{:.*e}", shortest.digits.len() - 1, f.abs());
        match rounded.parse::<f64>() {
            Ok(back) if back == f.abs() => Digits::parse(&rounded),
            _ => shortest,
        }
    }

    /// Rust's `d.ddde±x`.
    fn parse(text: &str) -> Digits {
        let (mantissa, exponent) = text.split_once('e').expect("`{:e}` always writes an exponent");
        Digits {
            digits: mantissa.replace('.', ""),
            exponent: exponent.parse().expect("`{:e}` writes a decimal exponent"),
        }
    }

    /// Go's `'e'`: one digit before the point, the exponent signed and at least two digits.
    fn scientific(&self) -> String {
        let (first, rest) = self.digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let sign = if self.exponent < 0 { '-' } else { '+' };
        format!("{first}{point}{rest}e{sign}{:02}", self.exponent.unsigned_abs())
    }

    /// Go's `'f'`: no exponent, as many zeros as the position of the digits needs.
    fn positional(&self) -> String {
        let count = self.digits.len() as i32;
        if self.exponent < 0 {
            format!("0.{}{}", "0".repeat((-self.exponent - 1) as usize), self.digits)
        } else if self.exponent + 1 >= count {
            format!("{}{}", self.digits, "0".repeat((self.exponent + 1 - count) as usize))
        } else {
            let (whole, fraction) = self.digits.split_at(self.exponent as usize + 1);
            format!("{whole}.{fraction}")
        }
    }
}

/// Go's `strconv.FormatFloat(f, fmt, -1, 64)` for `fmt` `'e'` (`1.5e+06`), `'f'`
/// (`1500000`) and `'g'`, the form Go's `%v` prints: `'e'` when the exponent is below -4
/// or 6 and above (`1e+06`, `1e-05`), `'f'` otherwise (`123456`, `0.0001`). Any other
/// letter is taken as `'g'`.
pub fn format_float(f: f64, fmt: char) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    let digits = Digits::of(f);
    let body = match fmt {
        'e' => digits.scientific(),
        'f' => digits.positional(),
        _ if (-4..6).contains(&digits.exponent) => digits.positional(),
        _ => digits.scientific(),
    };
    if f.is_sign_negative() {
        format!("-{body}")
    } else {
        body
    }
}

/// A JSON number as Go's encoding/json writes it back after decoding it: integers as
/// they are, other values as a float64 in `'f'` form, or in `'e'` form with a one-digit
/// exponent kept short (`1e-7`, `1e+21`) below 1e-6 and from 1e21 on.
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let magnitude = f.abs();
    if magnitude == 0.0 || (1e-6..1e21).contains(&magnitude) {
        return format_float(f, 'f');
    }
    let text = format_float(f, 'e');
    match text.split_once("e-0") {
        Some((mantissa, exponent)) => format!("{mantissa}e-{exponent}"),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(f: f64) -> String {
        go_number(&serde_json::Number::from_f64(f).unwrap())
    }

    #[test]
    fn e_format_has_one_leading_digit_and_a_signed_two_digit_exponent() {
        assert_eq!(format_float(1500000.0, 'e'), "1.5e+06");
        assert_eq!(format_float(1.0, 'e'), "1e+00");
        assert_eq!(format_float(0.0, 'e'), "0e+00");
        assert_eq!(format_float(-2.5e-300, 'e'), "-2.5e-300");
    }

    #[test]
    fn f_format_writes_every_digit_without_an_exponent() {
        assert_eq!(format_float(1e20, 'f'), "100000000000000000000");
        assert_eq!(format_float(1.5e-7, 'f'), "0.00000015");
        assert_eq!(format_float(123.25, 'f'), "123.25");
        assert_eq!(format_float(-0.0, 'f'), "-0");
    }

    #[test]
    fn g_format_switches_to_an_exponent_below_1e_minus_4_and_from_1e6() {
        assert_eq!(format_float(123456.0, 'g'), "123456");
        assert_eq!(format_float(1e6, 'g'), "1e+06");
        assert_eq!(format_float(1234567.5, 'g'), "1.2345675e+06");
        assert_eq!(format_float(0.0001, 'g'), "0.0001");
        assert_eq!(format_float(0.00001, 'g'), "1e-05");
    }

    #[test]
    fn json_numbers_keep_integers_and_write_floats_positionally_between_1e_minus_6_and_1e21() {
        assert_eq!(go_number(&serde_json::Number::from(-42)), "-42");
        assert_eq!(go_number(&serde_json::Number::from(u64::MAX)), "18446744073709551615");
        assert_eq!(json(0.0), "0");
        assert_eq!(json(1.5), "1.5");
        assert_eq!(json(1e20), "100000000000000000000");
        assert_eq!(json(0.000001), "0.000001");
    }

    #[test]
    fn json_numbers_outside_that_range_use_a_short_exponent() {
        assert_eq!(json(1e21), "1e+21");
        assert_eq!(json(1.5e-7), "1.5e-7");
        assert_eq!(json(-1e-10), "-1e-10");
    }
}
