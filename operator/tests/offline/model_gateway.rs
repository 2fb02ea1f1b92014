//! The model gateway as the chart renders it: in the gateway's place when every
//! application is Ollama, with a Role that reads its own ModelOrchestra and scales only the
//! applications that sleep; a sleeping application's Deployment leaves `replicas` to it.

use model_orchestra::error::RenderError;
use model_orchestra_api::kinds::Kind;
use serde_json::json;

use crate::common::*;

fn ollama(name: &str, extra: &str) -> String {
    format!("    {name}:\n      engine:\n        ollama:\n          models: [{{name: smollm2:135m}}]\n{extra}")
}

fn spec(apps: &[String]) -> String {
    format!("applications:\n{}", apps.concat())
}

const SLEEPS: &str = "      sleep: {enabled: true, idleSeconds: 60}\n";

#[test]
fn every_application_ollama_renders_the_model_gateway_in_the_gateways_place() {
    let objects = render_v1alpha2(&cr_v1alpha2(&spec(&[ollama("chat", "")])));
    let deployment = find(&objects, Kind::Deployment, "demo-model-orchestra-gateway");
    let c = container(deployment);
    assert_eq!(c["args"], json!(["gateway", "--namespace=default", "--name=demo", "--port=8080"]));
    assert_eq!(c["image"], "ghcr.io/titanml/model-orchestra-operator:v0.1.0");
    let service = find(&objects, Kind::Service, "demo-model-orchestra-gateway");
    assert_eq!(service["spec"]["ports"][0]["port"], 80);
    assert!(has(&objects, Kind::ServiceAccount, "demo-model-orchestra-gateway"));
    assert!(has(&objects, Kind::RoleBinding, "demo-model-orchestra-gateway"));
}

#[test]
fn the_gateways_role_reads_only_its_modelorchestra_and_scales_only_the_applications_that_sleep() {
    let objects = render_v1alpha2(&cr_v1alpha2(&spec(&[ollama("chat", SLEEPS), ollama("docs", "")])));
    let role = find(&objects, Kind::Role, "demo-model-orchestra-gateway");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["models.titanml.co"], "resources": ["modelorchestras"], "resourceNames": ["demo"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["demo-model-orchestra-chat"],
             "verbs": ["get", "patch", "update"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": ["demo-model-orchestra-chat-activity"], "verbs": ["get", "patch"]}
        ])
    );
}

#[test]
fn the_model_gateway_runs_two_replicas_spread_over_nodes_and_keeps_one_through_a_drain_or_rollout() {
    let objects = render_v1alpha2(&cr_v1alpha2(&spec(&[ollama("chat", SLEEPS)])));
    let gateway = find(&objects, Kind::Deployment, "demo-model-orchestra-gateway");
    assert_eq!(gateway["spec"]["replicas"], 2);
    assert_eq!(gateway["spec"]["strategy"]["rollingUpdate"], json!({"maxUnavailable": 0, "maxSurge": 1}));
    let spread = &gateway["spec"]["template"]["spec"]["topologySpreadConstraints"][0];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(spread["whenUnsatisfiable"], "ScheduleAnyway", "a one-node cluster still runs both");
    assert_eq!(spread["labelSelector"], gateway["spec"]["selector"]);
    let budget = find(&objects, Kind::PodDisruptionBudget, "demo-model-orchestra-gateway");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    assert_eq!(budget["spec"]["selector"], gateway["spec"]["selector"], "the budget covers exactly its pods");
}

#[test]
fn a_sleeping_applications_deployment_leaves_replicas_to_the_gateway_and_says_its_idle_seconds() {
    let objects = render_v1alpha2(&cr_v1alpha2(&spec(&[ollama("chat", SLEEPS), ollama("docs", "")])));
    let chat = find(&objects, Kind::Deployment, "demo-model-orchestra-chat");
    assert!(chat["spec"].get("replicas").is_none(), "{}", chat["spec"]);
    assert_eq!(chat["metadata"]["annotations"]["models.titanml.co/idle-seconds"], "60");
    let docs = find(&objects, Kind::Deployment, "demo-model-orchestra-docs");
    assert_eq!(docs["spec"]["replicas"], 1);
    assert!(docs["metadata"].get("annotations").is_none());
}

#[test]
fn a_takeoff_application_keeps_the_takeoff_gateway_and_no_model_gateway_role() {
    let objects = render_v1alpha2(&cr_v1alpha2("applications:\n    readers: {}\n"));
    let gateway = find(&objects, Kind::Deployment, "demo-model-orchestra-gateway");
    assert_ne!(container(gateway)["args"], json!(["gateway", "--namespace=default", "--name=demo", "--port=8080"]));
    assert!(!has(&objects, Kind::Role, "demo-model-orchestra-gateway"));
}

#[test]
fn sleep_on_a_takeoff_application_is_refused_naming_the_field() {
    let yaml = cr_v1alpha2("applications:\n    readers:\n      sleep: {enabled: true}\n");
    let Err(RenderError::Input(errors)) = try_render_v1alpha2(&yaml) else { panic!("rendered") };
    let e = &errors.errors()[0];
    assert_eq!(e.field, "spec.applications.readers.sleep.enabled");
    assert!(e.message.contains("Ollama"), "{}", e.message);
}

#[test]
fn sleep_beside_a_takeoff_application_is_refused_the_model_gateway_is_not_rendered_there() {
    let yaml = cr_v1alpha2(&format!("{}    readers: {{}}\n", spec(&[ollama("chat", SLEEPS)])));
    let Err(RenderError::Input(errors)) = try_render_v1alpha2(&yaml) else { panic!("rendered") };
    let e = &errors.errors()[0];
    assert_eq!(e.field, "spec.applications.chat.sleep.enabled");
    assert!(e.message.contains("model gateway"), "{}", e.message);
}

#[test]
fn the_model_gateways_default_image_is_the_operator_of_this_version() {
    let values: serde_yaml::Value =
        serde_yaml::from_str(include_str!("../../../charts/model-orchestra-1.0/values.yaml")).unwrap();
    let want = format!("ghcr.io/titanml/model-orchestra-operator:v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(values["modelGateway"]["image"].as_str(), Some(want.as_str()));
}

#[test]
fn an_application_naming_neither_engine_nor_model_beside_ollama_ones_is_refused_naming_the_one_meant() {
    // `kubectl patch --type merge` of `assistnt` for `assistant`: the patch adds an application.
    let typo = "    assistnt:\n      sleep: {enabled: true, idleSeconds: 30}\n";
    let yaml = cr_v1alpha2(&format!("{}{typo}", spec(&[ollama("assistant", "")])));
    let Err(RenderError::Input(errors)) = try_render_v1alpha2(&yaml) else { panic!("rendered") };
    let e = errors.errors().iter().find(|e| e.field == "spec.applications.assistnt").expect("the misspelt key");
    assert!(e.message.contains("did you mean `assistant`?"), "{}", e.message);
    assert!(e.message.contains("model gateway"), "says what it would replace: {}", e.message);
}

#[test]
fn a_takeoff_application_naming_its_model_beside_an_ollama_one_is_not_taken_for_a_typo() {
    let takeoff = "    readers:\n      readerConfig: {modelName: org/model}\n";
    let yaml = cr_v1alpha2(&format!("{}{takeoff}", spec(&[ollama("chat", "")])));
    let refused = match try_render_v1alpha2(&yaml) {
        Err(RenderError::Input(errors)) => errors.errors().iter().map(|e| e.field.clone()).collect(),
        _ => Vec::new(),
    };
    assert!(!refused.contains(&"spec.applications.readers".to_string()), "{refused:?}");
}
