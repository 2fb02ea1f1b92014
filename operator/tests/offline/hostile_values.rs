//! No YAML injection: arbitrary strings in every free-text field of a CR never change the
//! set of rendered objects or the shape of their fields, and reach the output as the same
//! data; in a field with a syntax of its own (names, hosts, paths, label values) an
//! arbitrary string is either valid there and changes nothing else, or rejected with that
//! field's path. 10,000 cases by default (`PROPTEST_CASES` overrides); the same CR as
//! `v1alpha2` through its chart, a tenth as many.

use crate::common::*;
use model_orchestra::chart::{to_yaml_stream, RenderedObject};
use model_orchestra_api::kinds::Kind;
use proptest::prelude::*;
use serde_json::Value;

/// A CR where every `X` (free text) is replaced by a generated string, in field order below;
/// the fields with a syntax of their own are in [`SYNTAX_SLOTS`].
const TEMPLATE: &str = r#"
apiVersion: models.titanml.co/v1alpha1
kind: ModelOrchestra
metadata: {name: hostile, namespace: ns}
spec:
  imagePullSecrets: [{name: regcred}]
  serviceAccount: {annotations: {note: X}}
  gateway:
    image: {repository: example.com/gateway, tag: v1}
    env: [{name: GATEWAY_NOTE, value: X}]
    podAnnotations: {note: X}
    config: {banner: X}
    ingress: {enabled: true, annotations: {note: X}, hosts: [{host: example.com, paths: [{path: /}]}], tls: [{hosts: [example.com], secretName: tls}]}
    exportPrometheusMetrics: true
  applicationTemplate:
    env: [{name: SHARED, value: X}]
    volumeMounts: [{name: data, mountPath: X, subPath: data}]
    volumes: [{name: data, emptyDir: {}}]
  applications:
    chat:
      env: [{name: OWN, value: X}]
      podAnnotations: {note: X}
      livenessProbe: {httpGet: {path: X, port: 3001}}
      nodeSelector: {pool: gpu}
      readerConfig:
        modelName: X
        device: cuda
        accessToken: X
        logLevel: X
        quantType: X
        loras: X
        constrainedDecodingBackend: X
        cudaVisibleDevices: X
        futureOption: X
      scaling: {enabled: true, annotations: {note: X}}
"#;

fn slots() -> usize {
    TEMPLATE.matches(": X").count() + TEMPLATE.matches("[X]").count()
}

/// The CR with the generated strings in place of the `X`s (inserted as data, via serde).
fn cr_with(strings: &[String]) -> Value {
    let mut cr: Value = serde_yaml::from_str(TEMPLATE).unwrap();
    let mut next = strings.iter();
    fill(&mut cr, &mut next);
    assert!(next.next().is_none(), "every generated string is used");
    cr
}

fn fill<'a>(v: &mut Value, next: &mut impl Iterator<Item = &'a String>) {
    match v {
        Value::String(s) if s == "X" => *s = next.next().expect("enough strings").clone(),
        Value::Object(m) => m.values_mut().for_each(|v| fill(v, next)),
        Value::Array(a) => a.iter_mut().for_each(|v| fill(v, next)),
        _ => {}
    }
}

/// The structure without the string contents: keys, list lengths and value types.
fn shape(v: &Value) -> Value {
    match v {
        Value::String(_) => Value::String(String::new()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        other => other.clone(),
    }
}

fn render_value(cr: &Value) -> Vec<RenderedObject> {
    model_orchestra::render_value(cr, "default").unwrap_or_else(|e| panic!("render failed: {e}")).objects
}

/// Shapes of the render with benign strings, computed once.
fn baseline_shapes() -> &'static Vec<(Kind, String, Value)> {
    static BASELINE: std::sync::OnceLock<Vec<(Kind, String, Value)>> = std::sync::OnceLock::new();
    BASELINE.get_or_init(|| shapes(&render_value(&cr_with(&vec!["x".to_string(); slots()]))))
}

