//! How an application's replicas stop (`v1alpha2`): an Ollama replica serves on, out of its
//! Service, until nothing is connected to it before Ollama is told to stop (which cuts what
//! it holds), and an application that may run more than one replica has a
//! PodDisruptionBudget, so a drain takes its replicas one at a time; its replicas spread over
//! nodes where the scheduler can, so a node lost takes one of them.

use model_orchestra_api::kinds::Kind;
use serde_json::{json, Value};

use crate::common::*;

const DEPLOYMENT: &str = "demo-model-orchestra-chat";

fn ollama(extra: &str) -> String {
    cr_v1alpha2(&format!(
        "applications:\n  chat:\n    engine:\n      ollama:\n        models: [{{name: smollm2:135m}}]\n{extra}"
    ))
}

fn takeoff(extra: &str) -> String {
    cr_v1alpha2(&format!("applications:\n  chat:\n    readerConfig: {{modelName: org/model}}\n{extra}"))
}

fn pod_spec(objects: &[model_orchestra::chart::RenderedObject]) -> Value {
    find(objects, Kind::Deployment, DEPLOYMENT)["spec"]["template"]["spec"].clone()
}

fn budgets(objects: &[model_orchestra::chart::RenderedObject]) -> Vec<&Value> {
    objects.iter().filter(|o| o.kind == Kind::PodDisruptionBudget).map(|o| &o.object).collect()
}

#[test]
fn an_ollama_replica_serves_on_until_nothing_is_connected_before_ollama_is_stopped() {
    let spec = pod_spec(&render_v1alpha2(&ollama("")));
    assert_eq!(
        spec["containers"][0]["lifecycle"],
        json!({"preStop": {"httpGet": {"path": "/wait-idle", "port": 9080}}})
    );
    assert_eq!(spec["terminationGracePeriodSeconds"], 120, "the longest drain, and a margin for Ollama to exit");
}

#[test]
fn the_drain_helper_runs_beside_ollama_from_the_operators_image_watching_ollamas_port() {
    let spec = pod_spec(&render_v1alpha2(&ollama("")));
    assert_eq!(spec["containers"][0]["name"], "ollama", "Ollama first: the helper's start holds up nothing");
    let helper = &spec["containers"][1];
    assert_eq!(helper["name"], "drain-helper");
    assert_eq!(helper["image"], spec_of_gateway_image(), "the operator's image, as the model gateway's");
    assert_eq!(
        helper["args"],
        json!(["drain-helper", "--engine-port=11434", "--port=9080", "--at-least=5", "--at-most=115"])
    );
    assert_eq!(helper["ports"], json!([{"name": "drain", "containerPort": 9080}]));
    assert!(spec["initContainers"].is_null(), "nothing before Ollama starts");
    let objects = render_v1alpha2(&ollama(""));
    let template = &find(&objects, Kind::Deployment, DEPLOYMENT)["spec"]["template"];
    assert_eq!(template["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"], "ollama");
}

#[test]
fn an_ollama_on_the_helpers_port_moves_the_helper_to_the_next() {
    let yaml = cr_v1alpha2(
        "applications:\n  chat:\n    engine:\n      ollama:\n        port: 9080\n        models: [{name: smollm2:135m}]\n",
    );
    let spec = pod_spec(&render_v1alpha2(&yaml));
    assert_eq!(spec["containers"][1]["ports"][0]["containerPort"], 9081);
    assert_eq!(spec["containers"][0]["lifecycle"]["preStop"]["httpGet"]["port"], 9081);
    assert_eq!(spec["containers"][1]["args"][1], "--engine-port=9080");
}

#[test]
fn the_drain_helper_runs_restricted_whatever_ollamas_security_context() {
    let extra = "    securityContext: {runAsUser: 0, capabilities: {add: [SYS_ADMIN]}}\n";
    let spec = pod_spec(&render_v1alpha2(&ollama(extra)));
    assert_eq!(
        spec["containers"][1]["securityContext"],
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true,
               "runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}})
    );
}

#[test]
fn the_drain_helper_keeps_a_guaranteed_pod_guaranteed() {
    let spec = pod_spec(&render_v1alpha2(&ollama("")));
    let resources = &spec["containers"][1]["resources"];
    assert_eq!(resources["requests"], resources["limits"]);
    assert_eq!(resources["limits"], json!({"cpu": "10m", "memory": "32Mi"}));
}

