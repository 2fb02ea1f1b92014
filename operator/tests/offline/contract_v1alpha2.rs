//! The `v1alpha2` values contract: what the upstream chart's users got in inference-stack
//! 1.0 (`../shared/reference/inference-stack-1.0-changes.md`), one rule per test, and what
//! was deliberately not taken (the chart rename, the root init container).

use crate::common::*;
use model_orchestra_api::kinds::Kind;
use serde_json::json;

const ONE_APP: &str = "applications:\n  chat:\n    readerConfig: {modelName: org/model}\n";

fn config_yaml(objects: &[model_orchestra::chart::RenderedObject], name: &str) -> String {
    find(objects, Kind::ConfigMap, name)["data"]["config.yaml"].as_str().unwrap().to_string()
}

#[test]
fn every_config_yaml_is_rooted_at_takeoff() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    for name in ["demo-model-orchestra-gateway", "demo-model-orchestra-chat"] {
        assert!(config_yaml(&objects, name).starts_with("takeoff:\n"), "{name}: {}", config_yaml(&objects, name));
    }
}

#[test]
fn the_gateway_service_port_80_reaches_the_openai_port_and_3000_the_inference_port() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    let ports = &find(&objects, Kind::Service, "demo-model-orchestra-gateway")["spec"]["ports"];
    let by_port =
        |port: i64| ports.as_array().unwrap().iter().find(|p| p["port"] == port).map(|p| p["targetPort"].clone());
    assert_eq!(by_port(80), Some(json!("openai")));
    assert_eq!(by_port(3000), Some(json!("inference")));
    assert_eq!(by_port(3003), None, "no Service port 3003 any more");
}

#[test]
fn readers_are_reached_only_through_the_gateway() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    assert!(!has(&objects, Kind::Service, "demo-model-orchestra-chat"), "no per-application Service");
    assert!(!has(&objects, Kind::Ingress, "demo-model-orchestra-chat"), "no per-application Ingress");
    assert!(has(&objects, Kind::Service, "demo-model-orchestra-gateway"));
}

#[test]
fn an_application_service_or_ingress_is_refused_by_name() {
    for field in ["service: {type: ClusterIP}", "ingress: {enabled: true}"] {
        let err = try_render_v1alpha2(&cr_v1alpha2(&format!("{ONE_APP}    {field}\n"))).unwrap_err().to_string();
        let key = field.split(':').next().unwrap();
        assert!(err.contains(&format!("spec.applications.chat.{key}")) && err.contains("unknown field"), "{err}");
    }
}

#[test]
fn readers_declare_no_container_ports_unless_given() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    assert!(container(find(&objects, Kind::Deployment, "demo-model-orchestra-chat")).get("ports").is_none());
    let given =
        render_v1alpha2(&cr_v1alpha2(&format!("{ONE_APP}    ports: [{{name: inference, containerPort: 3000}}]\n")));
    assert_eq!(
        container(find(&given, Kind::Deployment, "demo-model-orchestra-chat"))["ports"][0]["containerPort"],
        3000
    );
    let gateway = container(find(&objects, Kind::Deployment, "demo-model-orchestra-gateway"));
    assert_eq!(gateway["ports"].as_array().unwrap().len(), 4, "the gateway keeps its ports");
}

fn models_volume(
    objects: &[model_orchestra::chart::RenderedObject],
    app: &str,
) -> (serde_json::Value, serde_json::Value) {
    let deployment = find(objects, Kind::Deployment, &format!("demo-model-orchestra-{app}"));
    let mount = container(deployment)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/code/models")
        .cloned()
        .expect("a mount at /code/models");
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .cloned()
        .expect("its volume");
    (mount, volume)
}

#[test]
fn the_models_volume_defaults_to_a_memory_backed_empty_dir_at_code_models() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    let (mount, volume) = models_volume(&objects, "chat");
    assert_eq!(mount["name"], "models");
    assert_eq!(volume, json!({"name": "models", "emptyDir": {"medium": "Memory"}}));
    let gateway = find(&objects, Kind::Deployment, "demo-model-orchestra-gateway");
    assert!(
        !container(gateway)["volumeMounts"].as_array().unwrap().iter().any(|m| m["mountPath"] == "/code/models"),
        "the gateway has none"
    );
}