fn shapes(objects: &[RenderedObject]) -> Vec<(Kind, String, Value)> {
    objects.iter().map(|o| (o.kind, o.name.clone(), shape(&o.object))).collect()
}

/// Fragments that break naive YAML templating.
const HOSTILE: &[&str] = &[
    "\n",
    "\r\n",
    "---",
    "...",
    "{{",
    "}}",
    "{{{",
    ": ",
    "#",
    "\"",
    "'",
    "\\",
    "&anchor ",
    "*anchor",
    "!!binary ",
    "!tag ",
    "<<: ",
    "- ",
    "? ",
    "|",
    ">-",
    "%YAML 1.1",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\t",
    "null",
    "~",
    "true",
    "0x10",
    "1e3",
    "@",
    "`",
    "\u{0}",
    "\u{7f}",
    "\u{85}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "é",
    "日本",
    "🚀",
    "\u{1F600}",
    "apiVersion: v1\nkind: Secret",
    "}, \"kind\": \"Secret\"",
    "\"\n---\nkind: Secret\n",
];

fn hostile_string() -> impl Strategy<Value = String> {
    let pieces = prop::collection::vec(prop::sample::select(HOSTILE), 1..8).prop_map(|p| p.concat());
    let big = prop::sample::select(HOSTILE).prop_map(|p| p.repeat(100 * 1024 / p.len().max(1) + 1));
    // About one case in twenty carries a 100 KB string somewhere.
    prop_oneof![
        600 => pieces,
        300 => "\\PC{1,40}",
        98 => any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
        2 => big,
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hostile_strings_never_change_objects_or_shapes(strings in prop::collection::vec(hostile_string(), slots())) {
        let objects = render_value(&cr_with(&strings));
        prop_assert_eq!(&shapes(&objects), baseline_shapes());

        // The value arrives as the same data: in the pod env, and in the reader's config.yaml.
        let d = &objects.iter().find(|o| o.kind == Kind::Deployment && o.name.ends_with("-chat")).unwrap().object;
        let own = container(d)["env"].as_array().unwrap().iter().find(|e| e["name"] == "OWN").unwrap();
        let cr = cr_with(&strings);
        prop_assert_eq!(&own["value"], &cr["spec"]["applications"]["chat"]["env"][0]["value"]);
        let cm = &objects.iter().find(|o| o.kind == Kind::ConfigMap && o.name.ends_with("-chat")).unwrap().object;
        let config: Value = serde_yaml::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
        prop_assert_eq!(
            &config["model-orchestra"]["readers_config"]["chat"]["model_name"],
            &cr["spec"]["applications"]["chat"]["readerConfig"]["modelName"]
        );

        // And the printed YAML stream reads back as exactly these objects.
        let text = to_yaml_stream(&objects);
        let reparsed: Vec<Value> = serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
        let originals: Vec<Value> = objects.iter().map(|o| o.object.clone()).collect();
        prop_assert_eq!(reparsed, originals);
    }
}

/// The same CR as `v1alpha2` (the template's hostile strings plus a models volume, and a
/// model cache whose downloader takes some of them), through the `v1alpha2` chart.
fn cr_v1alpha2_with(strings: &[String]) -> Value {
    let mut cr = cr_with(strings);
    cr["apiVersion"] = "models.titanml.co/v1alpha2".into();
    cr["spec"]["applications"]["chat"]["modelsVolume"] =
        serde_json::json!({"name": "models", "persistentVolumeClaim": {"claimName": "models"}});
    cr["spec"]["applications"]["chat"]["modelCache"] = serde_json::json!({
        "enabled": true,
        "downloader": {"command": ["sh", "-c", strings[0]], "env": [{"name": "NOTE", "value": strings[1]}], "image": "example.com/downloader:v1"}
    });
    // A distributed-llama group: its downloader, model name, env and annotations.
    cr["spec"]["applications"]["big"] = serde_json::json!({
        "engine": {"distributedLlama": {"nodes": 4, "downloader": {"command": ["sh", "-c", strings[2]]}}},
        "readerConfig": {"modelName": strings[3], "device": "cuda"},
        "env": [{"name": "GROUP_NOTE", "value": strings[4]}],
        "podAnnotations": {"note": strings[5]},
    });
    cr
}

/// The shapes of a `v1alpha2` render with the model's revision (a hash of the hostile
/// model name and downloader) left out of the names it is part of.
fn shapes_v1alpha2(objects: &[RenderedObject]) -> Vec<(Kind, String, Value)> {
    shapes(objects)
        .into_iter()
        .map(|(kind, name, shape)| match (kind, name.rsplit_once("-dl-")) {
            (Kind::Job, Some((base, _))) => (kind, format!("{base}-dl-<revision>"), shape),
            _ => (kind, name, shape),
        })
        .collect()
}

fn render_v1alpha2_value(cr: &Value) -> Vec<RenderedObject> {
    assert_eq!(cr["apiVersion"], "models.titanml.co/v1alpha2", "not read as v1alpha2");
    model_orchestra::render_value(cr, "default").unwrap_or_else(|e| panic!("render failed: {e}")).objects
}

fn baseline_v1alpha2_shapes() -> &'static Vec<(Kind, String, Value)> {
    static BASELINE: std::sync::OnceLock<Vec<(Kind, String, Value)>> = std::sync::OnceLock::new();
    BASELINE.get_or_init(|| shapes_v1alpha2(&render_v1alpha2_value(&cr_v1alpha2_with(&vec!["x".to_string(); slots()]))))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 10, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hostile_strings_never_change_v1alpha2_objects_or_shapes(strings in prop::collection::vec(hostile_string(), slots())) {
        let cr = cr_v1alpha2_with(&strings);
        let objects = render_v1alpha2_value(&cr);
        prop_assert_eq!(&shapes_v1alpha2(&objects), baseline_v1alpha2_shapes());
        let job = |app: &str| &objects.iter().find(|o| o.kind == Kind::Job && o.name.contains(&format!("-{app}-dl-"))).unwrap().object["spec"]["template"]["spec"]["containers"][0];
        prop_assert_eq!(&job("big")["command"][2], &Value::from(strings[2].clone()));
        let workers = &objects.iter().find(|o| o.kind == Kind::StatefulSet).unwrap().object["spec"]["template"];
        prop_assert!(workers["spec"]["containers"][0]["env"].as_array().unwrap().iter().any(|e| e["name"] == "GROUP_NOTE" && e["value"] == strings[4].as_str()));
        prop_assert_eq!(&workers["metadata"]["annotations"]["note"], &Value::from(strings[5].clone()));
        let job = job("chat");
        prop_assert_eq!(&job["command"][2], &Value::from(strings[0].clone()));
        prop_assert!(job["env"].as_array().unwrap().iter().any(|e| e["name"] == "NOTE" && e["value"] == strings[1].as_str()));
        let cm = &objects.iter().find(|o| o.kind == Kind::ConfigMap && o.name.ends_with("-chat")).unwrap().object;
        let config: Value = serde_yaml::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
        prop_assert_eq!(&config["takeoff"]["readers_config"]["chat"]["model_name"], &cr["spec"]["applications"]["chat"]["readerConfig"]["modelName"]);
        let text = to_yaml_stream(&objects);
        let reparsed: Vec<Value> = serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
        let originals: Vec<Value> = objects.iter().map(|o| o.object.clone()).collect();
        prop_assert_eq!(reparsed, originals);
    }
}

