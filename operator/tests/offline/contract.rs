//! The values contract, one rule per test (charts/model-orchestra/values.yaml and the
//! reference "The ModelOrchestra values contract").

use crate::common::*;
use model_orchestra_api::kinds::Kind;
use serde_json::json;

const ONE_APP: &str = "applications:\n  chat:\n    readerConfig:\n      modelName: m\n";

#[test]
fn sample_renders_service_account_gateway_and_application_objects() {
    let objects = render(&sample());
    let want = [
        (Kind::ServiceAccount, "my-model-orchestra"),
        (Kind::ConfigMap, "my-model-orchestra-gateway"),
        (Kind::ConfigMap, "my-model-orchestra-hello-world"),
        (Kind::Service, "my-model-orchestra-gateway"),
        (Kind::Service, "my-model-orchestra-hello-world"),
        (Kind::Deployment, "my-model-orchestra-gateway"),
        (Kind::Deployment, "my-model-orchestra-hello-world"),
    ];
    assert_eq!(names(&objects), want.map(|(k, n)| (k, n.to_string())));
}

#[test]
fn application_inherits_the_template_and_its_own_values_win() {
    let objects = render(&cr("applicationTemplate:\n  replicaCount: 2\n  podAnnotations: {a: template, b: template}\n  nodeSelector: {pool: gpu}\n\
         applications:\n  chat:\n    podAnnotations: {b: app}\n    nodeSelector: {zone: z1}\n"));
    let d = find(&objects, Kind::Deployment, "demo-model-orchestra-chat");
    assert_eq!(d["spec"]["replicas"], 2, "scalar inherited from the template");
    let ann = &d["spec"]["template"]["metadata"]["annotations"];
    assert_eq!((ann["a"].as_str(), ann["b"].as_str()), (Some("template"), Some("app")), "maps merge, app wins");
    assert_eq!(d["spec"]["template"]["spec"]["nodeSelector"], json!({"pool": "gpu", "zone": "z1"}));
}

