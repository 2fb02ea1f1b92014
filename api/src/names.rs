//! The syntax of Kubernetes names and keys, one definition each (the chart's generated
//! names, the CR's labels, hosts and env names, and bundle-tool's package names all use
//! these).

/// Longest DNS label (RFC 1123), label value, and Service / container name.
pub const MAX_LABEL: usize = 63;
/// The longest application name: its pods' component label `application-<name>` is a label
/// value of at most 63 characters.
pub const MAX_APPLICATION_NAME: usize = MAX_LABEL - "application-".len();

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

/// A subdomain, optionally starting with a `*.` wildcard label (Ingress hosts).
pub fn is_wildcard_dns_subdomain(s: &str) -> bool {
    match s.strip_prefix("*.") {
        Some(rest) => is_dns_subdomain(rest),
        None => is_dns_subdomain(s),
    }
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

/// An IANA service name (a named container port): 1–15 of `[a-z0-9-]`, with a letter, not
/// starting or ending with `-`, no `--`.
pub fn is_port_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// An environment variable name: printable ASCII other than `=` (Kubernetes ≥ 1.34).
pub fn is_env_var_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'=')
}

/// A ConfigMap or Secret key: `[-._a-zA-Z0-9]+`, at most 253, not `.` or `..`.
pub fn is_config_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s != "."
        && s != ".."
}

/// An HTTP header name (an RFC 7230 token).
pub fn is_http_header_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// What a name that fails [`is_dns_label`] should look like, for messages.
pub const DNS_LABEL_RULE: &str =
    "a DNS label: at most 63 lower-case letters, digits and `-`, starting and ending with a letter or digit";
pub const DNS_SUBDOMAIN_RULE: &str = "a DNS subdomain: dot-separated DNS labels, at most 253 characters";
pub const LABEL_VALUE_RULE: &str =
    "a label value: at most 63 of A-Z a-z 0-9 - _ ., starting and ending with a letter or digit";
pub const QUALIFIED_NAME_RULE: &str =
    "a qualified name ([prefix/]name: a DNS subdomain, `/`, then a label value that is not empty)";
pub const PORT_NAME_RULE: &str = "an IANA service name: 1–15 lower-case letters, digits and `-`, with a letter, no `--`, not starting or ending with `-`";

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn port_names_are_iana_service_names() {
        assert!(is_port_name("http"));
        assert!(is_port_name("h2c-80"));
        assert!(!is_port_name("8080"), "needs a letter");
        assert!(!is_port_name("a--b"));
        assert!(!is_port_name("management-ports"), "16 characters");
    }

    #[test]
    fn env_names_are_printable_ascii_without_equals() {
        assert!(is_env_var_name("1BAD.NAME-ok"));
        assert!(!is_env_var_name("1BAD=NAME"));
        assert!(!is_env_var_name("tab\tname"));
        assert!(!is_env_var_name("é"));
        assert!(!is_env_var_name(""));
    }

    #[test]
    fn ingress_hosts_may_start_with_a_wildcard() {
        assert!(is_wildcard_dns_subdomain("*.example.com"));
        assert!(!is_wildcard_dns_subdomain("a.*.example.com"));
    }
}
