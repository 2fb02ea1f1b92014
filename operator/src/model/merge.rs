//! Helm's merge of values, on the typed values: maps merge key by key (recursively), lists
//! and scalars from the overlay replace the base, and an absent (or `null`) overlay keeps
//! the base. The CR's `spec` is merged over `values.yaml`, and each application over
//! `applicationTemplate`, without leaving the types.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, PodSecurityContext, Probe, ResourceRequirements, SecurityContext};
use serde_json::Value;

use model_orchestra_api::kinds::keda::{Advanced, Fallback, HpaConfig, ScalingModifiers};
use model_orchestra_api::values::{
    DistributedLlama, DllamaDownloader, Downloader, Engine, GatewayConfig, Image, IngressValues, MetricTarget,
    ModelCache, ModelGateway, OllamaEngine, OllamaRegistry, Promotion, ReaderConfig, Scaling, ScalingSpec,
    ServiceAccountValues, ServiceValues, Sleep,
};

/// Merging `overlay` into `self`, as Helm merges values.
pub(crate) trait Merge {
    fn merge_from(&mut self, overlay: Self);

    /// Whether this overlay value means "absent" (JSON `null`): not added to a map.
    fn is_absent(&self) -> bool {
        false
    }
}

impl<T: Merge> Merge for Option<T> {
    fn merge_from(&mut self, overlay: Self) {
        match (self.as_mut(), overlay) {
            (_, None) => {}
            (Some(base), Some(overlay)) => Merge::merge_from(base, overlay),
            (None, overlay) => *self = overlay,
        }
    }
}

/// Maps merge key by key.
impl<V: Merge> Merge for BTreeMap<String, V> {
    fn merge_from(&mut self, overlay: Self) {
        for (k, v) in overlay {
            match self.get_mut(&k) {
                Some(base) => Merge::merge_from(base, v),
                None if !v.is_absent() => {
                    self.insert(k, v);
                }
                None => {}
            }
        }
    }
}

/// Untyped values (the open-ended `readerConfig` and `gateway.config` keys): objects merge
/// key by key, `null` keeps the base, anything else replaces it.
impl Merge for Value {
    fn merge_from(&mut self, overlay: Self) {
        match (self, overlay) {
            (_, Value::Null) => {}
            (Value::Object(base), Value::Object(overlay)) => {
                for (k, v) in overlay {
                    match base.get_mut(&k) {
                        Some(slot) => Merge::merge_from(slot, v),
                        None if !v.is_null() => {
                            base.insert(k, v);
                        }
                        None => {}
                    }
                }
            }
            (base, overlay) => *base = overlay,
        }
    }

    fn is_absent(&self) -> bool {
        self.is_null()
    }
}

/// Scalars, enums and lists: the overlay replaces the base.
macro_rules! replace {
    ($($ty:ty),* $(,)?) => {
        $(impl Merge for $ty {
            fn merge_from(&mut self, overlay: Self) {
                *self = overlay;
            }
        })*
    };
}

replace!(
    String,
    bool,
    i32,
    i64,
    model_orchestra_api::values::PullPolicy,
    model_orchestra_api::values::ServiceType,
    model_orchestra_api::values::Device,
    model_orchestra_api::values::MetricName,
    model_orchestra_api::values::BufferFloatType,
    model_orchestra_api::values::TakeoffEngine,
    model_orchestra_api::kinds::keda::FallbackBehavior
);
// A models volume replaces the template's whole; a Secret reference is one value.
replace!(
    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString,
    k8s_openapi::api::core::v1::Volume,
    k8s_openapi::api::core::v1::SecretKeySelector
);

impl<T> Merge for Vec<T> {
    fn merge_from(&mut self, overlay: Self) {
        *self = overlay;
    }
}

/// Kubernetes objects: their own deep merge, whose lists are atomic (replaced) in every
/// type merged here.
macro_rules! kubernetes {
    ($($ty:ty),* $(,)?) => {
        $(impl Merge for $ty {
            fn merge_from(&mut self, overlay: Self) {
                k8s_openapi::DeepMerge::merge_from(self, overlay);
            }
        })*
    };
}

kubernetes!(
    PodSecurityContext,
    SecurityContext,
    Affinity,
    k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior,
    k8s_openapi::api::apps::v1::DeploymentStrategy
);

/// A probe merges field by field, except its handler: a probe that names a handler
/// (`exec`, `httpGet`, `tcpSocket`, `grpc`) replaces the base's. Helm's merge would keep
/// both, and the API server refuses a probe with two handlers ("may not specify more than
/// 1 handler type"), so no working values depended on that.
impl Merge for Probe {
    fn merge_from(&mut self, overlay: Self) {
        if overlay.exec.is_some()
            || overlay.http_get.is_some()
            || overlay.tcp_socket.is_some()
            || overlay.grpc.is_some()
        {
            self.exec = None;
            self.http_get = None;
            self.tcp_socket = None;
            self.grpc = None;
        }
        k8s_openapi::DeepMerge::merge_from(self, overlay);
    }
}

