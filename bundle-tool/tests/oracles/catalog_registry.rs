//! The catalog round trip against real parts: bundle images pushed to a loopback
//! `docker-registry`, the template rendered from the registry (then from the digest
//! cache), validated, built into a catalog image, pushed, and read back with `skopeo`.

use std::path::Path;

use crate::support::{bundle, push_hand_made_base, run, skopeo, tool, unpack_with_skopeo, Registry, Temp};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Bundles 1.0.0 and 1.1.0 pushed as `<registry>/acme/bundle:v…`; returns the template.
fn push_two_bundles(registry: &Registry, work: &Path) -> std::path::PathBuf {
    let mut template = String::from(
        "schema: olm.semver\ngenerateMajorChannels: true\ngenerateMinorChannels: true\nstable:\n  bundles:\n",
    );
    for v in ["1.0.0", "1.1.0"] {
        let dir = bundle(&work.join("bundles"), v);
        let reference = format!("{}/acme/bundle:v{v}", registry.addr);
        run(tool().args(["bundle", "build"]).arg(&dir).args(["--push", &reference]));
        template.push_str(&format!("  - image: {reference}\n"));
    }
    let file = work.join("operator_catalog.yaml");
    std::fs::write(&file, template).unwrap();
    file
}

#[test]
fn a_catalog_rendered_from_registry_bundles_is_validated_built_pushed_and_readable_by_skopeo() {
    let registry = Registry::start("catalog");
    let work = Temp::new("catalog");
    let template = push_two_bundles(&registry, &work.0);
    let cache = work.0.join("cache");
    let configs = work.0.join("configs");
    let out = configs.join("model-orchestra-operator/catalog.yaml");

    let cold =
        run(tool().args(["catalog", "render"]).arg(&template).arg("--cache-dir").arg(&cache).arg("-o").arg(&out));
    assert!(stderr(&cold).contains("2 pulled"), "{}", stderr(&cold));
    let first = std::fs::read_to_string(&out).unwrap();
    assert!(first.contains(&format!("image: {}/acme/bundle:v1.1.0", registry.addr)));
    assert!(
        first.contains("name: stable-v1.1") && first.contains("replaces: model-orchestra-operator.v1.0.0"),
        "{first}"
    );

    let warm =
        run(tool().args(["catalog", "render"]).arg(&template).arg("--cache-dir").arg(&cache).arg("-o").arg(&out));
    assert!(stderr(&warm).contains("2 from the cache"), "{}", stderr(&warm));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), first, "the cache gives the same catalog");
    let local = work.0.join("local.yaml");
    run(tool()
        .args(["catalog", "render"])
        .arg(&template)
        .arg("--bundles-dir")
        .arg(work.0.join("bundles"))
        .arg("-o")
        .arg(&local));
    assert_eq!(
        std::fs::read_to_string(&local).unwrap(),
        first,
        "the bundle directories and their images render the same"
    );

    run(tool().args(["catalog", "validate"]).arg(&configs));
    let reference = format!("{}/acme/catalog:v1", registry.addr);
    let digest =
        String::from_utf8(run(tool().args(["catalog", "build"]).arg(&configs).args(["--push", &reference])).stdout)
            .unwrap();

    let inspect = skopeo(&["inspect", "--tls-verify=false", &format!("docker://{reference}")]);
    assert_eq!(inspect["Digest"], digest.trim());
    assert_eq!(inspect["Labels"]["operators.operatorframework.io.index.configs.v1"], "/configs");
    let config = skopeo(&["inspect", "--config", "--tls-verify=false", &format!("docker://{reference}")]);
    assert!(config["config"]["Entrypoint"].is_null(), "FROM scratch: nothing to run, OLM v1 unpacks /configs");

    // The image's /configs is the rendered directory, byte for byte.
    let root = unpack_with_skopeo(&work.0, &reference);
    assert_eq!(std::fs::read_to_string(root.join("configs/model-orchestra-operator/catalog.yaml")).unwrap(), first);
}

#[test]
fn a_catalog_on_an_opm_base_serves_configs_without_a_cache_dir() {
    let registry = Registry::start("catalog-base");
    let work = Temp::new("catalog-base");
    let base = format!("{}/operator-framework/opm:latest", registry.addr);
    push_hand_made_base(&work.0, &base);
    let configs = work.0.join("configs/acme");
    std::fs::create_dir_all(&configs).unwrap();
    std::fs::write(
        configs.join("catalog.yaml"),
        "schema: olm.package\nname: acme\ndefaultChannel: stable-v1\n---\nschema: olm.channel\nname: stable-v1\npackage: acme\nentries:\n- name: acme.v1.0.0\n---\nschema: olm.bundle\nname: acme.v1.0.0\npackage: acme\nimage: quay.io/acme/bundle:v1.0.0\nproperties:\n- type: olm.package\n  value: {packageName: acme, version: 1.0.0}\n",
    )
    .unwrap();
    let reference = format!("{}/acme/catalog:v0", registry.addr);
    run(tool().args(["catalog", "build"]).arg(work.0.join("configs")).args(["--base", &base, "--push", &reference]));
    let config = skopeo(&["inspect", "--config", "--tls-verify=false", &format!("docker://{reference}")]);
    assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/bin/opm"]));
    assert_eq!(
        config["config"]["Cmd"],
        serde_json::json!(["serve", "/configs"]),
        "no --cache-dir: opm builds its cache at start (trap 9)"
    );
    assert_eq!(config["config"]["Labels"]["operators.operatorframework.io.index.configs.v1"], "/configs");
    assert_eq!(config["config"]["Labels"]["base.example/name"], "hand-made");
    assert_eq!(config["rootfs"]["diff_ids"].as_array().unwrap().len(), 2, "the base layer, then /configs");
}

#[test]
fn an_image_without_the_bundle_label_is_not_rendered() {
    let registry = Registry::start("catalog-nobundle");
    let work = Temp::new("catalog-nobundle");
    let not_a_bundle = format!("{}/library/base:1", registry.addr);
    push_hand_made_base(&work.0, &not_a_bundle);
    let template = work.0.join("t.yaml");
    std::fs::write(&template, format!("schema: olm.semver\nstable:\n  bundles:\n  - image: {not_a_bundle}\n")).unwrap();
    let out = tool()
        .args(["catalog", "render"])
        .arg(&template)
        .arg("--cache-dir")
        .arg(work.0.join("cache"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("not a bundle image")
            && e.contains("operators.operatorframework.io.bundle.package.v1")
            && e.contains("t.yaml"),
        "{e}"
    );
}

#[test]
fn a_template_image_missing_from_the_registry_is_named_with_the_fix() {
    let registry = Registry::start("catalog-missing");
    let work = Temp::new("catalog-missing");
    let template = work.0.join("t.yaml");
    std::fs::write(
        &template,
        format!("schema: olm.semver\nstable:\n  bundles:\n  - image: {}/acme/bundle:v9.9.9\n", registry.addr),
    )
    .unwrap();
    let out = tool()
        .args(["catalog", "render"])
        .arg(&template)
        .arg("--cache-dir")
        .arg(work.0.join("cache"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("acme/bundle:v9.9.9: no such image") && e.contains("fix:"), "{e}");
}
