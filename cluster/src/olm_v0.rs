//! OLM v0 (operator-lifecycle-manager) as the local cluster offers it: its image and opm's,
//! built by the project's image code from the pinned modules (`tools/olm-v0`, `tools/opm`,
//! `tools/grpc-health-probe`) and pushed into the cluster's registry under their upstream
//! names — `quay.io/operator-framework/olm:<version>` is pulled from there, since the
//! cluster mirrors quay.io — and its install manifests as its release makes them: `helm
//! template` of the pinned module's chart with its upstream values, and its CRDs (rendered
//! and copied into `target/tools/share/olm-v0` by `scripts/build-go-tools.sh olm-v0`), less
//! what a cluster without the internet cannot run ([`install_manifests`]). (The module's
//! `deploy/upstream/quickstart` is older than its code: its catalog operator flags are
//! refused by v0.38.0's command, its CatalogSource CRD has no `grpcPodConfig`.)
//!
//! olm-operator and catalog-operator run as pods, as on any cluster: the catalog operator
//! dials each catalog's registry pod by its Service's DNS name, which only a pod resolves.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{tools, Cluster, Error};

/// The OLM v0 release `tools/olm-v0` pins, and its image's tag.
pub const VERSION: &str = "v0.38.0";
/// The opm release `tools/opm` pins, and its image's tag.
pub const OPM_VERSION: &str = "v1.73.0";
/// OLM's image on quay.io (`/bin/olm`, `/bin/catalog` and the utilities its pods copy).
pub const IMAGE: &str = "quay.io/operator-framework/olm";
/// opm's image on quay.io (`opm serve` in catalog pods, `opm alpha bundle extract` in unpack Jobs).
pub const OPM_IMAGE: &str = "quay.io/operator-framework/opm";
/// The namespace OLM's quickstart installs it in (and its global catalog namespace).
pub const NAMESPACE: &str = "olm";
/// Where Debian's busybox-static installs busybox: the image's `/bin/cp`, as upstream's
/// distroless `:debug` base links busybox's.
pub const BUSYBOX: &str = "/bin/busybox";

fn failed(what: &str, message: impl std::fmt::Display) -> Error {
    Error::Start { component: what.into(), message: message.to_string(), log: PathBuf::new(), tail: String::new() }
}