#[test]
fn the_drain_helper_is_the_operators_image_whatever_image_the_cr_gives_its_model_gateway() {
    let yaml = cr_v1alpha2(
        "modelGateway: {image: example.com/pinned/gateway:0.0.1}\napplications:\n  chat:\n    engine:\n      ollama:\n        models: [{name: smollm2:135m}]\n",
    );
    let spec = pod_spec(&render_v1alpha2(&yaml));
    assert_eq!(spec["containers"][1]["image"], spec_of_gateway_image(), "the chart's own (the operator's)");
}

/// The model gateway's image in the chart's defaults.
fn spec_of_gateway_image() -> Value {
    let objects = render_v1alpha2(&ollama(""));
    let gateway =
        objects.iter().find(|o| o.kind == Kind::Deployment && o.name.ends_with("-gateway")).expect("the model gateway");
    gateway.object["spec"]["template"]["spec"]["containers"][0]["image"].clone()
}

#[test]
fn a_promotion_candidate_drains_as_well() {
    let objects = render_v1alpha2(&ollama("    promotion: {enabled: true}\n"));
    let candidate =
        &find(&objects, Kind::Deployment, "demo-model-orchestra-chat-candidate")["spec"]["template"]["spec"];
    assert_eq!(candidate["containers"][0]["lifecycle"]["preStop"]["httpGet"]["path"], "/wait-idle");
    assert_eq!(candidate["containers"][1]["name"], "drain-helper");
}

#[test]
fn a_model_gateway_told_to_stop_gets_as_long_for_its_answers_and_leaving_its_endpoints() {
    let objects = render_v1alpha2(&ollama(""));
    let gateway =
        objects.iter().find(|o| o.kind == Kind::Deployment && o.name.ends_with("-gateway")).expect("the model gateway");
    assert_eq!(gateway.object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 130);
}

#[test]
fn an_application_with_more_than_one_replica_loses_at_most_one_to_a_drain() {
    let objects = render_v1alpha2(&ollama("    replicaCount: 2\n"));
    let budget = find(&objects, Kind::PodDisruptionBudget, DEPLOYMENT);
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    assert_eq!(budget["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    let deployment = find(&objects, Kind::Deployment, DEPLOYMENT);
    assert_eq!(budget["spec"]["selector"], deployment["spec"]["selector"], "the budget covers exactly its pods");
}

#[test]
fn an_application_of_one_replica_has_no_disruption_budget_a_drain_could_never_satisfy() {
    let ollama = render_v1alpha2(&ollama(""));
    assert!(!has(&ollama, Kind::PodDisruptionBudget, DEPLOYMENT), "only the model gateway's");
    assert!(budgets(&render_v1alpha2(&takeoff(""))).is_empty());
}

#[test]
fn a_takeoff_application_with_replicas_gets_the_same_budget() {
    let objects = render_v1alpha2(&takeoff("    replicaCount: 3\n"));
    assert_eq!(find(&objects, Kind::PodDisruptionBudget, DEPLOYMENT)["spec"]["maxUnavailable"], 1);
}

#[test]
fn a_promotion_candidate_is_not_under_the_applications_budget() {
    let objects = render_v1alpha2(&takeoff("    replicaCount: 2\n    promotion: {enabled: true}\n"));
    let budgets = budgets(&objects);
    assert_eq!(budgets.len(), 1, "{budgets:?}");
    let selected = &budgets[0]["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"];
    assert_eq!(selected, "application-chat");
}

#[test]
fn the_frozen_v1alpha1_contract_renders_no_disruption_budget() {
    let objects =
        render(&cr("applications:\n  chat:\n    readerConfig: {modelName: org/model}\n    replicaCount: 2\n"));
    assert!(!objects.iter().any(|o| o.kind == Kind::PodDisruptionBudget));
}

#[test]
fn an_ollama_applications_replicas_spread_over_nodes_where_the_scheduler_can() {
    let objects = render_v1alpha2(&ollama("    replicaCount: 2\n"));
    let deployment = find(&objects, Kind::Deployment, DEPLOYMENT);
    let spread = &deployment["spec"]["template"]["spec"]["topologySpreadConstraints"];
    assert_eq!(spread.as_array().map(Vec::len), Some(1), "{spread}");
    assert_eq!(spread[0]["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(spread[0]["maxSkew"], 1);
    assert_eq!(spread[0]["whenUnsatisfiable"], "ScheduleAnyway", "a one-node cluster still runs every replica");
    assert_eq!(spread[0]["labelSelector"], deployment["spec"]["selector"], "its own replicas only");
}
