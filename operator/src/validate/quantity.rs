//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`), parsed by the grammar the API
//! documents: a signed decimal number, then a binary-SI suffix (`Ki`…`Ei`), a decimal-SI
//! suffix (`n`, `u`, `m`, ``, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent
//! (`e`/`E` and a signed integer). A quantity k8s-openapi accepts as any string must be
//! one of these for the API server to accept it.

/// A parsed quantity: its value (approximate, for comparisons) and whether it is a whole
/// number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Parsed {
    pub value: f64,
    pub integer: bool,
}

/// Parses `s`, or says what is wrong with it.
pub(super) fn parse(s: &str) -> Result<Parsed, String> {
    let invalid = || format!("`{s}` is not a quantity (a number with an optional suffix, e.g. 500m, 1.5Gi, 2)");
    let bytes = s.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let start = i;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        i += 1;
    }
    let number = &s[start..i];
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(invalid());
    }
    let magnitude: f64 = number.parse().map_err(|_| invalid())?;
    let suffix = &s[i..];
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => {
            let exponent = &e[1..];
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            let exponent: i32 = exponent.parse().map_err(|_| invalid())?;
            10f64.powi(exponent)
        }
        _ => return Err(invalid()),
    };
    let value = if negative { -magnitude * factor } else { magnitude * factor };
    Ok(Parsed { value, integer: (value - value.round()).abs() < 1e-9 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_forms_parse() {
        assert_eq!(parse("500m").unwrap().value, 0.5);
        assert_eq!(parse("1Gi").unwrap().value, 1073741824.0);
        assert_eq!(parse("2e3").unwrap().value, 2000.0);
        assert_eq!(parse("-1").unwrap().value, -1.0);
        assert!(parse("1.5").is_ok());
        assert!(parse(".5").is_ok());
        assert!(!parse("0.5").unwrap().integer);
        assert!(parse("4").unwrap().integer);
    }

    #[test]
    fn anything_else_is_not_a_quantity() {
        for bad in ["", "abc", "1 Gi", "1GB", "1..5", "m", "1e", "1e1.5", "Gi"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
