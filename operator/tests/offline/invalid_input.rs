//! Invalid input gives an error that names the field and says what is wrong, and no objects.

use crate::common::*;
use model_orchestra::error::RenderError;

fn input_error(yaml: &str) -> (String, String) {
    match try_render(yaml) {
        Err(RenderError::Input(errors)) => {
            let e = errors.errors()[0].clone();
            (e.field, e.message)
        }
        Err(other) => panic!("expected an input error, got {other}"),
        Ok(objects) => panic!("expected an error, rendered {:?}", names(&objects)),
    }
}

#[test]
fn an_application_name_that_is_not_a_dns_label_is_rejected() {
    let (field, message) = input_error(&cr("applications:\n  Hello_World: {}\n"));
    assert_eq!(field, "spec.applications.Hello_World");
    assert!(message.contains("DNS label"), "{message}");
}

#[test]
fn a_generated_name_over_63_characters_is_rejected_not_truncated() {
    let app = "a".repeat(45);
    let (field, message) = input_error(&cr(&format!("applications:\n  {app}: {{}}\n")));
    assert_eq!(field, format!("spec.applications.{app}"));
    assert!(message.contains("66 characters") && message.contains("63"), "{message}");
}

#[test]
fn a_release_name_too_long_for_the_gateway_name_is_rejected() {
    let name = format!("{}-model-orchestra", "x".repeat(44));
    let yaml = format!(
        "apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata:\n  name: {name}\nspec: {{}}\n"
    );
    let (field, message) = input_error(&yaml);
    assert_eq!(field, "metadata.name");
    assert!(message.contains("generated name"), "{message}");
}

#[test]
fn an_unknown_device_is_rejected_with_the_allowed_values() {
    let (field, message) = input_error(&cr("applications:\n  chat:\n    readerConfig: {device: tpu}\n"));
    assert_eq!(field, "spec.applications.chat.readerConfig.device");
    assert!(message.contains("tpu") && message.contains("cpu") && message.contains("cuda"), "{message}");
}

#[test]
fn malformed_yaml_is_rejected() {
    let (field, message) = input_error("apiVersion: models.titanml.co/v1alpha1\nkind: [unclosed\n");
    assert_eq!(field, "(document)");
    assert!(message.contains("not valid YAML"), "{message}");
}

#[test]
fn an_unknown_field_is_rejected_with_its_path() {
    let (field, message) = input_error(&cr("gateway:\n  replicaCout: 2\n"));
    assert_eq!(field, "spec.gateway.replicaCout");
    assert!(message.contains("unknown field"), "{message}");
}

#[test]
fn a_mistyped_field_is_rejected_with_its_path() {
    let (field, _) = input_error(&cr("applications:\n  chat:\n    replicaCount: three\n"));
    assert_eq!(field, "spec.applications.chat.replicaCount");
}

#[test]
fn a_negative_count_is_rejected() {
    let (field, message) = input_error(&cr("gateway:\n  replicaCount: -1\n"));
    assert_eq!(field, "spec.gateway.replicaCount");
    assert!(message.contains("minimum"), "{message}");
}

#[test]
fn the_wrong_kind_is_rejected() {
    let (field, _) = input_error("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
    assert_eq!(field, "apiVersion");
}

#[test]
fn an_invalid_pod_label_value_is_rejected() {
    let (field, _) = input_error(&cr("applications:\n  chat:\n    podLabels: {team: \"has space\"}\n"));
    assert_eq!(field, "spec.applications.chat.podLabels.team");
}

#[test]
fn a_count_below_its_minimum_inside_a_nested_type_is_rejected() {
    let (field, message) = input_error(&cr("applications:\n  chat:\n    readerConfig: {tensorParallel: 0}\n"));
    assert_eq!(field, "spec.applications.chat.readerConfig.tensorParallel");
    assert!(message.contains("minimum"), "{message}");
}

#[test]
fn a_port_above_its_maximum_is_rejected() {
    let (field, _) = input_error(&cr("gateway:\n  config: {internalPort: 70000}\n"));
    assert_eq!(field, "spec.gateway.config.internalPort");
}

#[test]
fn an_env_var_name_with_an_equals_sign_is_rejected_where_it_is_written() {
    let (field, message) =
        input_error(&cr("applicationTemplate:\n  env: [{name: 1BAD=NAME, value: x}]\napplications:\n  chat: {}\n"));
    assert_eq!(field, "spec.applicationTemplate.env[0].name");
    assert!(message.contains("other than `=`"), "{message}");
}

#[test]
fn a_node_port_on_a_cluster_ip_service_is_rejected() {
    let (field, message) =
        input_error(&cr("gateway:\n  service:\n    ports: [{name: http, port: 80, nodePort: 30080}]\n"));
    assert_eq!(field, "spec.gateway.service.ports[0].nodePort");
    assert!(message.contains("NodePort or LoadBalancer"), "{message}");
}

#[test]
fn a_template_field_is_named_as_the_templates_and_an_own_field_as_the_applications() {
    let (field, _) = input_error(&cr(
        "applicationTemplate:\n  volumeMounts: [{name: missing, mountPath: /m}]\napplications:\n  chat: {}\n",
    ));
    assert_eq!(field, "spec.applicationTemplate.volumeMounts[0].name");
    let (field, _) = input_error(&cr("applicationTemplate:\n  volumeMounts: [{name: missing, mountPath: /m}]\napplications:\n  chat:\n    volumeMounts: [{name: dshm, mountPath: /dev/shm}]\n"));
    assert_eq!(
        field, "spec.applications.chat.volumeMounts[0].mountPath",
        "the application's list replaced the template's"
    );
}

#[test]
fn a_probe_with_two_handlers_is_rejected() {
    let (field, _) =
        input_error(&cr("gateway:\n  readinessProbe: {httpGet: {path: /, port: 80}, tcpSocket: {port: 80}}\n"));
    assert_eq!(field, "spec.gateway.readinessProbe");
}
