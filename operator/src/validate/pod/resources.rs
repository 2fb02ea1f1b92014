//! The container's resources: names, quantities, requests within limits, and extended
//! resources (whole numbers, never overcommitted).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use model_orchestra_api::names::is_qualified_name;

use super::err;
use crate::error::InputError;
use crate::validate::field_path::FieldPath;
use crate::validate::quantity;

/// Whether a resource name is one of Kubernetes' own (not an extended resource).
fn is_standard_resource(name: &str) -> bool {
    ["cpu", "memory", "ephemeral-storage", "storage"].contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.")
        || name.starts_with("limits.")
}

pub(super) fn resources(r: &ResourceRequirements, field: &FieldPath) -> Result<(), InputError> {
    if r.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return err(field.field("claims"), "the pod declares no resourceClaims for a container to use");
    }
    let mut parsed = BTreeMap::new();
    for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
        for (name, q) in map.iter().flatten() {
            let at = field.field(which).key(name);
            let standard = is_standard_resource(name);
            let qualified = is_qualified_name(name) && (standard || name.contains('/'));
            if !qualified
                || name.starts_with("kubernetes.io/")
                || (name.contains('/')
                    && name.split('/').next().is_some_and(|d| d == "kubernetes.io" || d.ends_with(".kubernetes.io")))
            {
                return err(&at, "not a resource name: cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource such as nvidia.com/gpu");
            }
            let value = quantity::parse(&q.0).map_err(|m| InputError::new(&at, m))?;
            if value.value < 0.0 {
                return err(&at, format!("`{}` must not be negative", q.0));
            }
            if !standard && !value.integer {
                return err(&at, format!("`{}`: an extended resource must be a whole number", q.0));
            }
            parsed.insert((which, name.as_str()), value.value);
        }
    }
    for ((which, name), request) in &parsed {
        if *which != "requests" {
            continue;
        }
        let limit = parsed.get(&("limits", name));
        if let Some(limit) = limit {
            if request > limit {
                return err(
                    field.field("requests").key(name),
                    format!(
                        "must be less than or equal to the limit ({})",
                        r.limits.as_ref().and_then(|l| l.get(*name)).map(|q| q.0.as_str()).unwrap_or_default()
                    ),
                );
            }
        }
        // Extended resources cannot be overcommitted: a request needs an equal limit.
        if !is_standard_resource(name) && limit != Some(request) {
            return err(
                field.field("limits").key(name),
                format!(
                    "an extended resource's limit must be set and equal its request ({})",
                    r.requests.as_ref().and_then(|l| l.get(*name)).map(|q| q.0.as_str()).unwrap_or_default()
                ),
            );
        }
    }
    Ok(())
}