#[test]
fn an_applications_models_volume_replaces_the_templates_whole() {
    let spec = "applicationTemplate:\n  modelsVolume: {name: cache, emptyDir: {sizeLimit: 10Gi}}\napplications:\n  chat:\n    modelsVolume: {name: weights, hostPath: {path: /models}}\n  other: {}\n";
    let objects = render_v1alpha2(&cr_v1alpha2(spec));
    let (_, own) = models_volume(&objects, "chat");
    assert_eq!(
        own,
        json!({"name": "weights", "hostPath": {"path": "/models"}}),
        "no emptyDir key left over from the template"
    );
    let (_, inherited) = models_volume(&objects, "other");
    assert_eq!(inherited, json!({"name": "cache", "emptyDir": {"sizeLimit": "10Gi"}}));
}

#[test]
fn a_models_volume_named_like_another_pod_volume_is_refused() {
    let err =
        try_render_v1alpha2(&cr_v1alpha2(&format!("{ONE_APP}    modelsVolume: {{name: dshm, emptyDir: {{}}}}\n")))
            .unwrap_err()
            .to_string();
    assert!(err.contains("spec.applications.chat.modelsVolume.name") && err.contains("another volume"), "{err}");
}

#[test]
fn pod_name_is_among_the_required_reader_env() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    let env = &container(find(&objects, Kind::Deployment, "demo-model-orchestra-chat"))["env"];
    let names: Vec<&str> = env.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["TAKEOFF_ADD_READER_ID_SUFFIX", "TAKEOFF_HEADLESS", "POD_NAME"]);
    assert_eq!(env[2]["valueFrom"], json!({"fieldRef": {"fieldPath": "metadata.name"}}));
}

#[test]
fn the_keda_trigger_is_keyed_by_the_consumer_group_only() {
    let spec = "applications:\n  chat:\n    readerConfig: {consumerGroup: chatters}\n    scaling: {enabled: true}\n";
    let objects = render_v1alpha2(&cr_v1alpha2(spec));
    let metadata = &find(&objects, Kind::ScaledObject, "demo-model-orchestra-chat")["spec"]["triggers"][0]["metadata"];
    let keys: Vec<&String> = metadata.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["scalerAddress", "target_chatters"]);
}

#[test]
fn the_default_image_tag_is_the_newer_app_version() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    assert_eq!(
        container(find(&objects, Kind::Deployment, "demo-model-orchestra-chat"))["image"],
        "tytn/takeoff-pro:0.22.0-rc20-gpu"
    );
    assert_eq!(
        container(find(&objects, Kind::Deployment, "demo-model-orchestra-gateway"))["image"],
        "tytn/takeoff-pro:0.22.0-rc20-cpu"
    );
}

#[test]
fn object_names_and_selectors_stay_those_of_v1alpha1() {
    // The chart rename is not taken: a CR moving between versions keeps its objects, and
    // the Deployments' (immutable) selectors.
    let v2 = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    let v1 = render(&cr(ONE_APP));
    for name in ["demo-model-orchestra-gateway", "demo-model-orchestra-chat"] {
        assert_eq!(
            find(&v2, Kind::Deployment, name)["spec"]["selector"],
            find(&v1, Kind::Deployment, name)["spec"]["selector"]
        );
    }
}

#[test]
fn no_init_container_runs_as_root() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    let pod = &find(&objects, Kind::Deployment, "demo-model-orchestra-chat")["spec"]["template"]["spec"];
    assert!(pod.get("initContainers").is_none(), "{pod}");
}

#[test]
fn the_v1alpha2_sample_matches_its_golden_file() {
    let sample =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples/modelorchestra-v1alpha2.yaml"))
            .unwrap();
    let rendered = model_orchestra::chart::to_yaml_stream(&render_v1alpha2(&sample));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/sample-v1alpha2.yaml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &rendered).unwrap();
    }
    assert!(
        rendered == std::fs::read_to_string(path).unwrap_or_default(),
        "{path} differs; run UPDATE_GOLDEN=1 cargo test --test contract_v1alpha2"
    );
}

#[test]
fn each_chart_renders_only_its_own_version() {
    let doc = model_orchestra_api::parse::document_from_yaml(&cr(ONE_APP)).unwrap();
    let err = model_orchestra::render_document(&doc, Some(chart_v1alpha2()), "default").unwrap_err().to_string();
    assert!(err.contains("renders v1alpha2 ModelOrchestras, not v1alpha1"), "{err}");
}

// The model cache (beyond upstream).

const CACHED: &str = "applicationTemplate:\n  modelCache: {enabled: true, size: 20Gi}\napplications:\n  chat:\n    readerConfig: {modelName: org/model}\n";