#[test]
fn lists_from_the_application_replace_the_template_list() {
    let objects = render(&cr("applicationTemplate:\n  volumes: [{name: a, emptyDir: {}}]\n  volumeMounts: [{name: a, mountPath: /a}]\n\
         applications:\n  chat:\n    volumes: [{name: b, emptyDir: {}}]\n    volumeMounts: [{name: b, mountPath: /b}]\n"));
    let d = find(&objects, Kind::Deployment, "demo-model-orchestra-chat");
    let volumes: Vec<&str> = d["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(volumes, ["config", "dshm", "b"]);
}

#[test]
fn application_env_is_own_then_template_then_required() {
    let objects =
        render(&cr("applicationTemplate:\n  env: [{name: A, value: template}, {name: B, value: template}]\n\
         applications:\n  chat:\n    env: [{name: B, value: app}, {name: TAKEOFF_HEADLESS, value: \"false\"}]\n"));
    let env = env_pairs(find(&objects, Kind::Deployment, "demo-model-orchestra-chat"));
    let want =
        [("B", "app"), ("TAKEOFF_HEADLESS", "false"), ("A", "template"), ("TAKEOFF_ADD_READER_ID_SUFFIX", "true")];
    assert_eq!(env, want.map(|(a, b)| (a.to_string(), b.to_string())));
}

#[test]
fn gateway_env_adds_reader_id_suffix_unless_the_user_sets_it() {
    let default = render(&cr("gateway:\n  env: [{name: X, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n"));
    let env = env_pairs(find(&default, Kind::Deployment, "demo-model-orchestra-gateway"));
    assert_eq!(env, [("X".into(), "<valueFrom>".into()), ("TAKEOFF_ADD_READER_ID_SUFFIX".into(), "true".into())]);

    let own = render(&cr("gateway:\n  env: [{name: TAKEOFF_ADD_READER_ID_SUFFIX, value: \"false\"}]\n"));
    let env = env_pairs(find(&own, Kind::Deployment, "demo-model-orchestra-gateway"));
    assert_eq!(env, [("TAKEOFF_ADD_READER_ID_SUFFIX".to_string(), "false".to_string())]);
}

#[test]
fn every_application_gets_configmap_deployment_and_service() {
    let objects = render(&cr("applications:\n  a: {}\n  b: {}\n"));
    for app in ["a", "b"] {
        let name = format!("demo-model-orchestra-{app}");
        for kind in [Kind::ConfigMap, Kind::Deployment, Kind::Service] {
            assert!(has(&objects, kind, &name), "{kind:?} {name}");
        }
    }
}

#[test]
fn application_config_yaml_snake_cases_reader_config_and_names_the_gateway() {
    let objects = render(&cr(
        "applications:\n  chat:\n    readerConfig: {modelName: m, maxBatchSize: 8, someFutureKey: {nestedKey: 1}}\n",
    ));
    let cm = find(&objects, Kind::ConfigMap, "demo-model-orchestra-chat");
    let config: serde_json::Value = serde_yaml::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
    let want = json!({"model-orchestra": {
        "server_config": {"internal_port": 3005},
        "readers_config": {"chat": {
            "model_name": "m", "max_batch_size": 8, "some_future_key": {"nestedKey": 1},
            "device": "cpu", "consumer_group": "primary", "buffer_requests": true,
            "internal_gateway_ip": "demo-model-orchestra-gateway",
        }},
    }});
    assert_eq!(config, want);
}

#[test]
fn gateway_config_yaml_snake_cases_config_with_empty_readers() {
    let objects = render(&cr("gateway:\n  config: {heartbeatInterval: 5}\n"));
    let cm = find(&objects, Kind::ConfigMap, "demo-model-orchestra-gateway");
    let config: serde_json::Value = serde_yaml::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
    assert_eq!(
        config,
        json!({"model-orchestra": {"server_config": {"internal_port": 3005, "heartbeat_interval": 5}, "readers_config": {}}})
    );
}

#[test]
fn deployment_mounts_config_and_dshm_before_the_users_volumes() {
    let objects = render(&cr("applications:\n  chat:\n    volumeMounts: [{name: extra, mountPath: /x}]\n    volumes: [{name: extra, emptyDir: {}}]\n"));
    let d = find(&objects, Kind::Deployment, "demo-model-orchestra-chat");
    assert_eq!(
        container(d)["volumeMounts"],
        json!([
            {"name": "config", "mountPath": "/code/config.yaml", "subPath": "config.yaml", "readOnly": true},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "extra", "mountPath": "/x"},
        ])
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["volumes"],
        json!([
            {"name": "config", "configMap": {"name": "demo-model-orchestra-chat"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {"name": "extra", "emptyDir": {}},
        ])
    );
}

#[test]
fn keda_trigger_targets_the_consumer_group_and_the_application() {
    let objects = render(&cr("applications:\n  chat:\n    readerConfig: {consumerGroup: cg}\n    scaling: {enabled: true, metricTarget: {value: 7}}\n"));
    let so = find(&objects, Kind::ScaledObject, "demo-model-orchestra-chat");
    assert_eq!(
        so["spec"]["triggers"],
        json!([{"type": "external-push", "metadata": {
            "scalerAddress": "demo-model-orchestra-gateway.default.svc.cluster.local:3005",
            "target_cg": "7",
            "target_chat": "7",
        }}])
    );
    assert_eq!(so["spec"]["scaleTargetRef"], json!({"name": "demo-model-orchestra-chat"}));
}

#[test]
fn keda_spec_copies_the_scaling_defaults() {
    let objects = render(&cr("applications:\n  chat:\n    scaling: {enabled: true}\n"));
    let spec = &find(&objects, Kind::ScaledObject, "demo-model-orchestra-chat")["spec"];
    let copied = [
        ("pollingInterval", 60),
        ("initialCooldownPeriod", 300),
        ("cooldownPeriod", 300),
        ("minReplicaCount", 1),
        ("maxReplicaCount", 4),
    ];
    for (field, value) in copied {
        assert_eq!(spec[field], value, "{field}");
    }
}

#[test]
fn scaling_leaves_replicas_out_of_the_deployment() {
    let objects = render(&cr("applications:\n  chat:\n    replicaCount: 3\n    scaling: {enabled: true}\n"));
    let spec = find(&objects, Kind::Deployment, "demo-model-orchestra-chat")["spec"].as_object().unwrap();
    assert!(!spec.contains_key("replicas"));
}

#[test]
fn without_scaling_replicas_is_replica_count_and_no_scaled_object() {
    let objects = render(&cr("applications:\n  chat:\n    replicaCount: 0\n"));
    assert_eq!(find(&objects, Kind::Deployment, "demo-model-orchestra-chat")["spec"]["replicas"], 0);
    assert!(!objects.iter().any(|o| o.kind == Kind::ScaledObject));
}

#[test]
fn ingress_is_rendered_only_when_enabled() {
    let off = render(&cr(ONE_APP));
    assert!(!off.iter().any(|o| o.kind == Kind::Ingress));
    let on =
        render(&cr("gateway:\n  ingress: {enabled: true}\napplications:\n  chat:\n    ingress: {enabled: true}\n"));
    assert!(has(&on, Kind::Ingress, "demo-model-orchestra-gateway"));
    assert!(has(&on, Kind::Ingress, "demo-model-orchestra-chat"));
}

#[test]
fn ingress_backend_is_the_services_first_port_by_number() {
    let objects = render(&cr("gateway:\n  ingress: {enabled: true, hosts: [{host: a.example}]}\n"));
    let rule = &find(&objects, Kind::Ingress, "demo-model-orchestra-gateway")["spec"]["rules"][0];
    assert_eq!(
        rule,
        &json!({"host": "a.example", "http": {"paths": [{
            "path": "/", "pathType": "ImplementationSpecific",
            "backend": {"service": {"name": "demo-model-orchestra-gateway", "port": {"number": 80}}},
        }]}})
    );
}

#[test]
fn service_monitor_is_rendered_only_when_metrics_are_exported() {
    assert!(!render(&cr(ONE_APP)).iter().any(|o| o.kind == Kind::ServiceMonitor));
    let on = render(&cr("gateway:\n  exportPrometheusMetrics: true\n"));
    let sm = find(&on, Kind::ServiceMonitor, "demo-model-orchestra-gateway");
    assert_eq!(sm["spec"]["endpoints"], json!([{"port": "management", "path": "/metrics"}]));
}

#[test]
fn service_account_is_rendered_only_when_created() {
    let created = render(&cr(ONE_APP));
    assert!(has(&created, Kind::ServiceAccount, "demo-model-orchestra"));
    let d = find(&created, Kind::Deployment, "demo-model-orchestra-chat");
    assert_eq!(d["spec"]["template"]["spec"]["serviceAccountName"], "demo-model-orchestra");

    let existing = render(&cr("serviceAccount: {create: false}\napplications:\n  chat: {}\n"));
    assert!(!existing.iter().any(|o| o.kind == Kind::ServiceAccount));
    let d = find(&existing, Kind::Deployment, "demo-model-orchestra-chat");
    assert_eq!(d["spec"]["template"]["spec"]["serviceAccountName"], "default");
}

#[test]
fn empty_image_tag_defaults_to_app_version_cpu_for_gateway_and_gpu_for_applications() {
    let objects = render(&cr(ONE_APP));
    let app_version = &crate::common::chart().metadata.app_version;
    let gw = find(&objects, Kind::Deployment, "demo-model-orchestra-gateway");
    assert_eq!(container(gw)["image"], format!("tytn/takeoff-pro:{app_version}-cpu"));
    let app = find(&objects, Kind::Deployment, "demo-model-orchestra-chat");
    assert_eq!(container(app)["image"], format!("tytn/takeoff-pro:{app_version}-gpu"));
}

#[test]
fn an_explicit_image_tag_is_used_as_given() {
    let objects = render(&cr("applications:\n  chat:\n    image: {repository: r/x, tag: v9}\n"));
    assert_eq!(container(find(&objects, Kind::Deployment, "demo-model-orchestra-chat"))["image"], "r/x:v9");
}

#[test]
fn objects_are_ordered_by_install_order_then_name() {
    let objects =
        render(&cr("gateway:\n  ingress: {enabled: true}\n  exportPrometheusMetrics: true\napplications:\n  b: {scaling: {enabled: true}}\n  a: {}\n"));
    let keys: Vec<_> = objects.iter().map(|o| (o.kind, o.name.clone())).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(objects.first().unwrap().kind, Kind::ServiceAccount);
    assert_eq!(objects.last().unwrap().kind, Kind::ServiceMonitor);
}

#[test]
fn pod_labels_cannot_override_the_selector() {
    let objects =
        render(&cr("applications:\n  chat:\n    podLabels: {app.kubernetes.io/component: hijack, extra: x}\n"));
    let d = find(&objects, Kind::Deployment, "demo-model-orchestra-chat");
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/component"], "application-chat");
    assert_eq!(labels["extra"], "x");
}

#[test]
fn fullname_override_names_every_object() {
    let objects = render(&cr("fullnameOverride: stack\napplications:\n  chat: {}\n"));
    assert!(has(&objects, Kind::Deployment, "stack-gateway"));
    assert!(has(&objects, Kind::Deployment, "stack-chat"));
}
