//! Where the pod may run: tolerations, and node, pod and anti-pod affinity with their
//! node selector terms and label selectors.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use model_orchestra_api::names::{self, is_dns_label, is_qualified_name};

use super::{err, not_supported, one_of};
use crate::error::InputError;
use crate::validate::check_labels;
use crate::validate::field_path::FieldPath;

/// The fields of an affinity's hard and soft terms (node, pod and anti-pod affinity alike).
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

pub(super) fn tolerations(tolerations: &[Toleration], field: &FieldPath) -> Result<(), InputError> {
    for (i, t) in tolerations.iter().enumerate() {
        let at = field.index(i);
        let key = t.key.as_deref().unwrap_or_default();
        let operator = t.operator.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        if !key.is_empty() && !is_qualified_name(key) {
            return err(at.field("key"), format!("`{key}` is not {}", names::QUALIFIED_NAME_RULE));
        }
        if key.is_empty() && operator != "Exists" {
            return err(at.field("operator"), "must be Exists when key is empty (which matches every taint)");
        }
        match operator {
            "" | "Equal" if !names::is_label_value(value) => {
                return err(at.field("value"), format!("`{value}` is not {}", names::LABEL_VALUE_RULE))
            }
            "" | "Equal" => {}
            "Exists" if !value.is_empty() => return err(at.field("value"), "must be empty when operator is Exists"),
            "Exists" => {}
            other => return not_supported(other, "Equal or Exists", &at.field("operator")),
        }
        if !effect.is_empty() {
            one_of(effect, &["NoSchedule", "PreferNoSchedule", "NoExecute"], &at.field("effect"))?;
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            return err(at.field("effect"), "must be NoExecute when tolerationSeconds is set");
        }
    }
    Ok(())
}

pub(super) fn affinity(a: &Affinity, field: &FieldPath) -> Result<(), InputError> {
    if let Some(node) = &a.node_affinity {
        let at = field.field("nodeAffinity");
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            let path = at.field(REQUIRED).field("nodeSelectorTerms");
            if required.node_selector_terms.is_empty() {
                return err(&path, "must have at least one term");
            }
            for (i, term) in required.node_selector_terms.iter().enumerate() {
                node_selector_term(term, &path.index(i))?;
            }
        }
        for (i, p) in node.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
            let path = at.field(PREFERRED).index(i);
            weight(p.weight, &path)?;
            node_selector_term(&p.preference, &path.field("preference"))?;
        }
    }
    for (name, terms) in [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ] {
        let Some((required, preferred)) = terms else { continue };
        let at = field.field(name);
        for (i, t) in required.iter().flatten().enumerate() {
            pod_affinity_term(t, &at.field(REQUIRED).index(i))?;
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let path = at.field(PREFERRED).index(i);
            weight(w.weight, &path)?;
            pod_affinity_term(&w.pod_affinity_term, &path.field("podAffinityTerm"))?;
        }
    }
    Ok(())
}

fn weight(w: i32, path: &FieldPath) -> Result<(), InputError> {
    if (1..=100).contains(&w) {
        Ok(())
    } else {
        err(path.field("weight"), format!("{w} must be between 1 and 100"))
    }
}

fn node_selector_term(term: &NodeSelectorTerm, path: &FieldPath) -> Result<(), InputError> {
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        requirement(r, &path.field("matchExpressions").index(i), true)?;
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        let at = path.field("matchFields").index(i);
        one_of(&r.key, &["metadata.name"], &at.field("key"))?;
        one_of(&r.operator, &["In", "NotIn"], &at.field("operator"))?;
        if r.values.as_ref().is_none_or(|v| v.len() != 1) {
            return err(at.field("values"), "must have exactly one value");
        }
    }
    Ok(())
}

/// A node selector's requirement (`node`), or a label selector's (no `Gt` and `Lt`).
fn requirement(r: &NodeSelectorRequirement, at: &FieldPath, node: bool) -> Result<(), InputError> {
    if !is_qualified_name(&r.key) {
        return err(at.field("key"), format!("`{}` is not {}", r.key, names::QUALIFIED_NAME_RULE));
    }
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => err(at.field("values"), "must have at least one value for In and NotIn"),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            err(at.field("values"), "must be empty for Exists and DoesNotExist")
        }
        "Gt" | "Lt" if node && (values.len() != 1 || values[0].parse::<i64>().is_err()) => {
            err(at.field("values"), "must be one integer for Gt and Lt")
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" => values.iter().enumerate().try_for_each(|(i, v)| {
            if names::is_label_value(v) {
                Ok(())
            } else {
                err(at.field("values").index(i), format!("`{v}` is not {}", names::LABEL_VALUE_RULE))
            }
        }),
        "Gt" | "Lt" if node => Ok(()),
        // A label selector's list has no "or": the message has always read so.
        other if node => not_supported(other, "In, NotIn, Exists, DoesNotExist, Gt or Lt", &at.field("operator")),
        other => not_supported(other, "In, NotIn, Exists, DoesNotExist", &at.field("operator")),
    }
}

fn pod_affinity_term(t: &PodAffinityTerm, path: &FieldPath) -> Result<(), InputError> {
    if t.topology_key.is_empty() || !is_qualified_name(&t.topology_key) {
        return err(path.field("topologyKey"), format!("`{}` is not {}", t.topology_key, names::QUALIFIED_NAME_RULE));
    }
    if let Some(s) = &t.label_selector {
        label_selector(s, &path.field("labelSelector"))?;
    }
    if let Some(s) = &t.namespace_selector {
        label_selector(s, &path.field("namespaceSelector"))?;
    }
    for (i, ns) in t.namespaces.iter().flatten().enumerate() {
        if !is_dns_label(ns) {
            return err(path.field("namespaces").index(i), format!("`{ns}` is not a namespace name"));
        }
    }
    Ok(())
}

fn label_selector(s: &LabelSelector, path: &FieldPath) -> Result<(), InputError> {
    check_labels(s.match_labels.as_ref().unwrap_or(&BTreeMap::new()), path.field("matchLabels").as_str())?;
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let r = NodeSelectorRequirement { key: e.key.clone(), operator: e.operator.clone(), values: e.values.clone() };
        requirement(&r, &path.field("matchExpressions").index(i), false)?;
    }
    Ok(())
}
