//! The `model-orchestra-operator` binary as a user runs it.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn operator(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn render_prints_the_sample_as_a_yaml_stream() {
    let out = operator(&["render", "-f", "config/samples/modelorchestra.yaml"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("---\n").count(), 7);
    for needle in [
        "nvidia.com/gpu.product: NVIDIA-GeForce-RTX-3060",
        "nvidia.com/gpu: '1'",
        "key: nvidia.com/gpu",
        "namespace: default",
    ] {
        assert!(text.contains(needle), "missing {needle}");
    }
}

#[test]
fn render_reads_standard_input_and_takes_a_namespace() {
    let sample =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples/modelorchestra.yaml")).unwrap();
    let out = operator(&["render", "-f", "-", "-n", "inference"], Some(&sample));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("namespace: inference"));
    assert!(!stdout(&out).contains("namespace: default"));
}

#[test]
fn render_of_invalid_input_exits_non_zero_names_the_field_and_prints_nothing() {
    let bad =
        "apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata: {name: x}\nspec:\n  applications:\n    chat: {readerConfig: {device: tpu}}\n";
    let out = operator(&["render", "-f", "-"], Some(bad));
    assert!(!out.status.success());
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(err.contains("<stdin>") && err.contains("spec.applications.chat.readerConfig.device"), "{err}");
}

#[test]
fn render_of_a_missing_file_names_it() {
    let out = operator(&["render", "-f", "no/such.yaml"], None);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no/such.yaml"));
}

#[test]
fn crd_prints_the_checked_in_crd() {
    let out = operator(&["crd"], None);
    assert!(out.status.success());
    let checked_in = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/crd/models.titanml.co_modelorchestras.yaml"
    ))
    .unwrap();
    assert_eq!(stdout(&out), checked_in);
}

#[test]
fn a_render_error_names_its_field_once() {
    let bad = "apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata: {name: x}\nspec:\n  applications:\n    chat: {podLabels: {team: \"has space\"}}\n";
    let out = operator(&["render", "-f", "-"], Some(bad));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.matches("spec.applications.chat.podLabels.team").count(), 1, "{err}");
}

#[test]
fn an_application_named_gateway_is_refused_by_its_field() {
    let bad = "apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata: {name: x}\nspec:\n  applications:\n    gateway: {}\n";
    let err = stderr(&operator(&["render", "-f", "-"], Some(bad)));
    assert!(err.contains("spec.applications.gateway") && err.contains("reserved"), "{err}");
}

#[test]
fn render_takes_a_v1alpha2_manifest_and_renders_it_with_its_chart() {
    let out = operator(&["render", "-f", "config/samples/modelorchestra-v1alpha2.yaml"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("takeoff:"), "the v1alpha2 contract's config.yaml");
    assert!(text.contains("helm.sh/chart: model-orchestra-1.0.0"), "rendered by the v1alpha2 chart");
}

#[test]
fn an_unknown_api_version_is_refused_naming_the_versions_render_takes() {
    let out = operator(
        &["render", "-f", "-"],
        Some("apiVersion: models.titanml.co/v1beta1\nkind: ModelOrchestra\nmetadata: {name: x}\n"),
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("apiVersion")
            && err.contains("models.titanml.co/v1alpha1")
            && err.contains("models.titanml.co/v1alpha2"),
        "{err}"
    );
}