/// `limits` and `requests` merge by resource name; `claims`, a list, is replaced (Kubernetes'
/// own merge would merge it by name).
impl Merge for ResourceRequirements {
    fn merge_from(&mut self, overlay: Self) {
        if overlay.claims.is_some() {
            self.claims = overlay.claims;
        }
        let quantities = |base: &mut Option<BTreeMap<String, _>>, overlay: Option<BTreeMap<String, _>>| match (
            base.as_mut(),
            overlay,
        ) {
            (_, None) => {}
            (Some(b), Some(o)) => b.extend(o),
            (None, o) => *base = o,
        };
        quantities(&mut self.limits, overlay.limits);
        quantities(&mut self.requests, overlay.requests);
    }
}

/// Structs merge field by field.
macro_rules! fields {
    ($($ty:ty { $($field:ident),* $(,)? })*) => {
        $(impl Merge for $ty {
            fn merge_from(&mut self, overlay: Self) {
                $(Merge::merge_from(&mut self.$field, overlay.$field);)*
            }
        })*
    };
}

fields! {
    ServiceAccountValues { create, automount, annotations, name }
    Image { repository, pull_policy, tag }
    ServiceValues { type_, ports }
    IngressValues { enabled, class_name, annotations, hosts, tls }
    GatewayConfig { internal_port, other }
    ReaderConfig {
        model_name, device, consumer_group, buffer_requests, access_token, log_level, cuda_visible_devices, max_batch_size,
        tensor_parallel, quant_type, max_sequence_length, disable_cuda_graph, cuda_graph_cache_capacity, page_cache_size,
        prefill_chunk_size, quantize_cache_bits, ssd_cache_size, constrained_decoding_backend, lmfe_max_consecutive_whitespaces,
        reader_log_as_json, loras, enable_document_processing, other,
    }
    Scaling { enabled, metric_target, annotations, spec }
    MetricTarget { name, value }
    ScalingSpec { polling_interval, initial_cooldown_period, cooldown_period, idle_replica_count, min_replica_count, max_replica_count, fallback, advanced }
    Fallback { failure_threshold, replicas, behavior }
    Advanced { restore_to_original_replica_count, horizontal_pod_autoscaler_config, scaling_modifiers }
    HpaConfig { name, behavior }
    ScalingModifiers { formula, target, activation_target, metric_type }
    ModelCache { enabled, size, storage_class_name, access_modes, downloader }
    Downloader { image, command, env, token_secret, backoff_limit }
    Engine { takeoff, distributed_llama, ollama }
    OllamaEngine { models, registry, image, port, stall_seconds }
    OllamaRegistry { host, insecure }
    Sleep { enabled, idle_seconds, hold_seconds, max_held_requests }
    ModelGateway { image, resources }
    DistributedLlama { nodes, image, nthreads, buffer_float_type, max_seq_len, port, downloader }
    DllamaDownloader { image, command }
    Promotion {
        enabled, prompt, expect, max_tokens, timeout_seconds, period_seconds, success_threshold, failure_threshold,
        deadline_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The typed merge agrees with Helm's merge of the same values as JSON.
    fn agrees(base: Value, overlay: Value) {
        let mut typed: super::super::ApplicationValues = serde_json::from_value(base.clone()).unwrap();
        Merge::merge_from(&mut typed, serde_json::from_value(overlay.clone()).unwrap());
        let mut json = base;
        Merge::merge_from(&mut json, overlay);
        assert_eq!(serde_json::to_value(&typed).unwrap(), json);
    }

    #[test]
    fn maps_merge_recursively_and_lists_replace() {
        agrees(
            json!({"podLabels": {"a": "1", "b": "2"}, "ports": [{"containerPort": 1}], "livenessProbe": {"httpGet": {"path": "/h", "port": 1}}}),
            json!({"podLabels": {"b": "3"}, "ports": [{"containerPort": 2}], "livenessProbe": {"initialDelaySeconds": 5}}),
        );
    }

    #[test]
    fn an_absent_or_null_overlay_keeps_the_base() {
        agrees(
            json!({"replicaCount": 2, "readerConfig": {"modelName": "m", "custom": {"x": 1}}}),
            json!({"readerConfig": {"custom": null, "other": null}}),
        );
    }

    #[test]
    fn a_probe_with_another_handler_replaces_the_handler_and_keeps_the_timings() {
        let mut base: Probe =
            serde_json::from_value(json!({"httpGet": {"path": "/h", "port": 1}, "periodSeconds": 5})).unwrap();
        Merge::merge_from(&mut base, serde_json::from_value(json!({"tcpSocket": {"port": 2}})).unwrap());
        assert_eq!(serde_json::to_value(&base).unwrap(), json!({"tcpSocket": {"port": 2}, "periodSeconds": 5}));
    }

    #[test]
    fn resource_quantities_merge_by_name_and_claims_are_replaced() {
        agrees(
            json!({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "a"}, {"name": "b"}]}}),
            json!({"resources": {"limits": {"cpu": "2"}, "claims": [{"name": "c"}]}}),
        );
    }

    #[test]
    fn scaling_settings_merge_field_by_field() {
        agrees(
            json!({"scaling": {"enabled": false, "spec": {"pollingInterval": 60, "fallback": {"failureThreshold": 3, "replicas": 1}}}}),
            json!({"scaling": {"enabled": true, "spec": {"fallback": {"failureThreshold": 5, "replicas": 2}}}}),
        );
    }
}