/// Fields with a syntax of their own: (JSON pointer into the CR, the field path an error
/// names).
const SYNTAX_SLOTS: &[(&str, &str)] = &[
    ("/spec/imagePullSecrets/0/name", "spec.imagePullSecrets[0].name"),
    ("/spec/gateway/image/repository", "spec.gateway.image.repository"),
    ("/spec/gateway/image/tag", "spec.gateway.image.tag"),
    ("/spec/gateway/env/0/name", "spec.gateway.env[0].name"),
    ("/spec/gateway/ingress/hosts/0/host", "spec.gateway.ingress.hosts[0].host"),
    ("/spec/gateway/ingress/hosts/0/paths/0/path", "spec.gateway.ingress.hosts[0].paths[0].path"),
    ("/spec/gateway/ingress/tls/0/hosts/0", "spec.gateway.ingress.tls[0].hosts[0]"),
    ("/spec/gateway/ingress/tls/0/secretName", "spec.gateway.ingress.tls[0].secretName"),
    ("/spec/applicationTemplate/volumeMounts/0/subPath", "spec.applicationTemplate.volumeMounts[0].subPath"),
    ("/spec/applications/chat/nodeSelector/pool", "spec.applications.chat.nodeSelector.pool"),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 10, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_hostile_string_in_a_field_with_syntax_is_rejected_there_or_changes_nothing_else(slot in 0..SYNTAX_SLOTS.len(), string in hostile_string()) {
        let (pointer, field) = SYNTAX_SLOTS[slot];
        let mut cr = cr_with(&vec!["x".to_string(); slots()]);
        *cr.pointer_mut(pointer).unwrap() = Value::String(string.clone());
        let outcome = model_orchestra::render_value(&cr, "default");
        match outcome {
            Err(model_orchestra::error::RenderError::Input(errors)) => {
                let e = &errors.errors()[0];
                prop_assert!(e.field.starts_with(field), "rejected at {} instead of {field}: {}", e.field, e.message)
            }
            Err(e) => prop_assert!(false, "not an input error: {e}"),
            Ok(rendered) => prop_assert_eq!(&shapes(&rendered.objects), baseline_shapes()),
        }
    }
}

