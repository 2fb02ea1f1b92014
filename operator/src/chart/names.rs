//! Generated names and the Kubernetes syntax rules they must obey. A name that would not
//! fit is an input error naming the field to change, never a silent truncation that could
//! make two objects collide.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::InputError;
use model_orchestra_api::names::{is_dns_label, MAX_LABEL};

/// An object's name and labels, as the `metadata` partial prints them (a small object,
/// because Handlebars clones a partial's context).
#[derive(Serialize, Clone)]
pub(super) struct Meta {
    pub(super) name: String,
    pub(super) labels: BTreeMap<String, String>,
}

/// Helm's `fullname`: `fullnameOverride`; else the release name if it already contains the
/// chart name; else `<release>-<chart name>`; cut to 63 characters without a trailing `-`.
pub(super) fn fullname(release: &str, chart_name: &str, name_override: &str, fullname_override: &str) -> String {
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

/// Checks that a generated object name fits a DNS label; `field` is what the user changes.
pub(super) fn check_generated(name: &str, field: &str) -> Result<(), InputError> {
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
}
