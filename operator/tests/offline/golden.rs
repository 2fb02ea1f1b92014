//! Golden files: the full rendered output of the sample and of a maximal CR (every field
//! set). Regenerate after an intended change with `UPDATE_GOLDEN=1 cargo test --test golden`
//! and review the diff.

use crate::common::*;
use model_orchestra::chart::to_yaml_stream;

fn check_golden(name: &str, yaml: &str) {
    let rendered = to_yaml_stream(&render(yaml));
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        rendered == want,
        "{path} differs from the render; run UPDATE_GOLDEN=1 cargo test --test golden and review the diff"
    );
}

#[test]
fn sample_matches_golden() {
    check_golden("sample.yaml", &sample());
}

#[test]
fn maximal_cr_matches_golden() {
    check_golden("maximal.yaml", &data("maximal.yaml"));
}

#[test]
fn rendering_is_byte_stable() {
    let yaml = data("maximal.yaml");
    let first = to_yaml_stream(&render(&yaml));
    for _ in 0..5 {
        assert_eq!(to_yaml_stream(&render(&yaml)), first);
    }
}

#[test]
fn the_yaml_stream_parses_back_to_the_same_objects() {
    let objects = render(&data("maximal.yaml"));
    let text = to_yaml_stream(&objects);
    let parsed: Vec<serde_json::Value> =
        text.split("---\n").filter(|d| !d.trim().is_empty()).map(|d| serde_yaml::from_str(d).unwrap()).collect();
    let originals: Vec<serde_json::Value> = objects.into_iter().map(|o| o.object).collect();
    assert_eq!(parsed, originals);
}

#[test]
fn a_chart_directory_renders_like_the_embedded_chart() {
    let dir = format!("{}/../charts/model-orchestra", env!("CARGO_MANIFEST_DIR"));
    let from_dir = model_orchestra::chart::Chart::from_dir(std::path::Path::new(&dir)).unwrap();
    let doc = model_orchestra_api::parse::document_from_yaml(&data("maximal.yaml")).unwrap();
    let a = model_orchestra::render_document(&doc, Some(&from_dir), "default").unwrap().objects;
    assert_eq!(a, render(&data("maximal.yaml")));
}

/// Application `i`'s values, with something of its own (an env value, a scaler on every
/// third), so the render has to keep every application's objects apart.
fn application(i: usize) -> String {
    format!(
        "  app-{i}:\n    env: [{{name: INDEX, value: '{i}'}}]\n    readerConfig: {{modelName: org/model-{i}}}\n    scaling: {{enabled: {}}}\n",
        i.is_multiple_of(3)
    )
}

fn with_applications(indices: impl Iterator<Item = usize>) -> String {
    cr(&format!("applications:\n{}", indices.map(application).collect::<String>()))
}

#[test]
fn many_applications_render_exactly_the_objects_each_renders_alone() {
    // Above a few applications the render is split over threads; what each application
    // gets must not depend on that.
    use model_orchestra::chart::Component;
    let together = render(&with_applications(0..40));
    let mut alone: Vec<_> = render(&with_applications(0..1))
        .into_iter()
        .filter(|o| !matches!(o.component, Component::Application(_)))
        .collect();
    for i in 0..40 {
        alone.extend(
            render(&with_applications(i..i + 1))
                .into_iter()
                .filter(|o| matches!(o.component, Component::Application(_))),
        );
    }
    alone.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    assert_eq!(together.len(), alone.len());
    assert!(together == alone, "a 40-application render differs from its applications rendered one by one");
}

#[test]
fn a_bad_application_far_down_the_list_is_named_as_in_a_small_render() {
    let yaml =
        with_applications(0..40).replace("app-37:", "app-37-with-a-name-that-is-long-enough-to-overflow-the-label:");
    let err = try_render(&yaml).unwrap_err().to_string();
    assert!(err.contains("spec.applications.app-37-with-a-name-that-is-long-enough-to-overflow-the-label"), "{err}");
}