#[test]
fn every_template_slot_is_a_string_field() {
    // Guards the fixture: the X count equals the generated strings, and the benign renders
    // (v1alpha1 and v1alpha2) have all kinds the charts can render, so every template is
    // exercised.
    let benign = vec!["x".to_string(); slots()];
    let mut objects = render_value(&cr_with(&benign));
    objects.extend(render_v1alpha2_value(&cr_v1alpha2_with(&benign)));
    // The model gateway's Role and RoleBinding: only where every application is Ollama.
    let open_engines = serde_json::json!({
        "apiVersion": "models.titanml.co/v1alpha2", "kind": "ModelOrchestra", "metadata": {"name": "chat"},
        "spec": {"applications": {"chat": {"engine": {"ollama": {"models": [{"name": "smollm2:135m"}]}},
                                           "sleep": {"enabled": true}}}}
    });
    objects.extend(render_v1alpha2_value(&open_engines));
    for kind in Kind::ALL {
        assert!(objects.iter().any(|o| o.kind == kind), "{kind:?} not rendered");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 10, failure_persistence: None, ..ProptestConfig::default() })]

    /// The success prompt is sent to the candidate, never rendered: whatever it holds (huge,
    /// NUL, template syntax), every object is the same as with a plain prompt.
    #[test]
    fn a_hostile_promotion_prompt_changes_no_object(prompt in hostile_string()) {
        let with_prompt = |p: &str| {
            let mut cr = cr_v1alpha2_with(&vec!["x".to_string(); slots()]);
            cr["spec"]["applications"]["chat"]["promotion"] = serde_json::json!({"enabled": true, "prompt": p});
            render_v1alpha2_value(&cr)
        };
        prop_assume!(!prompt.trim().is_empty());
        let plain = with_prompt("Are you ready?");
        prop_assert!(plain.iter().any(|o| o.name.ends_with("-chat-candidate")));
        prop_assert_eq!(with_prompt(&prompt), plain);
    }
}
