//! Images against real parts: Debian's `docker-registry` on 127.0.0.1 (ephemeral port) and
//! `skopeo` as the independent client. `make test` installs both
//! (scripts/install-test-deps.sh); without them these tests fail rather than pass.

use std::path::Path;
use std::process::Command;

use crate::support::{run, skopeo, tool, Registry, Temp};

use crate::support::{bundle, push_hand_made_base, unpack_with_skopeo};

#[test]
fn a_pushed_bundle_image_carries_the_annotations_as_labels_and_round_trips_through_skopeo() {
    let registry = Registry::start("bundle");
    let work = Temp::new("bundle");
    let dir = bundle(&work.0, "1.0.0");
    let reference = format!("{}/model-orchestra/bundle:v1.0.0", registry.addr);
    let digest = String::from_utf8(run(tool().args(["bundle", "build"]).arg(&dir).args(["--push", &reference])).stdout)
        .unwrap()
        .trim()
        .to_string();

    let inspect = skopeo(&["inspect", "--tls-verify=false", &format!("docker://{reference}")]);
    assert_eq!(inspect["Digest"], digest.as_str());
    assert_eq!(inspect["Labels"]["operators.operatorframework.io.bundle.package.v1"], "model-orchestra-operator");
    assert_eq!(inspect["Labels"]["operators.operatorframework.io.bundle.mediatype.v1"], "registry+v1");
    assert_eq!(inspect["Layers"].as_array().unwrap().len(), 1);
    let raw = skopeo(&["inspect", "--raw", "--tls-verify=false", &format!("docker://{reference}")]);
    assert_eq!(raw["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(raw["layers"][0]["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip");

    // Content round trip: copy to an OCI directory and unpack the layer.
    let unpacked = unpack_with_skopeo(&work.0, &reference);
    for file in ["manifests/model-orchestra-operator.clusterserviceversion.yaml", "metadata/annotations.yaml"] {
        assert_eq!(std::fs::read(unpacked.join(file)).unwrap(), std::fs::read(dir.join(file)).unwrap(), "{file}");
    }
}

#[test]
fn pushing_a_tag_that_names_different_content_is_refused_unless_forced() {
    let registry = Registry::start("immutable");
    let work = Temp::new("immutable");
    let first = bundle(&work.0, "1.0.0");
    let second = bundle(&work.0, "1.0.1");
    let reference = format!("{}/model-orchestra/bundle:v1.0.0", registry.addr);
    run(tool().args(["bundle", "build"]).arg(&first).args(["--push", &reference]));
    // The same content again is fine.
    run(tool().args(["bundle", "build"]).arg(&first).args(["--push", &reference]));
    let before = skopeo(&["inspect", "--tls-verify=false", &format!("docker://{reference}")])["Digest"].clone();
    let refused = tool().args(["bundle", "build"]).arg(&second).args(["--push", &reference]).output().unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("a published tag never changes"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(
        skopeo(&["inspect", "--tls-verify=false", &format!("docker://{reference}")])["Digest"],
        before,
        "the tag is unchanged"
    );
    run(tool().args(["bundle", "build"]).arg(&second).args(["--push", &reference, "--force"]));
    assert_ne!(skopeo(&["inspect", "--tls-verify=false", &format!("docker://{reference}")])["Digest"], before);
}

#[test]
fn the_oci_layout_output_is_readable_by_skopeo_and_reproducible() {
    let work = Temp::new("layout");
    let dir = bundle(&work.0, "1.0.0");
    let layout = work.0.join("layout");
    let digest = String::from_utf8(
        run(tool().args(["bundle", "build"]).arg(&dir).arg("--oci-layout").arg(&layout).args(["--tag", "v1.0.0"]))
            .stdout,
    )
    .unwrap();
    let inspect = skopeo(&["inspect", &format!("oci:{}:v1.0.0", layout.display())]);
    assert_eq!(inspect["Labels"]["operators.operatorframework.io.bundle.channels.v1"], "stable");
    assert_eq!(inspect["Digest"], digest.trim());
    let again = String::from_utf8(
        run(tool().args(["bundle", "build"]).arg(&dir).arg("--oci-layout").arg(work.0.join("again"))).stdout,
    )
    .unwrap();
    assert_eq!(digest, again, "same bundle, same digest");
}

#[test]
fn the_operator_image_runs_its_binary_as_a_non_root_entrypoint() {
    let registry = Registry::start("operator");
    let work = Temp::new("operator");
    // The operator binary when the workspace built it (`make test`), else this crate's.
    let operator = Path::new(env!("CARGO_BIN_EXE_bundle-tool")).with_file_name("model-orchestra-operator");
    let binary = if operator.exists() {
        operator.to_string_lossy().into_owned()
    } else {
        env!("CARGO_BIN_EXE_bundle-tool").to_string()
    };
    let binary = binary.as_str();
    let reference = format!("{}/model-orchestra/operator:v1.0.0", registry.addr);
    run(tool().args(["image", "build", "--binary", binary, "--push", &reference]));
    let config = skopeo(&["inspect", "--config", "--tls-verify=false", &format!("docker://{reference}")]);
    assert_eq!(config["config"]["Entrypoint"][0], "/model-orchestra-operator");
    assert_eq!(config["config"]["User"], "65532:65532");
    let root = unpack_with_skopeo(&work.0, &reference);
    let help = run(Command::new(root.join("model-orchestra-operator")).arg("--help"));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage"), "the extracted entrypoint runs");
}

#[test]
fn an_image_built_on_a_pulled_base_keeps_its_layers_and_merges_its_config() {
    let registry = Registry::start("base");
    let work = Temp::new("base");
    let base = format!("{}/library/base:1", registry.addr);
    push_hand_made_base(&work.0, &base);
    let base_raw = skopeo(&["inspect", "--raw", "--tls-verify=false", &format!("docker://{base}")]);
    let reference = format!("{}/model-orchestra/operator:v1.0.0", registry.addr);
    run(tool().args([
        "image",
        "build",
        "--binary",
        env!("CARGO_BIN_EXE_bundle-tool"),
        "--base",
        &base,
        "--push",
        &reference,
    ]));

    let raw = skopeo(&["inspect", "--raw", "--tls-verify=false", &format!("docker://{reference}")]);
    let layers = raw["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2, "the base layer, then ours");
    assert_eq!(layers[0], base_raw["layers"][0], "the base layer is reused byte for byte");
    let config = skopeo(&["inspect", "--config", "--tls-verify=false", &format!("docker://{reference}")]);
    let inner = &config["config"];
    assert_eq!(inner["Entrypoint"][0], "/model-orchestra-operator");
    assert!(inner["Cmd"].is_null(), "a new entrypoint resets the base's cmd: {inner}");
    assert_eq!(inner["Labels"]["base.example/name"], "hand-made", "base labels are kept");
    assert_eq!(inner["Labels"]["org.opencontainers.image.title"], "model-orchestra-operator");
    let env: Vec<&str> = inner["Env"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(env, ["PATH=/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"], "env merged by key");
    assert_eq!(config["rootfs"]["diff_ids"].as_array().unwrap().len(), 2);

    // The whole image unpacks into one root with both layers' files.
    let root = unpack_with_skopeo(&work.0, &reference);
    assert_eq!(std::fs::read_to_string(root.join("etc/base-release")).unwrap(), "base 1\n");
    assert!(root.join("model-orchestra-operator").exists());
}