/// `name:tag` without the registry host (`quay.io/a/b` → `a/b`): the path the cluster's
/// registry holds a mirrored image at.
fn mirrored_path(image: &str) -> &str {
    image.split_once('/').map_or(image, |(_, path)| path)
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

/// Whether an ELF program asks for a dynamic loader (`PT_INTERP`): such a program cannot
/// run in an image without its libraries.
fn is_dynamic(elf: &[u8]) -> bool {
    let u16_at = |o: usize| elf.get(o..o + 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u64_at =
        |o: usize| elf.get(o..o + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize);
    if elf.get(..4) != Some(b"\x7fELF") {
        return false;
    }
    let (offset, size, count) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| elf.get(offset + i * size..offset + i * size + 4) == Some(&3u32.to_le_bytes()[..]))
}

impl Cluster {
    /// Pushes OLM's image and opm's into the cluster's registry at their quay.io paths;
    /// returns the names pods use (`quay.io/operator-framework/olm:v0.38.0`, `…/opm:v1.73.0`).
    pub async fn push_olm_v0_images(&self) -> Result<(String, String), Error> {
        let registry =
            self.registry.as_deref().ok_or_else(|| failed("OLM v0's images", "the cluster has no real node"))?;
        let program = |name: &str| tools::program(name).and_then(|p| read(&p));
        let cp = read(Path::new(BUSYBOX)).map_err(|_| Error::MissingProgram {
            name: "busybox-static (Debian), OLM's /bin/cp".into(),
            path: BUSYBOX.into(),
        })?;
        if is_dynamic(&cp) {
            return Err(failed("OLM v0's image", format!("{BUSYBOX} is linked dynamically: install busybox-static")));
        }
        let (olm, catalog, copy_content, cpb) =
            (program("olm")?, program("catalog")?, program("copy-content")?, program("cpb")?);
        let binaries =
            mo_images::OlmBinaries { olm: &olm, catalog: &catalog, copy_content: &copy_content, cpb: &cpb, cp: &cp };
        let olm_image = (format!("{IMAGE}:{VERSION}"), mo_images::olm_image(&binaries, VERSION));
        let opm = mo_images::opm_image(&program("opm")?, &program("grpc-health-probe")?, OPM_VERSION);
        let opm_image = (format!("{OPM_IMAGE}:{OPM_VERSION}"), opm);
        let options = mo_images::push::PushOptions {
            access: mo_images::registry::Access { insecure: true, ..Default::default() },
            force: true,
            quiet: true,
        };
        for (name, image) in [&olm_image, &opm_image] {
            let reference = format!("{registry}/{}", mirrored_path(name));
            mo_images::push::push(image, &reference, &options).await.map_err(|e| failed(name, e))?;
        }
        Ok((olm_image.0, opm_image.0))
    }
}

/// Where `scripts/build-go-tools.sh olm-v0` copies the quickstart manifests.
fn share() -> PathBuf {
    tools::share_dir().join("olm-v0")
}

fn share_file(name: &str) -> Result<String, Error> {
    let path = share().join(name);
    std::fs::read_to_string(&path).map_err(|_| Error::MissingProgram {
        name: format!("OLM v0's {name} (scripts/build-go-tools.sh olm-v0)"),
        path,
    })
}

/// OLM v0's CRDs (CatalogSource, ClusterServiceVersion, InstallPlan, OLMConfig,
/// OperatorCondition, OperatorGroup, Operator, Subscription), from its chart.
pub fn crds() -> Result<String, Error> {
    share_file("crds.yaml")
}

/// The objects of OLM's release manifests (its chart rendered with its upstream values, the
/// images named by tag — the pushed images are built here, so their digests are their own —
/// and the pinned opm image, as its release sets it), less two: the `packageserver` CSV (the
/// optional PackageManifest API, which needs `/bin/package-server`, not built) and the
/// `operatorhubio-catalog` CatalogSource (an image on the internet). Everything else —
/// namespaces with their Pod Security labels, RBAC, network policies, OLMConfig, Services,
/// Deployments, OperatorGroups — is applied as upstream's release has it.
pub fn install_manifests() -> Result<Vec<Value>, Error> {
    adapt(&share_file("olm.yaml")?)
}

fn adapt(text: &str) -> Result<Vec<Value>, Error> {
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let object: Value = serde::Deserialize::deserialize(document).map_err(|e| failed("OLM v0's olm.yaml", e))?;
        let packageserver = object["kind"] == "ClusterServiceVersion" && object["metadata"]["name"] == "packageserver";
        if object.is_null() || packageserver || object["kind"] == "CatalogSource" {
            continue;
        }
        objects.push(object);
    }
    let image = format!("{IMAGE}:{VERSION}");
    let deployments: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Deployment").collect();
    let images: Vec<&str> =
        deployments.iter().filter_map(|d| d["spec"]["template"]["spec"]["containers"][0]["image"].as_str()).collect();
    if deployments.len() != 2 || images.iter().any(|i| *i != image) {
        return Err(failed(
            "OLM v0's olm.yaml",
            format!("expected the olm-operator and catalog-operator Deployments of {image}, found {images:?}"),
        ));
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of OLM's rendered chart: its namespace, Deployments, and the two objects
    /// left out.
    const RELEASE: &str = r#"
---
# Source: olm/templates/0000_50_olm_00-namespace.yaml
apiVersion: v1
kind: Namespace
metadata: {name: olm, labels: {pod-security.kubernetes.io/enforce: restricted}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: olm-operator, namespace: olm}
spec: {template: {spec: {containers: [{name: olm-operator, image: "quay.io/operator-framework/olm:v0.38.0"}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: catalog-operator, namespace: olm}
spec: {template: {spec: {containers: [{name: catalog-operator, image: "quay.io/operator-framework/olm:v0.38.0",
  args: [--namespace, olm, --opmImage=quay.io/operator-framework/opm:v1.73.0]}]}}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {name: packageserver, namespace: olm}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: operatorhubio-catalog, namespace: olm}
"#;

    #[test]
    fn the_release_manifests_leave_out_the_packageserver_and_the_internets_catalog() {
        let objects = adapt(RELEASE).unwrap();
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Namespace", "Deployment", "Deployment"]);
    }

    #[test]
    fn manifests_of_another_olm_image_are_refused_naming_what_was_found() {
        let other = RELEASE.replacen("olm:v0.38.0", "olm@sha256:e74b", 1);
        let err = adapt(&other).unwrap_err().to_string();
        assert!(err.contains("olm@sha256:e74b") && err.contains("olm:v0.38.0"), "{err}");
    }

    #[test]
    fn the_versions_are_the_ones_the_modules_pin() {
        let pinned = |module: &str, path: &str| {
            let go_mod = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools").join(module).join("go.mod"),
            )
            .unwrap();
            go_mod
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{path} ")))
                .map(|v| v.split_whitespace().next().unwrap().to_string())
        };
        assert_eq!(
            pinned("olm-v0", "github.com/operator-framework/operator-lifecycle-manager").as_deref(),
            Some(VERSION)
        );
        assert_eq!(pinned("opm", "github.com/operator-framework/operator-registry").as_deref(), Some(OPM_VERSION));
    }

    #[test]
    fn a_program_with_a_dynamic_loader_is_told_apart_from_a_static_one() {
        let mut elf = vec![0u8; 0x40 + 2 * 56];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        elf[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        elf[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
        elf[0x40..0x44].copy_from_slice(&1u32.to_le_bytes());
        assert!(!is_dynamic(&elf), "PT_LOAD only");
        elf[0x40 + 56..0x40 + 60].copy_from_slice(&3u32.to_le_bytes());
        assert!(is_dynamic(&elf), "PT_INTERP");
    }

    #[test]
    fn a_mirrored_image_is_its_path_without_the_host() {
        assert_eq!(mirrored_path("quay.io/operator-framework/olm:v0.38.0"), "operator-framework/olm:v0.38.0");
    }
}