fn download_job(objects: &[model_orchestra::chart::RenderedObject]) -> &serde_json::Value {
    &objects.iter().find(|o| o.kind == Kind::Job).expect("a download Job").object
}

#[test]
fn a_cached_application_mounts_its_claim_at_code_models_instead_of_the_default_volume() {
    let objects = render_v1alpha2(&cr_v1alpha2(CACHED));
    let claim = find(&objects, Kind::PersistentVolumeClaim, "demo-model-orchestra-chat-models");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "20Gi");
    assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert!(claim["spec"].get("storageClassName").is_none(), "empty: the cluster's default class");
    let deployment = find(&objects, Kind::Deployment, "demo-model-orchestra-chat");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    let models = volumes.iter().find(|v| v["name"] == "models").unwrap();
    assert_eq!(
        models,
        &json!({"name": "models", "persistentVolumeClaim": {"claimName": "demo-model-orchestra-chat-models"}})
    );
    assert!(container(deployment)["volumeMounts"]
        .as_array()
        .unwrap()
        .contains(&json!({"name": "models", "mountPath": "/code/models"})));
}

#[test]
fn the_download_job_fetches_the_readers_model_into_the_claim_with_the_token_from_its_secret() {
    let spec = format!("{CACHED}    modelCache:\n      downloader: {{tokenSecret: {{name: hf, key: token}}}}\n");
    let objects = render_v1alpha2(&cr_v1alpha2(&spec));
    let job = download_job(&objects);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["volumes"][0]["persistentVolumeClaim"]["claimName"], "demo-model-orchestra-chat-models");
    let c = &pod["containers"][0];
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/code/models");
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError", "a failure's log reaches the status");
    let env = c["env"].as_array().unwrap();
    assert!(env.contains(&json!({"name": "MODEL_NAME", "value": "org/model"})));
    assert!(env.contains(&json!({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}})));
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"], "model-chat",
        "not the application's pods"
    );
}

#[test]
fn a_new_model_or_refresh_is_a_new_job_and_rolls_the_pods_and_the_same_one_is_not() {
    let revision = |objects: &[model_orchestra::chart::RenderedObject]| {
        let job = download_job(objects)["metadata"]["name"].as_str().unwrap().to_string();
        let pods = find(objects, Kind::Deployment, "demo-model-orchestra-chat")["spec"]["template"]["metadata"]
            ["annotations"]["models.titanml.co/model-revision"]
            .clone();
        (job, pods)
    };
    let first = revision(&render_v1alpha2(&cr_v1alpha2(CACHED)));
    assert_eq!(first, revision(&render_v1alpha2(&cr_v1alpha2(CACHED))));
    let other_model = revision(&render_v1alpha2(&cr_v1alpha2(&CACHED.replace("org/model", "org/other"))));
    assert_ne!(first.0, other_model.0);
    assert_ne!(first.1, other_model.1);
    let doc = model_orchestra_api::parse::document_from_yaml(&cr_v1alpha2(CACHED)).unwrap();
    let values = model_orchestra::versions::served(doc.api_version).values(&doc.spec).unwrap();
    let refreshed =
        chart_v1alpha2().render("demo", "default", &values, &[("chat".to_string(), "r1".to_string())].into()).unwrap();
    assert_ne!(first, revision(&refreshed.objects));
}

#[test]
fn an_application_inherits_the_template_cache_key_by_key() {
    let spec = "applicationTemplate:\n  modelCache: {enabled: true, size: 20Gi, storageClassName: fast}\napplications:\n  chat:\n    modelCache: {size: 80Gi}\n  plain:\n    modelCache: {enabled: false}\n";
    let objects = render_v1alpha2(&cr_v1alpha2(spec));
    let claim = find(&objects, Kind::PersistentVolumeClaim, "demo-model-orchestra-chat-models");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "80Gi");
    assert_eq!(claim["spec"]["storageClassName"], "fast");
    assert!(!has(&objects, Kind::PersistentVolumeClaim, "demo-model-orchestra-plain-models"));
}

#[test]
fn a_download_job_name_over_63_characters_is_refused_naming_the_cache() {
    let app = "a".repeat(40);
    let spec = format!("applicationTemplate:\n  modelCache: {{enabled: true}}\napplications:\n  {app}: {{}}\n");
    let err = try_render_v1alpha2(&cr_v1alpha2(&spec)).unwrap_err().to_string();
    assert!(err.contains(&format!("spec.applications.{app}.modelCache")) && err.contains("63"), "{err}");
}

