//! GPU defaults for `device: cuda` (and every way to override them), and the per-pod
//! configuration checksum that rolls pods when, and only when, their config changes.

use crate::common::*;
use model_orchestra_api::kinds::Kind;
use serde_json::json;

const APP: &str = "demo-model-orchestra-chat";

fn app_deployment(app_yaml: &str) -> serde_json::Value {
    let indented: String = app_yaml.lines().map(|l| format!("    {l}\n")).collect();
    let objects = render(&cr(&format!("applications:\n  chat:\n{indented}")));
    find(&objects, Kind::Deployment, APP).clone()
}

fn gpu_toleration() -> serde_json::Value {
    json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
}

#[test]
fn cuda_requests_one_gpu_and_tolerates_the_gpu_taint() {
    let d = app_deployment("readerConfig: {device: cuda}");
    assert_eq!(container(&d)["resources"], json!({"limits": {"nvidia.com/gpu": "1"}}));
    assert_eq!(d["spec"]["template"]["spec"]["tolerations"], gpu_toleration());
}

#[test]
fn cuda_gpu_count_is_tensor_parallel() {
    let d = app_deployment("readerConfig: {device: cuda, tensorParallel: 4}");
    assert_eq!(container(&d)["resources"]["limits"]["nvidia.com/gpu"], "4");
}

#[test]
fn cuda_keeps_the_users_other_resources_beside_the_gpu_limit() {
    let d = app_deployment("readerConfig: {device: cuda}\nresources: {limits: {memory: 8Gi}, requests: {cpu: '1'}}");
    assert_eq!(
        container(&d)["resources"],
        json!({"limits": {"memory": "8Gi", "nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}})
    );
}

#[test]
fn a_user_gpu_limit_is_kept() {
    let d =
        app_deployment("readerConfig: {device: cuda, tensorParallel: 4}\nresources: {limits: {nvidia.com/gpu: '2'}}");
    assert_eq!(container(&d)["resources"], json!({"limits": {"nvidia.com/gpu": "2"}}));
}

#[test]
fn a_user_gpu_request_without_a_limit_means_that_many_gpus() {
    // Extended resources cannot be overcommitted: the API server refuses a request without
    // an equal limit, so the request is the limit too (not tensorParallel's default).
    let d =
        app_deployment("readerConfig: {device: cuda, tensorParallel: 4}\nresources: {requests: {nvidia.com/gpu: '2'}}");
    assert_eq!(
        container(&d)["resources"],
        json!({"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}})
    );
}

#[test]
fn any_extended_resource_requested_without_a_limit_gets_its_request_as_limit() {
    let d = app_deployment("readerConfig: {device: cpu}\nresources: {requests: {example.com/fpga: '1', cpu: 500m}}");
    assert_eq!(
        container(&d)["resources"],
        json!({"limits": {"example.com/fpga": "1"}, "requests": {"example.com/fpga": "1", "cpu": "500m"}})
    );
}

#[test]
fn user_tolerations_replace_the_gpu_toleration() {
    let d = app_deployment("readerConfig: {device: cuda}\ntolerations: [{key: dedicated, operator: Exists}]");
    assert_eq!(d["spec"]["template"]["spec"]["tolerations"], json!([{"key": "dedicated", "operator": "Exists"}]));
}

#[test]
fn template_tolerations_count_as_the_users() {
    let objects = render(&cr("applicationTemplate:\n  tolerations: [{key: t, operator: Exists}]\napplications:\n  chat:\n    readerConfig: {device: cuda}\n"));
    let d = find(&objects, Kind::Deployment, APP);
    assert_eq!(d["spec"]["template"]["spec"]["tolerations"], json!([{"key": "t", "operator": "Exists"}]));
}

#[test]
fn cpu_applications_get_no_gpu_defaults() {
    let d = app_deployment("readerConfig: {device: cpu}");
    let pod = d["spec"]["template"]["spec"].as_object().unwrap();
    assert!(!pod.contains_key("tolerations"));
    assert!(!container(&d).as_object().unwrap().contains_key("resources"));
}

#[test]
fn node_selector_passes_through_unchanged() {
    let d =
        app_deployment("readerConfig: {device: cuda}\nnodeSelector: {nvidia.com/gpu.product: NVIDIA-GeForce-RTX-3060}");
    assert_eq!(
        d["spec"]["template"]["spec"]["nodeSelector"],
        json!({"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3060"})
    );
}

fn checksums(spec: &str) -> (String, String, String) {
    let objects = render(&cr(spec));
    (
        checksum(find(&objects, Kind::Deployment, "demo-model-orchestra-gateway")),
        checksum(find(&objects, Kind::Deployment, "demo-model-orchestra-a")),
        checksum(find(&objects, Kind::Deployment, "demo-model-orchestra-b")),
    )
}

const BASE: &str = "applications:\n  a: {readerConfig: {modelName: m1}}\n  b: {readerConfig: {modelName: m2}}\n";

#[test]
fn checksum_changes_only_for_the_application_whose_reader_config_changed() {
    let (gw0, a0, b0) = checksums(BASE);
    let (gw1, a1, b1) =
        checksums("applications:\n  a: {readerConfig: {modelName: changed}}\n  b: {readerConfig: {modelName: m2}}\n");
    assert_ne!(a0, a1);
    assert_eq!((gw0, b0), (gw1, b1));
}

#[test]
fn checksum_changes_only_for_the_gateway_when_gateway_config_changes() {
    let (gw0, a0, b0) = checksums(BASE);
    let (gw1, a1, b1) = checksums(&format!("gateway:\n  config: {{extra: 1}}\n{BASE}"));
    assert_ne!(gw0, gw1);
    assert_eq!((a0, b0), (a1, b1));
}

#[test]
fn checksum_is_stable_when_nothing_in_the_pods_config_changes() {
    let (gw0, a0, b0) = checksums(BASE);
    let (gw1, a1, b1) = checksums(
        "gateway:\n  replicaCount: 3\napplications:\n  a: {readerConfig: {modelName: m1}, env: [{name: X, value: y}], replicaCount: 2}\n  b: {readerConfig: {modelName: m2}}\n",
    );
    assert_eq!((gw0, a0, b0), (gw1, a1, b1));
}

#[test]
fn checksum_is_the_sha256_of_the_configmaps_config_yaml() {
    let objects = render(&cr(BASE));
    let cm = find(&objects, Kind::ConfigMap, "demo-model-orchestra-a");
    let config = cm["data"]["config.yaml"].as_str().unwrap();
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(config.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(checksum(find(&objects, Kind::Deployment, "demo-model-orchestra-a")), digest);
}
