//! Generated names and the Kubernetes syntax rules they must obey. A name that would not
//! fit is an input error naming the field to change, never a silent truncation that could
//! make two objects collide.

use crate::error::InputError;

/// Longest DNS label (RFC 1123), label value, and Service / container name.
pub const MAX_LABEL: usize = 63;

/// Helm's `fullname`: `fullnameOverride`; else the release name if it already contains the
/// chart name; else `<release>-<chart name>`; cut to 63 characters without a trailing `-`.
pub fn fullname(release: &str, chart_name: &str, name_override: &str, fullname_override: &str) -> String {
    let full = if !fullname_override.is_empty() {
        fullname_override.to_string()
    } else {
        let name = if name_override.is_empty() { chart_name } else { name_override };
        if release.contains(name) {
            release.to_string()
        } else {
            format!("{release}-{name}")
        }
    };
    trunc63(&full)
}

fn trunc63(s: &str) -> String {
    let cut: String = s.chars().take(MAX_LABEL).collect();
    cut.trim_end_matches('-').to_string()
}

/// RFC 1123 label: lower-case alphanumerics and `-`, starting and ending alphanumeric.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LABEL
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A label value: empty, or ≤63 of `[A-Za-z0-9_.-]` starting and ending alphanumeric.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= MAX_LABEL
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric())
}

/// A label or annotation key: `[prefix/]name`, prefix a DNS subdomain, name like a
/// non-empty label value.
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    prefix.is_none_or(is_dns_subdomain) && !name.is_empty() && is_label_value(name)
}

/// Checks that a generated object name fits a DNS label; `field` is what the user changes.
pub fn check_generated(name: &str, field: &str) -> Result<(), InputError> {
    if name.len() > MAX_LABEL {
        return Err(InputError::new(
            field,
            format!(
                "the generated name `{name}` is {} characters; Kubernetes allows {MAX_LABEL}: choose a shorter name \
                 (or set spec.fullnameOverride)",
                name.len()
            ),
        ));
    }
    if !is_dns_label(name) {
        return Err(InputError::new(
            field,
            format!("the generated name `{name}` is not a DNS label (lower-case letters, digits and `-`, starting and ending with a letter or digit)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fullname_keeps_a_release_that_contains_the_chart_name() {
        assert_eq!(fullname("my-model-orchestra", "model-orchestra", "", ""), "my-model-orchestra");
    }

    #[test]
    fn fullname_appends_the_chart_name_otherwise() {
        assert_eq!(fullname("prod", "model-orchestra", "", ""), "prod-model-orchestra");
        assert_eq!(fullname("prod", "model-orchestra", "mo", ""), "prod-mo");
    }

    #[test]
    fn fullname_override_wins_and_is_cut_to_63_without_trailing_dash() {
        assert_eq!(fullname("prod", "model-orchestra", "x", "custom"), "custom");
        let long = format!("{}-b", "a".repeat(62));
        assert_eq!(fullname("r", "c", "", &long), "a".repeat(62));
    }

    #[test]
    fn label_syntax() {
        assert!(is_dns_label("hello-world"));
        assert!(!is_dns_label("Hello"));
        assert!(!is_dns_label("-a"));
        assert!(is_label_value("NVIDIA-GeForce-RTX-3060"));
        assert!(!is_label_value("a b"));
        assert!(is_qualified_name("nvidia.com/gpu.product"));
        assert!(!is_qualified_name("bad key"));
    }
}