#[test]
fn the_download_runs_on_the_applications_nodes_with_its_security_contexts_but_no_gpu() {
    let spec = format!(
        "{CACHED}    nodeSelector: {{nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}\n    securityContext: {{runAsNonRoot: true}}\n    podSecurityContext: {{fsGroup: 1000}}\n    readerConfig: {{modelName: org/model, device: cuda}}\n"
    );
    let objects = render_v1alpha2(&cr_v1alpha2(&spec.replace("    readerConfig: {modelName: org/model}\n", "")));
    let pod = &download_job(&objects)["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
    assert_eq!(pod["tolerations"][0]["key"], "nvidia.com/gpu", "it may run where the GPU nodes' taint is");
    assert_eq!(pod["securityContext"]["fsGroup"], 1000);
    assert_eq!(pod["containers"][0]["securityContext"]["runAsNonRoot"], true);
    assert!(pod["containers"][0].get("resources").is_none(), "no GPU for a download");
}

// Verified promotion (beyond upstream).

const PROMOTED: &str = "applications:\n  chat:\n    readerConfig: {modelName: org/model, consumerGroup: primary}\n    promotion: {enabled: true}\n";

fn revision(objects: &[model_orchestra::chart::RenderedObject], name: &str) -> String {
    find(objects, Kind::Deployment, name)["spec"]["template"]["metadata"]["annotations"]["models.titanml.co/revision"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} carries no revision"))
        .to_string()
}

#[test]
fn a_promoted_application_renders_a_candidate_registered_under_a_verification_group() {
    let objects = render_v1alpha2(&cr_v1alpha2(PROMOTED));
    let rev = revision(&objects, "demo-model-orchestra-chat");
    assert_eq!(revision(&objects, "demo-model-orchestra-chat-candidate"), rev, "the candidate is of the same revision");
    let candidate = config_yaml(&objects, "demo-model-orchestra-chat-candidate");
    assert!(candidate.contains(&format!("consumer_group: \"verify-{rev}\"")), "{candidate}");
    assert!(config_yaml(&objects, "demo-model-orchestra-chat").contains("consumer_group: \"primary\""));
    let deployment = find(&objects, Kind::Deployment, "demo-model-orchestra-chat-candidate");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    let component = &deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"];
    assert_eq!(component, "candidate-chat", "no selector of the application reaches the candidate's pods");
}

#[test]
fn a_new_model_is_a_new_revision_and_a_new_replica_count_is_not() {
    let first = revision(&render_v1alpha2(&cr_v1alpha2(PROMOTED)), "demo-model-orchestra-chat");
    let other_model = render_v1alpha2(&cr_v1alpha2(&PROMOTED.replace("org/model", "org/other")));
    assert_ne!(revision(&other_model, "demo-model-orchestra-chat"), first);
    let scaled = render_v1alpha2(&cr_v1alpha2(&PROMOTED.replace("promotion:", "replicaCount: 3\n    promotion:")));
    assert_eq!(revision(&scaled, "demo-model-orchestra-chat"), first);
}

#[test]
fn without_promotion_nothing_changes() {
    let objects = render_v1alpha2(&cr_v1alpha2(ONE_APP));
    assert!(!has(&objects, Kind::Deployment, "demo-model-orchestra-chat-candidate"));
    let annotations =
        &find(&objects, Kind::Deployment, "demo-model-orchestra-chat")["spec"]["template"]["metadata"]["annotations"];
    assert!(annotations.get("models.titanml.co/revision").is_none());
}

#[test]
fn an_expect_that_is_no_regular_expression_is_refused_naming_it() {
    let spec = PROMOTED.replace("{enabled: true}", "{enabled: true, expect: '(yes'}");
    let err = try_render_v1alpha2(&cr_v1alpha2(&spec)).unwrap_err().to_string();
    assert!(
        err.contains("spec.applications.chat.promotion.expect") && err.contains("not a regular expression"),
        "{err}"
    );
}

#[test]
fn an_application_inherits_the_templates_promotion_key_by_key() {
    let spec = "applicationTemplate:\n  promotion: {enabled: true, prompt: 'Say yes.'}\napplications:\n  chat:\n    promotion: {expect: '^ok'}\n  plain:\n    promotion: {enabled: false}\n";
    let objects = render_v1alpha2(&cr_v1alpha2(spec));
    assert!(has(&objects, Kind::Deployment, "demo-model-orchestra-chat-candidate"));
    assert!(!has(&objects, Kind::Deployment, "demo-model-orchestra-plain-candidate"));
}
