//! The distributed-llama engine (`v1alpha2`): what a group renders to, one rule per test.
//! The real StatefulSet controller and scheduler take it from there in `e2e_group.rs`.

use crate::common::*;
use model_orchestra::chart::RenderedObject;
use model_orchestra_api::kinds::Kind;
use serde_json::Value;

/// One application `chat`, a group of `nodes`, with the extra YAML (indented for the
/// application).
fn group(nodes: i32, extra: &str) -> String {
    cr_v1alpha2(&format!(
        "applications:\n  chat:\n    engine: {{distributedLlama: {{nodes: {nodes}}}}}\n    readerConfig: {{modelName: qwen3_0.6b_q40}}\n{extra}"
    ))
}

const ROOT: &str = "demo-model-orchestra-chat";
const WORKERS: &str = "demo-model-orchestra-chat-workers";

fn command(workload: &Value) -> Vec<String> {
    container(workload)["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
}

fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

fn members(objects: &[RenderedObject]) -> [&Value; 2] {
    [find(objects, Kind::Deployment, ROOT), find(objects, Kind::StatefulSet, WORKERS)]
}

#[test]
fn a_group_of_four_is_a_root_deployment_and_three_workers_numbered_from_one() {
    let objects = render_v1alpha2(&group(4, ""));
    let workers = find(&objects, Kind::StatefulSet, WORKERS);
    assert_eq!(workers["spec"]["replicas"], 3);
    assert_eq!(workers["spec"]["ordinals"]["start"], 1, "worker i is pod <name>-i");
    assert_eq!(workers["spec"]["serviceName"], WORKERS);
    assert_eq!(command(workers)[..2], ["dllama", "worker"]);
    let root = find(&objects, Kind::Deployment, ROOT);
    assert_eq!(root["spec"]["replicas"], 1);
    assert_eq!(root["spec"]["strategy"]["type"], "Recreate", "the workers take one root at a time");
    assert_eq!(command(root)[0], "dllama-api");
}

#[test]
fn the_roots_workers_list_names_every_worker_by_its_stable_address() {
    let objects = render_v1alpha2(&group(4, ""));
    let args = command(find(&objects, Kind::Deployment, ROOT));
    let at = args.iter().position(|a| a == "--workers").expect("--workers");
    let expected: Vec<String> = (1..=3).map(|i| format!("{WORKERS}-{i}.{WORKERS}.default.svc:9999")).collect();
    assert_eq!(args[at + 1..], expected[..]);
}

#[test]
fn the_workers_service_is_headless_and_publishes_workers_before_they_are_ready() {
    let objects = render_v1alpha2(&group(2, ""));
    let spec = &find(&objects, Kind::Service, WORKERS)["spec"];
    assert_eq!(spec["clusterIP"], "None");
    assert_eq!(spec["publishNotReadyAddresses"], true);
    assert_eq!(spec["selector"]["models.titanml.co/role"], "worker");
}

#[test]
fn the_roots_api_is_a_service_of_the_applications_name_selecting_the_root_alone() {
    let objects = render_v1alpha2(&group(2, ""));
    let spec = &find(&objects, Kind::Service, ROOT)["spec"];
    assert_eq!(spec["ports"][0]["port"], 9999);
    assert_eq!(spec["selector"]["models.titanml.co/role"], "root");
    let root = find(&objects, Kind::Deployment, ROOT);
    assert_eq!(
        container(root)["readinessProbe"]["httpGet"]["path"],
        "/v1/models",
        "not a TCP probe: it ends dllama-api"
    );
}

#[test]
fn a_group_of_one_is_a_root_without_workers() {
    let objects = render_v1alpha2(&group(1, ""));
    assert!(!has(&objects, Kind::StatefulSet, WORKERS) && !has(&objects, Kind::Service, WORKERS));
    assert!(!command(find(&objects, Kind::Deployment, ROOT)).contains(&"--workers".to_string()));
}

#[test]
fn every_member_gets_leaderworkersets_variables() {
    let objects = render_v1alpha2(&group(4, ""));
    let [root, workers] = members(&objects);
    let env = |w: &Value| env_pairs(w).into_iter().filter(|(k, _)| k.starts_with("LWS_")).collect::<Vec<_>>();
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    let leader = "demo-model-orchestra-chat.default.svc";
    assert_eq!(
        env(root),
        [pair("LWS_LEADER_ADDRESS", leader), pair("LWS_GROUP_SIZE", "4"), pair("LWS_WORKER_INDEX", "0")]
    );
    assert_eq!(
        env(workers),
        [pair("LWS_LEADER_ADDRESS", leader), pair("LWS_GROUP_SIZE", "4"), pair("LWS_WORKER_INDEX", "<valueFrom>")]
    );
    let index = &container(workers)["env"][2]["valueFrom"]["fieldRef"]["fieldPath"];
    assert_eq!(index, "metadata.labels['apps.kubernetes.io/pod-index']");
}

#[test]
fn no_two_members_share_a_node() {
    let objects = render_v1alpha2(&group(4, ""));
    for member in members(&objects) {
        let terms = &pod_spec(member)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        let term = &terms[0];
        assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
        // The group's common labels (not the role): a root and a worker repel each other too.
        assert_eq!(term["labelSelector"]["matchLabels"]["app.kubernetes.io/component"], "application-chat");
        assert!(term["labelSelector"]["matchLabels"].get("models.titanml.co/role").is_none());
    }
}

#[test]
fn every_member_gets_the_applications_placement_and_a_gpu_when_the_device_is_cuda() {
    let yaml = cr_v1alpha2(
        "applications:\n  chat:\n    engine: {distributedLlama: {nodes: 2}}\n    nodeSelector: {pool: big}\n    readerConfig: {modelName: qwen3_0.6b_q40, device: cuda}\n",
    );
    let objects = render_v1alpha2(&yaml);
    for member in members(&objects) {
        assert_eq!(pod_spec(member)["nodeSelector"]["pool"], "big");
        assert_eq!(container(member)["resources"]["limits"]["nvidia.com/gpu"], "1");
        assert_eq!(pod_spec(member)["tolerations"][0]["key"], "nvidia.com/gpu");
    }
}

#[test]
fn only_the_root_mounts_the_model_cache_read_only_in_distributed_llamas_format() {
    let objects = render_v1alpha2(&group(2, ""));
    let [root, workers] = members(&objects);
    let mounts = container(root)["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["name"] == "models").expect("the models mount");
    assert_eq!((mount["mountPath"].as_str(), mount["readOnly"].as_bool()), (Some("/code/models"), Some(true)));
    let volumes = pod_spec(root)["volumes"].as_array().unwrap();
    let claim = volumes.iter().find(|v| v["name"] == "models").expect("the models volume");
    assert_eq!(claim["persistentVolumeClaim"]["claimName"], "demo-model-orchestra-chat-models");
    let claims = |w: &Value| {
        pod_spec(w)["volumes"].as_array().unwrap().iter().filter(|v| v.get("persistentVolumeClaim").is_some()).count()
    };
    assert_eq!(claims(workers), 0, "a worker receives its slice from the root");
    let args = command(root);
    let model = args.iter().position(|a| a == "--model").unwrap() + 1;
    assert_eq!(args[model], "/code/models/qwen3_0.6b_q40/dllama_model_qwen3_0.6b_q40.m");
    let job = objects.iter().find(|o| o.kind == Kind::Job).expect("the download Job");
    let job = container(&job.object);
    assert!(job["command"][2].as_str().unwrap().contains("launch.py"), "{}", job["command"]);
}

#[test]
fn a_group_has_no_takeoff_configuration() {
    let objects = render_v1alpha2(&group(2, ""));
    assert!(!has(&objects, Kind::ConfigMap, ROOT));
    let annotations = &find(&objects, Kind::Deployment, ROOT)["spec"]["template"]["metadata"]["annotations"];
    assert!(annotations.get("checksum/config").is_none(), "{annotations}");
    assert!(annotations.get("models.titanml.co/model-revision").is_some(), "a new model restarts the root");
}

#[test]
fn the_template_can_choose_the_engine_and_an_application_can_keep_takeoff() {
    let yaml = cr_v1alpha2(
        "applicationTemplate:\n  engine: {distributedLlama: {nodes: 2}}\napplications:\n  chat:\n    readerConfig: {modelName: qwen3_0.6b_q40}\n  embed:\n    engine: {takeoff: {}}\n    readerConfig: {modelName: org/embedder}\n",
    );
    let objects = render_v1alpha2(&yaml);
    assert!(has(&objects, Kind::StatefulSet, WORKERS));
    assert!(has(&objects, Kind::ConfigMap, "demo-model-orchestra-embed"), "embed stays a Takeoff reader");
    assert!(!objects.iter().any(|o| o.kind == Kind::StatefulSet && o.name.contains("embed")));
}

#[test]
fn the_engines_defaults_alone_choose_nothing() {
    let objects = render_v1alpha2(&cr_v1alpha2("applications:\n  chat:\n    readerConfig: {modelName: org/model}\n"));
    assert!(!objects.iter().any(|o| o.kind == Kind::StatefulSet));
    assert!(has(&objects, Kind::ConfigMap, ROOT), "a Takeoff reader");
}

fn error_of(yaml: &str) -> String {
    try_render_v1alpha2(yaml).expect_err("refused").to_string()
}

#[test]
fn a_group_size_not_a_power_of_two_is_refused_naming_the_field() {
    let err = error_of(&group(3, ""));
    assert!(err.contains("spec.applications.chat.engine.distributedLlama.nodes"), "{err}");
    assert!(err.contains("power of two"), "{err}");
}

#[test]
fn a_group_size_the_template_sets_is_refused_at_the_template() {
    let yaml = cr_v1alpha2(
        "applicationTemplate:\n  engine: {distributedLlama: {nodes: 6}}\napplications:\n  chat:\n    readerConfig: {modelName: qwen3_0.6b_q40}\n",
    );
    let err = error_of(&yaml);
    assert!(err.contains("spec.applicationTemplate.engine.distributedLlama.nodes"), "{err}");
}

#[test]
fn what_a_group_cannot_do_is_refused_all_at_once_each_naming_its_field() {
    let extra = "    scaling: {enabled: true}\n    promotion: {enabled: true}\n    replicaCount: 2\n    modelsVolume: {name: models, emptyDir: {}}\n";
    let err = error_of(&group(2, extra));
    for field in ["scaling.enabled", "promotion.enabled", "replicaCount", "modelsVolume"] {
        assert!(err.contains(&format!("spec.applications.chat.{field}")), "{field} not named: {err}");
    }
}

#[test]
fn a_group_needs_a_model_name() {
    let yaml = cr_v1alpha2("applications:\n  chat:\n    engine: {distributedLlama: {nodes: 2}}\n");
    let err = error_of(&yaml);
    assert!(err.contains("readerConfig.modelName"), "{err}");
}

#[test]
fn a_q40_model_without_q80_buffers_is_a_warning_naming_the_fix() {
    let yaml = group(2, "").replace("{nodes: 2}", "{nodes: 2, bufferFloatType: f32}");
    let found = warnings(&yaml);
    assert!(
        found.iter().any(|w| w.field == "spec.applications.chat.engine.distributedLlama.bufferFloatType"
            && w.message.contains("q80")),
        "{found:?}"
    );
}

#[test]
fn names_too_long_for_the_workers_pods_are_refused_naming_the_application() {
    let long = "a".repeat(40);
    let yaml = group(4, "").replace("  chat:", &format!("  {long}:"));
    let err = error_of(&yaml);
    assert!(err.contains(&format!("spec.applications.{long}")), "{err}");
}
